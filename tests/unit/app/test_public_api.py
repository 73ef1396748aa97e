"""The public surface (``agentkeel.__all__``) and the layer rule over every band."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import agentkeel

SRC = Path(agentkeel.__file__).parent

DOCUMENTED = {
    "__version__",
    "Runtime", "RuntimeOptions", "KeelError", "RunResult",
    "Extension", "Extensions", "ToolCall", "Verdict", "PromptInfo", "PromptVerdict", "StopInfo",
    "Tool", "ToolOutput", "ToolContext", "ToolError", "Services", "Workdir",
    "Event", "EventBus", "register_event_type", "SessionStarted", "SessionEnded", "UserMessage",
    "AssistantMessage", "ToolResults", "RequestStarted", "TextDelta", "ThinkingDelta", "StreamRetry",
    "ToolStarted", "ToolFinished", "CwdChanged", "PermissionDecided", "TodosUpdated", "Notice",
    "Interrupted", "RunFinished",
    "Message", "TextBlock", "ImageBlock", "ThinkingBlock", "ToolUseBlock", "ToolResultBlock", "Usage",
    "ModelRequest", "ModelResponse", "ProviderError",
    "PermissionMode", "PermissionDecision", "PermissionAnswer",
    "keel_home", "TrustStore", "replace",
}  # fmt: skip


def test_exported_names_are_exactly_the_documented_ones_and_all_resolve() -> None:
    assert set(agentkeel.__all__) == DOCUMENTED
    for name in agentkeel.__all__:
        assert getattr(agentkeel, name) is not None, name


def test_import_agentkeel_is_free() -> None:
    code = "import sys, agentkeel; print(sorted(m for m in sys.modules if m.startswith(('agentkeel.', 'pydantic'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['agentkeel._version']"


# --- layers ---------------------------------------------------------------------------------

# lowest to highest; a module may import its own band and those below, never above. The bands are
# the tree: ARCHITECTURE.md "Layers" draws them.
BANDS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("agentkeel.core",)),
    ("internal", ("agentkeel.internal", "agentkeel._version")),
    (
        "records",
        ("agentkeel.config", "agentkeel.session", "agentkeel.models", "agentkeel.protocol", "agentkeel.plugins"),
    ),
    ("actions", ("agentkeel.tools", "agentkeel.policy")),  # the tools, and what a call of one may do
    ("capabilities", ("agentkeel.context", "agentkeel.mcp", "agentkeel.memory")),
    ("extensions", ("agentkeel.hooks", "agentkeel.reliability", "agentkeel.telemetry")),
    ("agents", ("agentkeel.agents", "agentkeel.skills", "agentkeel.commands")),
    ("app", ("agentkeel.app", "agentkeel")),
    ("ui", ("agentkeel.ui",)),
]


def _band(module: str) -> int:
    best = -1
    best_len = -1
    for i, (_, prefixes) in enumerate(BANDS):
        for p in prefixes:
            if (module == p or (p != "agentkeel" and module.startswith(p + "."))) and len(p) > best_len:
                best, best_len = i, len(p)
    assert best >= 0, f"{module} is in no band: add it to BANDS"
    return best


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for f in SRC.rglob("*.py"):
        parts = f.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """keel modules this file imports, anywhere in it (lazy imports count). ``from pkg import sub``
    depends on ``pkg.sub`` when that is a module, else on ``pkg``."""
    deps: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            deps.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if sub in modules:
                    deps.add(sub)
                elif node.module in modules:
                    deps.add(node.module)
    return deps


def test_no_module_imports_a_higher_band() -> None:
    modules = _modules()
    for name, path in modules.items():
        for dep in _imports(path, modules):
            if name == "agentkeel" or (name == "agentkeel.ui.cli.main" and dep == "agentkeel.ui.cli.commands"):
                continue  # the package's lazy re-exports; main dispatches to subcommands
            assert _band(dep) <= _band(name), f"{name} ({BANDS[_band(name)][0]}) imports {dep} ({BANDS[_band(dep)][0]})"


def test_there_are_no_import_cycles() -> None:
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    graph["agentkeel"] = set()  # lazy re-exports are resolved on use, not at import
    for pkg in [m for m in modules if modules[m].name == "__init__.py"]:
        graph[pkg] = {d for d in graph[pkg] if not d.startswith(pkg + ".")}  # a package re-exporting its own modules
    seen: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for dep in sorted(graph.get(node, ())):
            if seen.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path[path.index(dep) :], dep]))
            if dep not in seen:
                visit(dep, [*path, dep])
        seen[node] = 2

    for name in sorted(graph):
        if name not in seen:
            visit(name, [name])


def test_front_ends_go_through_the_public_api() -> None:
    """The headless and interactive front ends (what a TUI, SDK or server copies) use
    ``agentkeel``'s surface, not core, permissions or session internals."""
    modules = _modules()
    for front in ("agentkeel.ui.cli.headless", "agentkeel.ui.cli.interactive"):
        for dep in _imports(modules[front], modules):
            assert not re.match(r"agentkeel\.(core|policy|session|app)\b", dep), f"{front} imports {dep}"
