"""Model providers behind :class:`agentkeel.core.provider.Provider`.

Per wire format: ``<format>_format`` is the format itself, sans-IO (request body, folding a
stream into one response); ``<format>_wire`` is keel's own client (the default ``wire``
transport); ``anthropic_messages`` and ``openai_chat`` adapt the official SDKs (the ``sdk``
transport). ``endpoints`` reads base URLs, credentials, headers and the timeout from the
environment; ``_http`` is the shared httpx session, ``_sse`` the event-stream decoder, ``_errors``
the classification of failures; ``factory`` picks the provider and transport. Nothing here
imports httpx or an SDK at import time.
"""
