"""Markdown files with a YAML frontmatter block: the format of agents, skills and commands.

PyYAML is imported on first use only (never on the path of ``keel --version``).
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


def split(text: str) -> tuple[str | None, str]:
    """(frontmatter text or None, body)."""
    if not text.startswith("---"):
        return None, text
    lines = text.splitlines(keepends=True)
    if lines[0].strip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    return None, text


_SIMPLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):[ \t]*(.*?)[ \t]*$")


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
        m = _SIMPLE.match(line)
        if m is None:
            return None
        value = m.group(2)
        if value[:1] in ("[", "{", "|", ">", "&", "*", "!", "-", "@", "`", "%") or " #" in value:
            return None
        if value[:1] in ("'", '"') and (len(value) < 2 or value[-1] != value[0]):
            return None
        out[m.group(1)] = _scalar(value)
    return out


def parse(text: str, path: Path) -> Document:
    head, body = split(text)
    meta: dict[str, Any] = {}
    simple = _simple(head) if head is not None else None
    if simple is not None:
        return Document(path, simple, body.strip("\n"))
    if head is not None and head.strip():
        import yaml  # type: ignore[import-untyped]

        try:
            data = yaml.safe_load(head)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            raise FrontmatterError(f"{path}: the YAML frontmatter is not valid{where}; fix it or remove it") from None
        if data is not None and not isinstance(data, dict):
            raise FrontmatterError(f"{path}: the frontmatter must be a mapping of keys (name: ..., description: ...)")
        meta = {str(k): v for k, v in (data or {}).items()}
    return Document(path, meta, body.strip("\n"))


def read(path: Path) -> Document:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise FrontmatterError(f"{path}: cannot read ({e.strerror or e})") from None
    return parse(text, path)


def names(value: Any) -> list[str] | None:
    """A tool list as Claude Code writes it: ``Read, Grep`` or a YAML list; None when absent."""
    if value is None:
        return None
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, list):
        return [str(p).strip() for p in value if str(p).strip()]
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
