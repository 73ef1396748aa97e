"""What a session's events become as Claude Code's metrics and events: a pure translation.

The :class:`Recorder` is subscribed to the session's bus (and answers the prompt and error
points); it hands counter increments and log events to a :class:`Sink` and knows nothing of
OpenTelemetry. Names, attribute keys, units and value kinds are Claude Code 2.1.328's, as
recorded in tests/data/otel/claude_code_2.1.328.json; docs/monitoring.md says where keel differs."""

from __future__ import annotations

import getpass
import hashlib
import platform
import re
import shlex
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import msgspec

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    PermissionDecided,
    RequestStarted,
    RunFinished,
    SessionStarted,
    StreamRetry,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolResults,
    new_id,
)
from agentkeel.core.extensions import PromptInfo
from agentkeel.core.provider import ProviderError
from agentkeel.core.types import ToolResultBlock
from agentkeel.policy.redact import redact
from agentkeel.telemetry.config import TelemetryConfig
from agentkeel.tools import effects_of

METER = "com.anthropic.claude_code"  # Claude Code's instrumentation scope names, kept for its dashboards
EVENTS = "com.anthropic.claude_code.events"
REDACTED = "<REDACTED>"

Attributes = dict[str, str | int | float | bool | list[str]]


class Metric(msgspec.Struct, frozen=True):
    name: str
    unit: str
    description: str


# every counter keel exports: a monotonic sum of doubles, delta temporality by default
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("claude_code.session.count", "", "Count of CLI sessions started"),
        Metric(
            "claude_code.lines_of_code.count",
            "",
            "Count of lines of code modified, with the 'type' attribute indicating whether lines were added or "
            "removed and the 'model' attribute indicating which model made the change",
        ),
        Metric("claude_code.pull_request.count", "", "Number of pull requests created"),
        Metric("claude_code.commit.count", "", "Number of git commits created"),
        Metric("claude_code.cost.usage", "USD", "Cost of the Claude Code session"),
        Metric("claude_code.token.usage", "tokens", "Number of tokens used"),
        Metric(
            "claude_code.code_edit_tool.decision",
            "",
            "Count of code editing tool permission decisions (accept/reject) for Edit, Write, and NotebookEdit tools",
        ),
        Metric("claude_code.active_time.total", "s", "Total active time in seconds"),
    )
}


def edits_files(name: str) -> bool:
    """A tool Claude Code's ``code_edit_tool`` metrics count: one that changes the files its input
    names (Edit, MultiEdit, Write, NotebookEdit), asked of its declared effects."""
    effects = effects_of(name)
    return effects.writes and bool(effects.path_fields) and not effects.shell


