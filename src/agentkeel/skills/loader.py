"""Finding and reading skills.

A skill is a folder with a ``SKILL.md`` (YAML frontmatter of SPEC section 9, then the
instructions). Sources, lowest precedence first: plugins (``plugin:name``), ``~/.claude/skills``,
``~/.keel/skills``, ``.claude/skills``, ``.keel/skills``. A skill is named by its folder, as in
Claude Code 2.1.328 (``plugin-dev/skills/agent-development`` is ``plugin-dev:agent-development``
even with ``name: Agent Development``); the frontmatter ``name`` is a display name the Skill tool
accepts too. A skill in a subfolder is namespaced by it: ``db/migrate/SKILL.md`` is
``db:migrate``. A plugin whose root holds a ``SKILL.md`` is a skill named after the plugin. Only
the name and description reach the model until the skill is used (progressive disclosure).
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
    display_name: str = ""  # the frontmatter ``name`` when it differs from the folder's

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
        """By name (``plugin:folder``), by display name (``plugin:Display Name``), or by the last
        part of either when only one skill has it (``pdf`` for ``plugin:pdf``)."""
        name = name.strip().lstrip("/")
        found = self.skills.get(name)
        if found is not None:
            return found
        shown = [s for s in self.skills.values() if s.display_name and displayed(s) == name]
        if len(shown) == 1:
            return shown[0]
        tails = [s for n, s in self.skills.items() if name in (n.split(":")[-1], s.display_name)]
        return tails[0] if len(tails) == 1 else None

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills.values())

    def __len__(self) -> int:
        return len(self.skills)

    def for_model(self) -> list[Skill]:
        return [s for s in self.skills.values() if s.model_invocable]


def displayed(skill: Skill) -> str:
    """The frontmatter name, in the skill's namespace (``plugin:Display Name``)."""
    namespace = skill.name.rpartition(":")[0]
    return f"{namespace}:{skill.display_name}" if namespace else skill.display_name


def skill_from_dir(
    directory: Path, name: str, source: str, plugin_root: Path | None = None, *, named: bool = False
) -> tuple[Skill | None, str]:
    """``named``: the frontmatter ``name`` replaces the last part of ``name`` (a plugin's root
    ``SKILL.md``, which has no folder of its own: ``plugin:<name>``, else ``plugin:<root folder>``)."""
    try:
        doc = read(directory / "SKILL.md")
    except FrontmatterError as e:
        return None, str(e)
    meta = doc.meta
    own = text(meta.get("name")).strip()
    if named and own:
        name = f"{name.rpartition(':')[0]}:{own}"
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
        display_name=own if own != name.rpartition(":")[2] else "",
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


def load_skills(
    cwd: Path, home: Path, *, plugins: Sequence[tuple[str, Path, Path]] = (), scopes: frozenset[str] | None = None
) -> SkillCatalog:
    """``plugins``: (plugin name, its skills folder, its root); ``scopes``: read only the user's
    and/or the project's folders (``--setting-sources``). A user's skill and a project's of one
    name: the user's is kept (Claude Code 2.1.328; in one scope ``.keel`` wins over ``.claude``)."""
    catalog = SkillCatalog()
    sources: list[tuple[Path, str, str, Path | None]] = [(d, f"plugin:{n}", n, r) for n, d, r in plugins]
    sources += [(d, s, "", None) for d, s in skill_dirs(cwd, home) if scopes is None or s in scopes]

    def add(found: tuple[Skill | None, str]) -> None:
        skill, warning = found
        if warning:
            catalog.warnings.append(warning)
        if skill is not None:
            held = catalog.skills.get(skill.name)
            if held is None or held.source == skill.source:  # the user's skill wins over the project's
                catalog.add(skill)

    for name, _, top in plugins:  # a plugin's root SKILL.md
        if (top / "SKILL.md").is_file():
            add(skill_from_dir(top, f"{name}:{top.name}", f"plugin:{name}", top, named=True))
    for root, source, namespace, plugin_root in sources:
        if not root.is_dir():
            continue
        if plugin_root is not None and root != plugin_root and (root / "SKILL.md").is_file():  # a listed skill folder
            add(skill_from_dir(root, f"{namespace}:{root.name}", source, plugin_root))
            continue
        for directory in _walk(root):
            parts = directory.relative_to(root).parts
            add(skill_from_dir(directory, ":".join([namespace, *parts] if namespace else parts), source, plugin_root))
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
