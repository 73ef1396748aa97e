"""Markdown files with a YAML frontmatter block: agents, skills, commands, output styles, rules.

One parser, as lenient as Claude Code: a byte-order mark, CRLF line ends, ``---`` with trailing
spaces, an empty block, tabs, and values YAML would refuse but people write (``description: Use
it when: the tests fail``, ``paths: src/**/*.{ts,tsx}``) all read as the author meant. In order:
flat ``key: value`` lines without YAML at all (most files); YAML (PyYAML, imported on first use,
never on the path of ``keel --version``); YAML again with the plain values that broke it quoted;
then the ``key: value`` / ``- item`` lines alone. Only a block none of these reads is an error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec


class FrontmatterError(ValueError):
    """A definition file whose frontmatter cannot be read: the message names the file."""


class Document(msgspec.Struct, frozen=True):
    path: Path
    meta: dict[str, Any]
    body: str


def _normal(text: str) -> str:
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def split(text: str) -> tuple[str | None, str]:
    """(frontmatter text or None, body)."""
    text = _normal(text)
    if not text.startswith("---"):
        return None, text
    lines = text.splitlines(keepends=True)
    if lines[0].strip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    return None, text


_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_ITEM = re.compile(r"^[ \t]*-[ \t]*(.*?)[ \t]*$")
_YAML_START = ("[", "{", "|", ">", "&", "*", "!", "-", "@", "`", "%", "?", ",")


def _scalar(raw: str) -> Any:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("", "null", "~"):
        return None
    if raw.isdigit():
        return int(raw)
    return raw


def _simple(head: str) -> dict[str, Any] | None:
    """Flat ``key: value`` lines (most definitions) without importing PyYAML; None for anything more.

    More lenient than YAML in one way, as Claude Code is: ``description: Use it: always`` is a string."""
    out: dict[str, Any] = {}
    for line in head.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _KEY.match(line)
        if m is None:
            return None
        value = m.group(2) or ""
        if value[:1] in _YAML_START or " #" in value:
            return None
        if value[:1] in ("'", '"') and (len(value) < 2 or value[-1] != value[0] or "\\" in value or "''" in value):
            return None  # unclosed, or escapes YAML must read
        out[m.group(1)] = _scalar(value)
    return out


def _quoted(head: str) -> str:
    """The block with each top-level plain value that YAML would misread single-quoted, and tabs
    that indent turned into spaces."""
    out = []
    for line in head.splitlines():
        stripped = line.lstrip("\t")
        if len(stripped) != len(line):
            line = "  " * (len(line) - len(stripped)) + stripped
        m = _KEY.match(line)
        value = (m.group(2) or "") if m else ""
        plain = value[:1] not in "[{|>\"'" and (": " in value or " #" in value or value[:1] in _YAML_START)
        if m and value and (plain or (value[0] in "[{" and _text_after_flow(value))):
            line = f"{m.group(1)}: '" + value.replace("'", "''") + "'"
        out.append(line)
    return "\n".join(out)


def _text_after_flow(value: str) -> bool:
    """Whether the list or mapping ``value`` opens closes before the value ends: ``[user prompt]
    [orchestration prompt]`` (an ``argument-hint`` as people write it) does, ``[a, b]`` and
    ``[src/*.{ts,tsx}, b]`` do not, nor does an unclosed ``[a`` (a mistake to report)."""
    depth = 0
    for i, c in enumerate(value):
        depth += (c in "[{") - (c in "]}")
        if depth == 0:
            return i < len(value) - 1
    return False


def _lines(head: str) -> dict[str, Any]:
    """The last resort: ``key: value``, ``key: [a, b]`` and ``- item`` lines, values as written. A
    line that starts no key (indented, or no ``key:``), or any line inside an unclosed ``<example>``
    (agent descriptions carry ``user: ...`` dialogue), continues the value before it. Empty when
    a value opens a list, mapping or quote it does not close."""
    data: dict[str, Any] = {}
    key, lines = "", list[str]()

    def flush() -> None:
        if key and lines:
            data[key] = _scalar("\n".join(lines).strip())

    for raw in head.splitlines():
        value_open = bool(lines) and "\n".join(lines).count("<example>") > "\n".join(lines).count("</example>")
        m = None if value_open or raw[:1] in (" ", "\t") else _KEY.match(raw)
        if lines and m is None:
            if not (raw.lstrip().startswith("#") and not value_open):
                lines.append(raw.strip())
            continue
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        item = _ITEM.match(raw)
        if item and key and m is None:
            current = data.get(key)
            items = current if isinstance(current, list) else []
            items.append(_unquote(item.group(1)))
            data[key] = items
            continue
        if m is None:
            continue
        flush()
        key, value, lines = m.group(1), m.group(2) or "", []
        if value[:1] in ("[", "{", "'", '"') and (
            len(value) < 2 or value[-1] != {"[": "]", "{": "}"}.get(value[0], value[0])
        ):
            return {}  # an unclosed list, mapping or quote: a mistake to report, not a value to guess
        if value.startswith("[") and value.endswith("]"):
            data[key] = [_unquote(v) for v in split_list(value[1:-1]) if v.strip()]
        elif value[:1] in ("'", '"') or not value:
            data[key] = _scalar(value)
        else:
            lines = [value]
    flush()
    return data


def _unquote(value: str) -> str:
    value = value.strip()
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _yaml(head: str) -> tuple[Any, str]:
    """(data, "") or (None, why YAML refused it)."""
    import yaml  # type: ignore[import-untyped]

    try:
        return yaml.safe_load(head), ""
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        return None, f" (line {mark.line + 2})" if mark is not None else ""


def meta_of(head: str, path: Path | str = "<frontmatter>") -> dict[str, Any]:
    """The keys of a frontmatter block (the text between the ``---`` lines)."""
    simple = _simple(head)
    if simple is not None:
        return simple
    data, where = _yaml(head)
    if where or (data is not None and not isinstance(data, dict)):
        repaired, _ = _yaml(_quoted(head))
        data = repaired if isinstance(repaired, dict) else _lines(head)
        if not data:
            if where:
                raise FrontmatterError(f"{path}: the YAML frontmatter is not valid{where}; fix it or remove it")
            raise FrontmatterError(f"{path}: the frontmatter must be a mapping of keys (name: ..., description: ...)")
    return {str(k): v for k, v in (data or {}).items()}


def parse(text: str, path: Path) -> Document:
    head, body = split(text)
    meta = meta_of(head, path) if head is not None and head.strip() else {}
    return Document(path, meta, body.strip("\n"))


def read(path: Path) -> Document:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise FrontmatterError(f"{path}: cannot read ({e.strerror or e})") from None
    return parse(text, path)


def split_list(text: str) -> list[str]:
    """Split on commas outside braces and parentheses (``a/*.{ts,tsx}, b`` is two globs,
    ``Bash(git add:*, x)`` one rule)."""
    out, depth, cur = [], 0, ""
    for c in text:
        depth += (c in "{(") - (c in "})")
        if c == "," and depth <= 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    return [*out, cur]


_TOOL = re.compile(r"^[A-Za-z_][\w.-]*(?:\(.*\))?$")


def _words(item: str) -> list[str]:
    """``Read Grep Bash(git diff *)`` as three tool names (the Agent Skills form of a list:
    space-separated); anything else (a glob with a space in it) as it is."""
    parts, depth, cur = [], 0, ""
    for c in item:
        depth += (c == "(") - (c == ")")
        if c.isspace() and depth <= 0:
            if cur:
                parts.append(cur)
            cur = ""
        else:
            cur += c
    parts += [cur] if cur else []
    return parts if len(parts) > 1 and all(_TOOL.match(p) for p in parts) else [item]


def names(value: Any) -> list[str] | None:
    """A list as Claude Code writes it: ``Read, Grep``, ``Read Grep`` or a YAML list
    (``a/*.{ts,tsx}, b`` is two globs); None when absent."""
    if value is None:
        return None
    if isinstance(value, str):
        return [w for p in split_list(value) if p.strip() for w in _words(p.strip())]
    if isinstance(value, list):
        return [str(p).strip() for p in value if p is not None and str(p).strip()]
    return [str(value)]


def text(value: Any, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def flag(value: Any, default: bool = False) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    return bool(value)
