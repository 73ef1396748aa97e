"""Finding and reading skills.

A skill is a folder with a ``SKILL.md`` (YAML frontmatter of SPEC section 9, then the
instructions). Sources, lowest precedence first: plugins (``plugin:name``), ``~/.claude/skills``,
``~/.keel/skills``, ``.claude/skills``, ``.keel/skills``. A skill in a subfolder is namespaced by
it: ``db/migrate/SKILL.md`` is ``db:migrate``. Only the name and description reach the model
until the skill is used (progressive disclosure).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from agentkeel.internal.frontmatter import FrontmatterError, flag, names, read, text

MAX_SKILL_DEPTH = 4


class Skill(msgspec.Struct, frozen=True):
    name: str
    description: str
    body: str
    directory: Path
    source: str = "project"  # user | project | plugin:<name>
    when_to_use: str = ""
    argument_hint: str = ""
    arguments: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] | None = None
    disallowed_tools: tuple[str, ...] = ()
    model: str | None = None
    fork: bool = False  # context: fork
    agent: str = ""  # the agent type a forked skill runs as
    paths: tuple[str, ...] = ()
    user_invocable: bool = True
    model_invocable: bool = True
    version: str = ""
    plugin_root: Path | None = None

    @property
    def path(self) -> Path:
        return self.directory / "SKILL.md"

    def listing(self) -> str:
        extra = f" {self.when_to_use}" if self.when_to_use else ""
        return f'<skill name="{self.name}">{self.description}{extra}</skill>'


class SkillCatalog(msgspec.Struct):
    """The session's skills (a service shared with subagents)."""

    share_with_subagents = True
    skills: dict[str, Skill] = msgspec.field(default_factory=dict)
    warnings: list[str] = msgspec.field(default_factory=list)

    def add(self, skill: Skill) -> None:
        self.skills[skill.name] = skill

    def get(self, name: str) -> Skill | None:
        name = name.strip().lstrip("/")
        found = self.skills.get(name)
        if found is not None:
            return found
        tails = [s for n, s in self.skills.items() if n.split(":")[-1] == name]  # plugin:pdf as pdf
        return tails[0] if len(tails) == 1 else None

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills.values())

    def __len__(self) -> int:
        return len(self.skills)

    def for_model(self) -> list[Skill]:
        return [s for s in self.skills.values() if s.model_invocable]


def skill_from_dir(
    directory: Path, name: str, source: str, plugin_root: Path | None = None
) -> tuple[Skill | None, str]:
    try:
        doc = read(directory / "SKILL.md")
    except FrontmatterError as e:
        return None, str(e)
    meta = doc.meta
    own = text(meta.get("name")).strip()
    if own and ":" not in name:
        name = own
    elif own:
        name = name.rsplit(":", 1)[0] + ":" + own
    description = text(meta.get("description")).strip()
    if not description:  # Claude Code falls back to the first paragraph
        description = doc.body.strip().split("\n\n", 1)[0].strip().lstrip("# ")[:200]
    allowed = names(meta.get("allowed-tools"))
    context = text(meta.get("context")).strip().lower()
    skill = Skill(
        name=name,
        description=description,
        body=doc.body,
        directory=directory,
        source=source,
        when_to_use=text(meta.get("when_to_use")).strip(),
        argument_hint=text(meta.get("argument-hint")).strip(),
        arguments=tuple(names(meta.get("arguments")) or ()),
        allowed_tools=tuple(allowed) if allowed is not None else None,
        disallowed_tools=tuple(names(meta.get("disallowed-tools")) or ()),
        model=text(meta.get("model")).strip() or None,
        fork=context == "fork",
        agent=text(meta.get("agent")).strip(),
        paths=tuple(names(meta.get("paths")) or ()),
        user_invocable=flag(meta.get("user-invocable"), True),
        model_invocable=not flag(meta.get("disable-model-invocation"), False),
        version=text(meta.get("version")).strip(),
        plugin_root=plugin_root,
    )
    return skill, ""


def skill_dirs(cwd: Path, home: Path) -> list[tuple[Path, str]]:
    return [
        (home / ".claude" / "skills", "user"),
        (home / ".keel" / "skills", "user"),
        (cwd / ".claude" / "skills", "project"),
        (cwd / ".keel" / "skills", "project"),
    ]


def _walk(root: Path) -> Iterator[Path]:
    """Folders under ``root`` holding a SKILL.md, not below one that does (its own files)."""
    stack = [(root, 0)]
    while stack:
        d, depth = stack.pop()
        try:
            entries = sorted(d.iterdir())
        except OSError:
            continue
        for entry in entries:
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            if (entry / "SKILL.md").is_file():
                yield entry
            elif depth < MAX_SKILL_DEPTH:
                stack.append((entry, depth + 1))


def load_skills(cwd: Path, home: Path, *, plugins: Sequence[tuple[str, Path, Path]] = ()) -> SkillCatalog:
    """``plugins``: (plugin name, its skills folder, its root)."""
    catalog = SkillCatalog()
    sources: list[tuple[Path, str, str, Path | None]] = [(d, f"plugin:{n}", n, r) for n, d, r in plugins]
    sources += [(d, s, "", None) for d, s in skill_dirs(cwd, home)]
    for root, source, namespace, plugin_root in sources:
        if not root.is_dir():
            continue
        for directory in _walk(root):
            parts = directory.relative_to(root).parts
            name = ":".join([namespace, *parts] if namespace else parts)
            skill, warning = skill_from_dir(directory, name, source, plugin_root)
            if warning:
                catalog.warnings.append(warning)
            if skill is not None:
                catalog.add(skill)
    return catalog


def skills_section(catalog: SkillCatalog) -> str:
    """The system-prompt section listing the skills (name and description only), or ''.

    Self-contained for the sectioned prompt builder; the Skill tool's description carries the
    same list today."""
    skills = catalog.for_model()
    if not skills:
        return ""
    lines = "\n".join(s.listing() for s in skills)
    return (
        "# Skills\nThese skills are available. When one fits the task, load it with the Skill tool "
        f"(its full instructions are loaded then):\n<available_skills>\n{lines}\n</available_skills>"
    )