_SEGMENTS = re.compile(r"&&|\|\||[;|&\n()]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MAX_ERROR = 500  # characters of an error message exported

# the language of an edited file, as Claude Code names it (by extension)
LANGUAGES: dict[str, str] = {
    ".py": "Python", ".pyi": "Python", ".js": "JavaScript", ".mjs": "JavaScript", ".cjs": "JavaScript",
    ".jsx": "JavaScript", ".ts": "TypeScript", ".tsx": "TypeScript", ".go": "Go", ".rs": "Rust",
    ".java": "Java", ".kt": "Kotlin", ".rb": "Ruby", ".php": "PHP", ".c": "C", ".h": "C", ".cc": "C++",
    ".cpp": "C++", ".hpp": "C++", ".cs": "C#", ".swift": "Swift", ".scala": "Scala", ".sh": "Shell",
    ".bash": "Shell", ".zsh": "Shell", ".md": "Markdown", ".json": "JSON", ".yaml": "YAML", ".yml": "YAML",
    ".toml": "TOML", ".html": "HTML", ".css": "CSS", ".scss": "SCSS", ".sql": "SQL", ".xml": "XML",
    ".txt": "Plain text", ".ipynb": "Jupyter Notebook", ".lua": "Lua", ".dart": "Dart", ".ex": "Elixir",
    ".exs": "Elixir", ".erl": "Erlang", ".hs": "Haskell", ".ml": "OCaml", ".r": "R", ".vue": "Vue",
    ".svelte": "Svelte", ".tf": "HCL", ".dockerfile": "Dockerfile",
}  # fmt: skip


class Sink(Protocol):
    """Where the recorder's output goes (the OpenTelemetry SDK, or a test's list)."""

    def add(self, metric: str, value: float, attributes: Attributes) -> None: ...

    def emit(self, event: str, attributes: Attributes) -> None: ...


def language(path: str) -> str:
    p = Path(path)
    if p.name.lower() == "dockerfile":
        return "Dockerfile"
    return LANGUAGES.get(p.suffix.lower(), "unknown")


def user_id(env: dict[str, str]) -> str:
    """An anonymous, stable id of the user on this machine (Claude Code's is a hash too)."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = env.get("USER", "")
    return hashlib.sha256(f"keel:{who}@{platform.node()}".encode()).hexdigest()


def host_resource() -> Attributes:
    arch = platform.machine().lower()
    return {
        "host.arch": {"x86_64": "amd64", "aarch64": "arm64"}.get(arch, arch),
        "os.type": platform.system().lower(),
        "os.version": platform.release(),
    }


def terminal_type(env: dict[str, str]) -> str:
    for name in ("TERM_PROGRAM", "TERMINAL_EMULATOR"):
        if env.get(name):
            return env[name]
    return env.get("TERM", "") or "non-interactive"


def commands(command: str) -> list[list[str]]:
    """The simple commands of a shell line, as words, without leading ``VAR=value`` assignments."""
    out: list[list[str]] = []
    for segment in _SEGMENTS.split(command):
        try:
            words = shlex.split(segment)
        except ValueError:
            words = segment.split()
        while words and _ASSIGNMENT.match(words[0]):
            words = words[1:]
        if words:
            out.append(words)
    return out


def git_subcommand(words: list[str]) -> str:
    """``git [-C dir] [-c k=v] [--opt] SUB ...``: SUB, or "" when the words are no git command."""
    if not words or Path(words[0]).name != "git":
        return ""
    rest = iter(words[1:])
    for word in rest:
        if word in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
            next(rest, None)
        elif not word.startswith("-"):
            return word
    return ""


DIFF_STEPS = 1000  # the most added + removed lines a diff looks for before counting lines that differ


def changed_lines(old: str, new: str) -> tuple[int, int]:
    """(added, removed) lines between two texts, as Claude Code counts them: the shortest line
    diff (Myers' algorithm, as its diff library). It runs in the bus subscriber, so its work is
    bounded: the common first and last lines are set aside, and a diff of more than ``DIFF_STEPS``
    lines counts the lines that differ as multisets instead (linear; never more than the diff)."""
    a, b = old.splitlines(), new.splitlines()
    start = 0
    while start < len(a) and start < len(b) and a[start] == b[start]:
        start += 1
    end = 0
    while end < len(a) - start and end < len(b) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    a, b = a[start : len(a) - end], b[start : len(b) - end]
    if not a or not b:
        return len(b), len(a)
    distance = _edit_distance(a, b, DIFF_STEPS)
    if distance is None:
        before, after = Counter(a), Counter(b)
        return sum((after - before).values()), sum((before - after).values())
    common = (len(a) + len(b) - distance) // 2
    return len(b) - common, len(a) - common


def _edit_distance(a: list[str], b: list[str], limit: int) -> int | None:
    """The fewest lines added plus removed to turn ``a`` into ``b`` (Myers, "An O(ND) difference
    algorithm"), or None past ``limit``."""
    n, m = len(a), len(b)
    furthest = {1: 0}  # per diagonal k = x - y, the furthest x reached
    for d in range(min(limit, n + m) + 1):
        for k in range(-d, d + 1, 2):
            down = k == -d or (k != d and furthest[k - 1] < furthest[k + 1])  # a line added, else removed
            x = furthest[k + 1] if down else furthest[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            furthest[k] = x
            if x >= n and y >= m:
                return d
    return None


def _content_size(block: ToolResultBlock) -> int:
    content = block.content
    if isinstance(content, str):
        return len(content.encode("utf-8", "replace"))
    return len(msgspec.json.encode(content))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Request(msgspec.Struct):
    started: float
    first_token: float | None = None


class Recorder:
    """One session's translation of events into metrics and events."""

    def __init__(
        self,
        config: TelemetryConfig,
        sink: Sink,
        *,
        session_id: str,
        model: str,
        provider: str,
        env: dict[str, str],
        version: str,
        mode: Callable[[], str] = lambda: "default",
    ) -> None:
        self.config = config
        self.sink = sink
        self.model = model
        self.mode = mode
        self.sequence = 0
        self.prompt_id = ""
        self.base: Attributes = dict(config.resource)
        self.base["user.id"] = user_id(env)
        if config.include_session_id:
            self.base["session.id"] = session_id
        if config.include_version:
            self.base["app.version"] = version
        self.base["anthropic.provider"] = "firstParty" if provider == "anthropic" else provider
        self.base["anthropic.custom_base_url"] = bool(env.get("ANTHROPIC_BASE_URL") or env.get("OPENAI_BASE_URL"))
        self.base["terminal.type"] = terminal_type(env)
        self._request: _Request | None = None
        self._attempts = 0
        self._decisions: dict[str, tuple[str, str]] = {}  # tool_use_id -> (decision, source)
        self._finished: dict[str, ToolFinished] = {}  # waiting for the result's size
        self._originals: dict[str, str] = {}  # Write over a file: its text before the call
        self._busy_since: float | None = None

    # -- the sink, with the common attributes

    def _add(self, metric: str, value: float, **attributes: str | int | float | bool) -> None:
        self.sink.add(metric, float(value), {**self.base, **attributes})

    def _emit(self, name: str, **attributes: Any) -> None:
        attrs: Attributes = dict(self.base)
        attrs["event.name"] = name
        attrs["event.timestamp"] = _now()
        attrs["event.sequence"] = self.sequence
        self.sequence += 1
        if self.prompt_id:
            attrs["prompt.id"] = self.prompt_id
        attrs.update(attributes)
        self.sink.emit(f"claude_code.{name}", attrs)

    def _text(self, text: str) -> str:
        """A text the user asked to export (OTEL_LOG_USER_PROMPTS=1): secrets masked all the same."""
        return redact(text) if self.config.log_user_prompts else REDACTED

    # -- the session's points

    def started(self, source: str) -> None:
        start_type = {"startup": "fresh"}.get(source, source)
        self._add("claude_code.session.count", 1, start_type=start_type)

    def prompt(self, info: PromptInfo) -> None:
        self.prompt_id = new_id()
        self._busy_since = time.monotonic()
        text = self._text(info.text)
        self._emit(
            "user_prompt",
            prompt_length=str(len(info.text)),
            prompt=text,
            prompt_text=text,
            **{"message.uuid": new_id()},
        )

    def error(self, err: ProviderError) -> None:
        """The request failed for good (after the provider's retries)."""
        self._api_error(str(err), err.status, self._attempts + 1)

    def _api_error(self, message: str, status: int | None, attempt: int) -> None:
        duration = int((time.monotonic() - self._request.started) * 1000) if self._request else 0
        attrs: dict[str, Any] = {
            "model": self.model,
            "error": redact(message)[:MAX_ERROR],
            "duration_ms": duration,
            "attempt": attempt,
            "speed": "normal",
            "query_source": "main",
        }
        if status is not None:
            attrs["status_code"] = status
        self._emit("api_error", **attrs)

    # -- the bus

    def __call__(self, event: Event) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _session_started(self, event: SessionStarted) -> None:
        self.started(event.source)

    def _request_started(self, event: RequestStarted) -> None:
        self._request = _Request(started=time.monotonic())
        self._attempts = 0

    def _delta(self, event: TextDelta | ThinkingDelta) -> None:
        if self._request is not None and self._request.first_token is None:
            self._request.first_token = time.monotonic()

    def _retry(self, event: StreamRetry) -> None:
        self._attempts = event.attempt
        status = re.search(r"\b([45]\d\d)\b", event.error)
        self._api_error(event.error, int(status.group(1)) if status else None, event.attempt)

    def _assistant(self, event: AssistantMessage) -> None:
        now = time.monotonic()
        request, self._request = self._request, None
        duration = int((now - request.started) * 1000) if request else 0
        ttft = int(((request.first_token or now) - request.started) * 1000) if request else 0
        model = event.model or self.model
        usage = event.usage
        for kind, value in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cacheRead", usage.cache_read_tokens),
            ("cacheCreation", usage.cache_write_tokens),
        ):
            self._add("claude_code.token.usage", value, type=kind, model=model, query_source="main")
        self._add("claude_code.cost.usage", event.cost_usd, model=model, query_source="main")
        self._emit(
            "api_request",
            model=model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_creation_tokens=usage.cache_write_tokens,
            cache_creation_5m_tokens=usage.cache_write_tokens,
            cache_creation_1h_tokens=0,
            cost_usd=float(event.cost_usd),
            cost_usd_micros=round(event.cost_usd * 1_000_000),
            duration_ms=duration,
            ttft_ms=ttft,
            speed="normal",
            query_source="main",
        )
        text = event.message.text()
        if text and not event.message.tool_uses():
            self._emit(
                "assistant_response",
                response_length=len(text),
                response=self._text(text),
                model=model,
                query_source="main",
                **{"message.uuid": event.uuid},
            )

    def _decided(self, event: PermissionDecided) -> None:
        decision = "accept" if event.decision == "allow" else "reject"
        if event.source == "hook":
            source = "hook"
        elif event.source == "ask":
            source = "user_temporary" if decision == "accept" else "user_reject"
        else:
            source = "config"
        self._decisions[event.tool_use_id] = (decision, source)
        self._emit(
            "tool_decision",
            decision=decision,
            source=source,
            tool_name=event.tool_name,
            tool_use_id=event.tool_use_id,
            tool_source="mcp" if event.tool_name.startswith("mcp__") else "builtin",
            permission_mode=self.mode(),
        )

    def before_edit(self, name: str, tool_input: dict[str, Any], tool_use_id: str) -> None:
        """A Write over an existing file: keep its text, for the lines it changes."""
        path = tool_input.get("file_path")
        if "content" not in tool_input or not isinstance(path, str):  # a whole-file write (Write)
            return
        try:
            file = Path(path)
            if file.is_file() and file.stat().st_size <= 2_000_000:
                self._originals[tool_use_id] = file.read_text(encoding="utf-8", errors="replace")
        except (OSError, ValueError):  # unreadable, or no path at all (a NUL in it): no line count
            pass

    def _tool_finished(self, event: ToolFinished) -> None:
        decision = self._decisions.pop(event.tool_use_id, None)
        original = self._originals.pop(event.tool_use_id, None)
        if edits_files(event.name) and decision is not None:
            path = event.input.get("file_path") or event.input.get("notebook_path") or ""
            self._add(
                "claude_code.code_edit_tool.decision",
                1,
                decision=decision[0],
                source=decision[1],
                tool_name=event.name,
                language=language(str(path)),
            )
        if decision is not None and decision[0] == "reject":
            return  # Claude Code reports no result for a call that never ran
        self._finished[event.tool_use_id] = event
        if event.is_error:
            return
        if edits_files(event.name):
            self._lines(event, original)
        if effects_of(event.name).shell:
            for words in commands(str(event.input.get("command", ""))):
                if git_subcommand(words) == "commit":
                    self._add("claude_code.commit.count", 1)
                elif words[:3] == ["gh", "pr", "create"]:
                    self._add("claude_code.pull_request.count", 1)

    def _lines(self, event: ToolFinished, original: str | None) -> None:
        data = event.input  # told apart by their input's shape, as the tools' schemas define it
        if "old_string" in data:
            added, removed = changed_lines(str(data.get("old_string", "")), str(data.get("new_string", "")))
        elif "edits" in data:
            added = removed = 0
            for op in data.get("edits") or []:
                if isinstance(op, dict):
                    a, r = changed_lines(str(op.get("old_string", "")), str(op.get("new_string", "")))
                    added, removed = added + a, removed + r
        elif "content" in data:
            added, removed = changed_lines(original or "", str(data.get("content", "")))
        else:
            return
        if added:
            self._add("claude_code.lines_of_code.count", added, type="added", model=self.model)
        if removed:
            self._add("claude_code.lines_of_code.count", removed, type="removed", model=self.model)

    def _results(self, event: ToolResults) -> None:
        for block in event.message.content:
            if not isinstance(block, ToolResultBlock):
                continue
            finished = self._finished.pop(block.tool_use_id, None)
            if finished is None:
                continue
            attrs: dict[str, Any] = {
                "tool_name": finished.name,
                "tool_use_id": finished.tool_use_id,
                "success": "false" if finished.is_error else "true",
                "duration_ms": str(finished.duration_ms),
                "tool_input_size_bytes": str(len(msgspec.json.encode(finished.input))),
                "tool_result_size_bytes": str(_content_size(block)),
            }
            if finished.is_error:
                attrs["error"] = redact(finished.summary)[:MAX_ERROR]
            self._emit("tool_result", **attrs)

    def _run_finished(self, event: RunFinished) -> None:
        if self._busy_since is not None:
            self._add("claude_code.active_time.total", time.monotonic() - self._busy_since, type="cli")
            self._busy_since = None


_HANDLERS: dict[type[Event], Callable[[Recorder, Any], None]] = {
    SessionStarted: Recorder._session_started,
    RequestStarted: Recorder._request_started,
    TextDelta: Recorder._delta,
    ThinkingDelta: Recorder._delta,
    StreamRetry: Recorder._retry,
    AssistantMessage: Recorder._assistant,
    PermissionDecided: Recorder._decided,
    ToolFinished: Recorder._tool_finished,
    ToolResults: Recorder._results,
    RunFinished: Recorder._run_finished,
}
