"""Model providers: wire-format adapters behind :class:`agentkeel.core.provider.Provider`.

Each adapter imports its SDK lazily, inside the constructor, so that importing keel (or
``keel --version``) never pays for an SDK.
"""
