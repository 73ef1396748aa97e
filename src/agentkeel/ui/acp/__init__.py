"""``keel acp``: keel as an Agent Client Protocol (ACP v1) agent on stdio, for editors (Zed,
JetBrains IDEs, Neovim plugins), on the ACP Python SDK (``agent-client-protocol``, the ``acp``
extra). Each ACP session is a :class:`~agentkeel.app.runtime.Runtime`, driven as the TUI and
``keel serve`` drive one: its bus becomes ``session/update`` notifications (``updates``), its
permission asks ``session/request_permission`` (``agent``). Nothing here is imported unless
``keel acp`` runs."""
