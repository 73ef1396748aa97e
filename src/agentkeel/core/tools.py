"""Tools: the definition, the context a tool runs in, and the registry.

A tool's input is a model class: the JSON Schema the model sees and the validation of what the
model sends both come from that one definition. keel's own tools declare msgspec Structs
(``core/inputs.py``: no pydantic on their path at all); a pydantic model works too (the SDK,
plugins, MCP pass-through), and pydantic is imported only when such a tool's input is first
validated or its schema generated. keel's own tools also ship their schemas and load lazily
(``Tool.load``), so nothing before the first model request imports a tool module.
"""

from __future__ import annotations

import builtins
import logging
import posixpath
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import msgspec

from agentkeel.core.events import Event
from agentkeel.core.types import ImageBlock, TextBlock, ToolSpec

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

ToolGroup = Literal["fs", "system", "web", "data", "communication", "memory", "agents", "custom"]
ToolSource = Literal["built-in", "plugin", "skill", "mcp"]

T = TypeVar("T")
log = logging.getLogger("agentkeel.tools")


class ToolError(Exception):
    """Raised by a tool to return a clear error message to the model."""


class ToolInputError(ToolError):
    """The model sent input that does not fit the tool's schema."""


class ToolOutput(msgspec.Struct):
    content: str | list[TextBlock | ImageBlock]
    is_error: bool = False
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    # texts the model reads after the result, each a block of its own in the same message (a hook's
    # additional context, where Claude Code puts it): not part of what the tool returned
    notes: list[str] = msgspec.field(default_factory=list)

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class Services:
    """Per-session state and services shared by tools and extensions (read-file tracking,
    background shells, todos; later a subagent spawner, an MCP pool, a hook runner).

    Keyed by type. ``get`` creates a missing one with no arguments, so each tool family owns
    its state class and the core knows none of them; ``put`` provides one built elsewhere
    (an SDK host's object, a service that needs arguments).
    """

    def __init__(self) -> None:
        self._items: dict[type[Any], Any] = {}

    def get(self, cls: type[T]) -> T:
        item = self._items.get(cls)
        if item is None:
            item = cls()
            self._items[cls] = item
        return cast(T, item)

    def put(self, cls: type[T], item: T) -> T:
        if not isinstance(item, cls):
            raise TypeError(f"{type(item).__name__} is not a {cls.__name__}")
        self._items[cls] = item
        return item

    def find(self, cls: type[T]) -> T | None:
        """The service if one was provided or created, without creating it."""
        return cast("T | None", self._items.get(cls))

    async def aclose(self) -> None:
        """Close every service that has an async ``aclose`` (background shells, pools), each once;
        one that fails is logged and the rest still close."""
        for item in list(self._items.values()):
            close = getattr(item, "aclose", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:
                log.exception("closing %s failed", type(item).__name__)

    def values(self) -> Iterable[Any]:
        return self._items.values()


class Workdir(msgspec.Struct):
    """The session's live working directory: the one owner of "where the shell is".

    Bash moves it (a ``cd`` that persists between calls); the permission gate resolves
    relative paths against it; None means the project root (``ToolContext.cwd``)."""

    path: Path | None = None


class OpenFiles:
    """The user's view of the files, when a front end holds one (an editor's unsaved buffers: ``keel
    acp`` asks its client). Provided per session (``RuntimeOptions.services``); the file tools then
    read and write a text file through it. ``None`` / ``False``: not the front end's to handle, the
    disk is used as without it. Subagents see the same files."""

    share_with_subagents = True

    async def read_text(self, path: Path, line: int | None = None, limit: int | None = None) -> str | None:
        """The text (from 1-based ``line``, at most ``limit`` lines, when given), or None: read the disk."""
        return None

    async def write_text(self, path: Path, text: str) -> bool:
        return False


class ToolContext(msgspec.Struct):
    cwd: Path
    session_id: str
    services: Services
    emit: Callable[[Event], None]
    tool_use_id: str = ""
    additional_dirs: tuple[Path, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    scratch_dir: Path | None = None  # where tools may spill large output
    hidden_path: Callable[[Path], bool] | None = None  # files a directory search must skip (denied reads)

    @property
    def workdir(self) -> Path:
        """The base of relative paths: the session's working directory (where Bash's last ``cd``
        left it, ``Workdir``), else the project root. The permission gate resolves against the same."""
        moved = self.services.find(Workdir)
        return moved.path if moved is not None and moved.path is not None else self.cwd


class Effects(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a call of a tool does, declared once by the tool. Permissions, checkpoints, context,
    diffs, memory capture, pruning, comment checks and hook payloads ask this; no module outside
    ``tools/`` names a tool.

    ``rule`` is the Claude Code permission rule family that governs the tool (``Read`` rules cover
    every tool that reads files, ``Edit`` rules every tool that changes them). ``path_fields`` are
    the input fields naming a path; they are resolved once, against the session's working
    directory (``Tool.paths``). A tool that ``lists`` works in that directory when the call names
    no path; ``glob_field`` holds a glob whose literal prefix extends the path (what it can reach).
    ``named_by``: the input fields a rule's specifier names exactly (``Task(reviewer)``)."""

    rule: str | None = None
    path_fields: tuple[str, ...] = ()
    reads: bool = False  # reads the contents of the files at its paths (Read; Grep, which also lists)
    lists: bool = False  # walks a directory (Glob, LS list names; Grep reads what it walks)
    writes: bool = False  # changes the files at its paths: checkpoints snapshot them, diffs show them
    shell: bool = False  # runs a command line: the shell analyser decides, checkpoints snapshot the tree
    fetches: bool = False  # reaches a URL (the ``url`` input field)
    protected: bool = False  # its result is never pruned (plans, todos, skills, subagents)
    preview: Literal["head", "tail"] = "head"  # which end of its output a front end shows
    glob_field: str | None = None
    named_by: tuple[str, ...] = ()
    delegates: bool = False  # runs a subagent: the turn waits on it (a front end says so)
    sandboxed: bool = False  # its command runs in keel's Bash sandbox (autoAllowBashIfSandboxed may allow it)

    @property
    def touches_files(self) -> bool:
        """Reads, lists or writes files at the paths its input names (a ``Read``/``Edit`` rule's tools)."""
        return self.reads or self.lists or self.writes

    def named_paths(self, tool_input: Mapping[str, Any]) -> list[str]:
        """The paths a call names, as written (relative ones not yet resolved): ``path_fields``'
        values; ``.`` for a tool that lists and was given none; a glob's literal prefix joined on."""
        out = [v for f in self.path_fields if isinstance(v := tool_input.get(f), str) and v]
        if not out and self.lists:
            out = ["."]
        if self.glob_field is not None:
            out = [glob_reach(p, tool_input.get(self.glob_field)) for p in out]
        return out


NO_EFFECTS = Effects()


Runner = Callable[[Any, ToolContext], Awaitable[ToolOutput]]
Responder = Callable[[dict[str, Any], ToolOutput], Any]  # (tool_input, output) -> Claude Code's tool_response
Validator = Callable[[Any, ToolContext], Awaitable[None]]  # raises ToolError: the call cannot succeed


class Tool(msgspec.Struct, frozen=True, eq=False, dict=True):
    """A tool. ``load``, when set, returns the real tool on first use (its module, and pydantic,
    are imported then): a stand-in built from shipped data (name, description, schema, flags)
    whose ``input_model`` is None until then."""

    name: str
    description: str
    input_model: type[BaseModel] | type[msgspec.Struct] | None
    run: Runner
    group: ToolGroup = "custom"
    read_only: bool = False
    concurrency_safe: bool | None = None  # may run beside other such calls; None: same as read_only
    destructive: bool = False
    requires_approval: bool = False
    is_transactional: bool = False
    accesses_sensitive_data: bool = False
    is_external: bool = False
    timeout_s: float | None = None
    is_enabled: Callable[[], bool] | None = None
    source: ToolSource = "built-in"
    raw_schema: dict[str, Any] | None = None  # the schema shown to the model, when not generated (MCP, shipped)
    load: Callable[[], Tool] | None = None
    validate: Validator | None = None  # a cheap check of the parsed input, before anyone is asked
    effects: Effects = NO_EFFECTS  # what a call does: asked by everyone who must not name the tool
    respond: Responder | None = None  # the ``tool_response`` Claude Code's hooks receive for a call

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        if self.raw_schema is not None:
            return self.raw_schema
        return generated_schema(self.model())

    def model(self) -> type[BaseModel] | type[msgspec.Struct]:
        if self.input_model is not None:
            return self.input_model
        if self.load is None:
            raise TypeError(f"tool {self.name} has neither an input model nor a loader")
        return self.load().model()

    def paths(self, tool_input: Mapping[str, Any], base: Path) -> list[Path]:
        """The paths a call names (``effects.path_fields``), each resolved against ``base``, the
        session's working directory, as Claude Code resolves them. Nothing is read from disk."""
        out: list[Path] = []
        for value in self.effects.named_paths(tool_input):
            path = Path(value).expanduser()
            out.append(path if path.is_absolute() else base / path)
        return out

    def response(self, tool_input: dict[str, Any], output: ToolOutput) -> Any:
        """The ``tool_response`` Claude Code's hooks receive for this call: the tool's own shape
        (``respond``), else its text and plain metadata."""
        if self.respond is not None:
            return self.respond(tool_input, output)
        return default_response(output)

    @property
    def parallel(self) -> bool:
        return self.read_only if self.concurrency_safe is None else self.concurrency_safe

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, input_schema=self.input_schema)

    def parse(self, raw: dict[str, Any]) -> Any:
        """The call's input as an instance of the tool's input model; ToolInputError when it does not fit."""
        model = self.model()
        if issubclass(model, msgspec.Struct):
            from agentkeel.core.inputs import parse_struct

            try:
                return parse_struct(self.name, model, raw)
            except ValueError as e:
                raise ToolInputError(str(e)) from None
        from pydantic import ValidationError

        try:
            return model.model_validate(raw)
        except ValidationError as e:
            raise ToolInputError(format_validation_error(self.name, e)) from None

    async def precheck(self, raw: dict[str, Any], ctx: ToolContext) -> str:
        """Why this call would fail, found without running it (the tool's ``validate``, as Claude
        Code's ``validateInput``), or ''. The loop asks it before the permission check, so nobody is
        asked to approve a call that cannot succeed. A check that crashes finds nothing (the run,
        still gated, reports the problem)."""
        try:
            tool = self.load() if self.validate is None and self.load is not None else self
            if tool.validate is not None:
                await tool.validate(tool.parse(raw), ctx)
        except ToolError as err:
            return str(err)
        except Exception:
            log.exception("the input check of %s failed", self.name)
        return ""


def default_response(output: ToolOutput) -> dict[str, Any]:
    """The ``tool_response`` of a tool that declares no shape of its own: its text and plain metadata."""
    meta = {k: v for k, v in output.metadata.items() if isinstance(v, str | int | float | bool)}
    return {"output": output.text(), **meta}


def glob_reach(path: str, pattern: object) -> str:
    """Where a glob search can reach: its path joined with the pattern's literal prefix."""
    if not isinstance(pattern, str) or not pattern:
        return path
    literal = []
    for part in pattern.split("/"):
        if any(c in part for c in "*?[{"):
            break
        literal.append(part)
    joined = "/".join(literal)
    if pattern.startswith("/"):
        return joined or "/"
    return posixpath.join(path, joined) if joined else path


def format_validation_error(tool: str, err: ValidationError) -> str:
    parts = []
    for item in err.errors()[:6]:
        loc = ".".join(str(p) for p in item["loc"]) or "input"
        parts.append(f"{loc}: {item['msg']}")
    return f"Invalid input for {tool}: " + "; ".join(parts)


def generated_schema(model: type[BaseModel] | type[msgspec.Struct]) -> dict[str, Any]:
    """The model's JSON Schema without pydantic's titles and null noise (:func:`lean_schema`): the
    model does not need them and they cost tokens."""
    if issubclass(model, msgspec.Struct):
        from agentkeel.core.inputs import struct_schema

        schema = struct_schema(model)
    else:
        schema = _clean_schema(model.model_json_schema())
    lean: dict[str, Any] = lean_schema(schema)
    return lean


_NULL = {"type": "null"}


def lean_schema(node: Any) -> Any:
    """A schema without the optional-parameter noise of generated schemas: a property written
    ``{"anyOf": [T, {"type": "null"}], "default": null}`` becomes ``T`` (its description kept).
    It is still not required, so leaving it out says what null said; the input model, which
    judges the call, still accepts an explicit null. About 200 tokens a request for the built-ins."""
    if isinstance(node, list):
        return [lean_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: lean_schema(v) for k, v in node.items()}
    options = node.get("anyOf")
    if isinstance(options, list) and _NULL in options and "default" in node and node["default"] is None:
        rest = [o for o in options if o != _NULL]
        node = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
        if len(rest) == 1 and isinstance(rest[0], dict):
            return {**rest[0], **node}
        return {"anyOf": rest, **node}
    return node


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    cleaned = walk(schema)
    assert isinstance(cleaned, dict)
    return cleaned


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> bool:
        return self._tools.pop(name, None) is not None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def list(self) -> builtins.list[Tool]:
        return list(self._tools.values())

    def visible(self, hidden: Callable[[Tool], bool] | None = None) -> builtins.list[Tool]:
        """Tools the model is told about: enabled and not hidden by policy."""
        out = []
        for tool in self._tools.values():
            if tool.is_enabled is not None and not tool.is_enabled():
                continue
            if hidden is not None and hidden(tool):
                continue
            out.append(tool)
        return out
