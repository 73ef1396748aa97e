"""Markdown files with a YAML frontmatter block: the format of agents, skills and commands.

PyYAML is imported on first use only (never on the path of ``keel --version``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class FrontmatterError(ValueError):
    """A definition file whose frontmatter cannot be read: the message names the file."""


@dataclass(frozen=True)
class Document:
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


def parse(text: str, path: Path) -> Document:
    head, body = split(text)
    meta: dict[str, Any] = {}
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
