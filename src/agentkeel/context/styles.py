"""Output styles, as Claude Code has them: ``outputStyle`` names a built-in style (default,
Explanatory, Learning) or a Markdown file in ``.claude/output-styles/`` (project) or
``~/.claude/output-styles/`` (user), whose frontmatter gives ``name``, ``description`` and
``keep-coding-instructions``. A style other than the default replaces keel's coding guidance
unless it keeps it."""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentkeel.internal import frontmatter


class OutputStyle(msgspec.Struct, frozen=True):
    name: str
    description: str
    text: str
    keep_coding: bool = True
    path: Path | None = None


BUILTIN = {
    "default": OutputStyle("default", "keel's concise coding style", ""),
    "explanatory": OutputStyle(
        "Explanatory",
        "explains the choices it makes",
        "Between steps, add short 'Insight' notes that explain why the code is the way it is and what the "
        "choices you made trade off. Keep them brief and about this codebase.",
    ),
    "learning": OutputStyle(
        "Learning",
        "leaves small pieces for the user to write",
        "Work with the user as a teacher: explain your choices, and for small, meaningful pieces of code "
        "leave a TODO(human) marker and ask the user to write them, saying what the piece must do.",
    ),
}


def style_dirs(cwd: Path, home: Path) -> list[Path]:
    return [cwd / ".claude" / "output-styles", cwd / ".keel" / "output-styles", home / ".claude" / "output-styles"]


def find_style(name: str | None, cwd: Path, home: Path) -> tuple[OutputStyle, str]:
    """The style named (case-insensitive), and a warning when there is no such style."""
    if not name or name.lower() == "default":
        return BUILTIN["default"], ""
    for d in style_dirs(cwd, home):
        try:
            files = sorted(d.glob("*.md")) if d.is_dir() else []
        except OSError:
            continue
        for path in files:
            try:
                doc = frontmatter.read(path)
            except frontmatter.FrontmatterError:
                continue
            meta, body = doc.meta, doc.body
            style_name = str(meta.get("name") or path.stem)
            if style_name.lower() == name.lower() or path.stem.lower() == name.lower():
                keep = frontmatter.flag(meta.get("keep-coding-instructions"))
                return OutputStyle(style_name, frontmatter.text(meta.get("description")), body.strip(), keep, path), ""
    builtin = BUILTIN.get(name.lower())
    if builtin is not None:
        return builtin, ""
    known = ", ".join(s.name for s in BUILTIN.values())
    return BUILTIN["default"], (
        f"output style '{name}' not found (built-in: {known}; or add .claude/output-styles/{name}.md); using default"
    )
