"""keel's built-in tools, with Claude Code's names and input shapes."""

from __future__ import annotations

from agentkeel.core.tools import Tool


def builtin_tools(*, shipped: bool = True) -> list[Tool]:
    """The built-in tools; ``shipped``: with the schemas of ``tools/schemas.json`` (see there)."""
    from agentkeel.tools.files import file_tools
    from agentkeel.tools.schemas import with_shipped_schemas
    from agentkeel.tools.search import search_tools
    from agentkeel.tools.shell import shell_tools
    from agentkeel.tools.todo import todo_tools
    from agentkeel.tools.web import web_tools

    tools = [*file_tools(), *shell_tools(), *search_tools(), *web_tools(), *todo_tools()]
    return with_shipped_schemas(tools) if shipped else tools
