"""Model providers behind :class:`agentkeel.core.provider.Provider`.

Per wire format: ``<format>_format`` is the format itself, sans-IO (request body, folding a
stream into one response); ``<format>_wire`` is keel's own client (the default ``wire``
transport); ``anthropic_messages`` and ``openai_chat`` adapt the official SDKs (the ``sdk``
transport). ``endpoints`` reads base URLs, credentials, headers and the timeout from the
environment; ``_http`` is the shared httpx session, ``_sse`` the event-stream decoder, ``_errors``
the classification of failures; ``factory`` builds the provider a ``provider:model`` name asks for.
Nothing here imports httpx or an SDK at import time.

``WIRES`` is the one table of providers: the prefix of a ``provider:model`` name -> the module that
speaks its wire format. That module has ``make(info, env, transport) -> Provider`` (it reads its
own endpoint from ``env``; ``transport`` is the ``provider.transport`` setting, for a format with an
SDK alternative). Adding a wire format is that module, one line here, and its test; its models'
context windows and prices are data in ``models.json`` (unknown models get the fallback entry).
"""

WIRES: dict[str, str] = {
    "anthropic": "agentkeel.models.anthropic_wire",
    "openai": "agentkeel.models.openai_wire",  # and every OpenAI-compatible server:
    "ollama": "agentkeel.models.openai_wire",
    "vllm": "agentkeel.models.openai_wire",
    "lmstudio": "agentkeel.models.openai_wire",
    "llamacpp": "agentkeel.models.openai_wire",
    "openrouter": "agentkeel.models.openai_wire",
    "scripted": "agentkeel.models.scripted",
}
