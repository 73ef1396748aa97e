"""Instruction files and rules (SPEC section 6).

Layers, lowest to highest: managed (``/etc/keel/KEEL.md``, or ``KEEL_MANAGED_INSTRUCTIONS``),
user (``~/.keel/KEEL.md``, ``~/.claude/CLAUDE.md``), project from the repository root down to the
working directory (``AGENTS.md``, ``CLAUDE.md``, ``KEEL.md``, ``.claude/CLAUDE.md``), local
(``*.local.md``). Directories below the working directory are loaded when a file under them is
first read or edited. ``@path`` imports (relative to the importing file, ``~/``, absolute) are
followed to depth 5; cycles and missing files are noted, never fatal. An import from a file of the
project to a file outside it is followed only in a folder the user trusted (``keel trust``): a cloned
repository's CLAUDE.md must not pull ``~/.ssh/id_rsa`` into the prompt. Every import obeys the
session's Read deny rules and credential stores (:class:`ImportPolicy`) and is redacted. Rules live in
``.claude/rules/**/*.md`` and ``.keel/rules/**/*.md`` (and the user's ``~/.claude/rules``): without
``paths:`` frontmatter they are always loaded; with it, when a matching file is read or edited.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from agentkeel.internal import frontmatter
from agentkeel.internal.env import KeelEnv
from agentkeel.internal.git import find_root
from agentkeel.internal.globs import Globs
from agentkeel.policy.redact import redact

DIR_NAMES = ("AGENTS.md", "CLAUDE.md", "KEEL.md", ".claude/CLAUDE.md")
LOCAL_NAMES = ("AGENTS.local.md", "CLAUDE.local.md", "KEEL.local.md")
SIZE_WARNING = 40_000
MAX_DEPTH = 5
_IMPORT = re.compile(r"(?<![\w`@])@((?:~/|/|\.{1,2}/)?[\w.\-/]+)")
_FENCE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


PROJECT_SCOPES = frozenset({"project", "local", "nested", "rule"})  # files that came with the repository


def _no_refusal(path: Path) -> str | None:
    return None


@dataclass(frozen=True)
class ImportPolicy:
    """Which ``@path`` imports are followed. ``trusted``: the folder is explicitly trusted, so its
    files may import from outside the project; ``refuse``: why a file may not be read into the prompt
    (the session's Read deny rules, credential stores), or None."""

    trusted: bool = False
    refuse: Callable[[Path], str | None] = _no_refusal


class InstructionFile(msgspec.Struct, frozen=True):
    path: Path
    text: str
    scope: str  # managed | user | project | local | nested | rule
    reason: str  # session_start | import | nested_traversal | path_glob_match
    imported_by: Path | None = None
    globs: tuple[str, ...] = ()

    @property
    def chars(self) -> int:
        return len(self.text)


def _read(path: Path) -> str | None:
    try:
        if not path.is_file():
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


class Rule(msgspec.Struct):
    path: Path
    text: str
    globs: tuple[str, ...]

    def matches(self, rel: str) -> bool:
        return Globs(self.globs).matches(rel)


@dataclass
class Instructions:
    """What is loaded, from where and why; the notes (missing imports, cycles, sizes)."""

    cwd: Path
    home: Path
    keel_home: Path
    managed: Path | None = None
    policy: ImportPolicy = field(default_factory=ImportPolicy)
    scopes: frozenset[str] | None = None  # --setting-sources: read only these (user, project, local); None: all
    root: Path = field(init=False)
    files: list[InstructionFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)  # path-scoped rules, loaded or not
    injected_rules: set[Path] = field(default_factory=set)
    loaded_dirs: set[Path] = field(default_factory=set)
    _seen: set[Path] = field(default_factory=set)
    _root_real: tuple[Path, Path] | None = field(default=None, init=False, repr=False, compare=False)
    _folders: dict[Path, Path] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.root = find_root(self.cwd) or self.cwd

    @classmethod
    def load(
        cls,
        cwd: Path,
        home: Path,
        keel_home: Path,
        env: Mapping[str, str] | None = None,
        policy: ImportPolicy | None = None,
        scopes: frozenset[str] | None = None,
    ) -> Instructions:
        env = env if env is not None else os.environ
        managed = KeelEnv.of(env).managed_instructions
        self = cls(
            cwd=cwd, home=home, keel_home=keel_home, managed=managed, policy=policy or ImportPolicy(), scopes=scopes
        )
        self.reload()
        return self

    def reload(self) -> None:
        """(Re)read the startup layers and the rules; what was loaded lazily stays loaded."""
        lazy = [f for f in self.files if f.scope == "nested" or f.reason == "path_glob_match"]
        nested_dirs = {f.path.parent for f in lazy if f.scope == "nested"} | (self.loaded_dirs - set(self._chain()))
        self.files, self.notes, self.rules = [], [], []
        self.loaded_dirs, self._seen = set(nested_dirs), {f.path.resolve() for f in lazy}
        if self.managed is not None:
            self._add(self.managed, "managed", "session_start")
        self._add(self.keel_home / "KEEL.md", "user", "session_start")
        self._add(self.home / ".claude" / "CLAUDE.md", "user", "session_start")
        for d in self._chain():
            self._load_dir(d, "project", "session_start")
        for rule_dir in self.rule_dirs():
            if self._wants("project" if rule_dir.is_relative_to(self.root) else "user"):
                self._load_rules(rule_dir)
        self.files += lazy

    def _wants(self, scope: str) -> bool:
        """Whether ``--setting-sources`` lets files of ``scope`` in (a nested CLAUDE.md is the
        project's; managed instructions always are)."""
        kind = {"nested": "project", "rule": "project"}.get(scope, scope)
        return self.scopes is None or kind == "managed" or kind in self.scopes

    def sources(self) -> list[Path]:
        """Every path whose change changes what is loaded (for the prompt builder's memo)."""
        paths: list[Path] = [f.path for f in self.startup()]
        if self.managed is not None:
            paths.append(self.managed)
        paths += [self.keel_home / "KEEL.md", self.home / ".claude" / "CLAUDE.md"]
        for d in self._chain():
            paths += [d / n for n in (*DIR_NAMES, *LOCAL_NAMES)]
        paths += [r.path for r in self.rules]
        paths += self.rule_dirs()
        return paths

    def rule_dirs(self) -> list[Path]:
        return [
            self.home / ".claude" / "rules",
            self.keel_home / "rules",
            self.root / ".claude" / "rules",
            self.root / ".keel" / "rules",
        ]

    def _chain(self) -> list[Path]:
        chain = [self.cwd, *self.cwd.parents]
        if self.root in chain:
            return list(reversed(chain[: chain.index(self.root) + 1]))
        return [self.cwd]

    def _load_dir(self, d: Path, scope: str, reason: str) -> list[InstructionFile]:
        self.loaded_dirs.add(d)
        added: list[InstructionFile] = []
        for name in DIR_NAMES:
            added += self._add(d / name, scope, reason)
        for name in LOCAL_NAMES:
            added += self._add(d / name, "local", reason)
        return added

    def _add(
        self, path: Path, scope: str, reason: str, by: Path | None = None, depth: int = 0, chain: tuple[Path, ...] = ()
    ) -> list[InstructionFile]:
        if not self._wants(scope):
            return []
        try:
            real = path.resolve()
        except (OSError, RuntimeError):
            return []
        if real in chain:
            self.notes.append(f"{by}: import cycle at @{path} (not loaded again)")
            return []
        if real in self._seen:
            return []
        if reason != "import" and (why := self._link_refused(path, real, scope)):
            self.notes.append(f"{path} not loaded: {why}")
            return []
        text = _read(path)
        if text is None:
            if by is not None:
                self.notes.append(f"{by}: imported file {path} not found")
            return []
        self._seen.add(real)
        if reason == "import" or (scope in PROJECT_SCOPES and path.is_symlink()):
            text = redact(text)  # imported (or linked) text may hold what the author never saw
        if len(text) > SIZE_WARNING:
            self.notes.append(
                f"{path} is {len(text):,} characters (over {SIZE_WARNING:,}): it costs context on every request"
            )
        entry = InstructionFile(path, text, scope, reason, by)
        out = [entry]
        self.files.append(entry)
        out += self._imports(entry, depth, (*chain, real))
        return out

    def _imports(self, entry: InstructionFile, depth: int, chain: tuple[Path, ...]) -> list[InstructionFile]:
        out: list[InstructionFile] = []
        for ref in _IMPORT.findall(_FENCE.sub("", entry.text)):
            ref = ref.rstrip(".,;:)")
            if "/" not in ref and "." not in ref:
                continue  # a mention (@alice), not a path
            if depth + 1 > MAX_DEPTH:
                self.notes.append(f"{entry.path}: @{ref} not followed (imports nest at most {MAX_DEPTH} deep)")
                continue
            target = Path(ref).expanduser() if ref.startswith("~/") else Path(ref)
            if not target.is_absolute():
                target = entry.path.parent / target
            why = self._refused(entry, target)
            if why:
                self.notes.append(f"{entry.path}: @{ref} not followed: {why}")
                continue
            out += self._add(target, entry.scope, "import", entry.path, depth + 1, chain)
        return out

    def _refused(self, entry: InstructionFile, target: Path) -> str | None:
        try:
            real = target.resolve()
            root = self.root.resolve()
        except (OSError, RuntimeError):
            return "its path cannot be resolved"
        if entry.scope in PROJECT_SCOPES and not self.policy.trusted and not real.is_relative_to(root):
            return (
                "a project file imports from outside the project only in a trusted folder "
                f"(run `keel trust {self.root}` if you trust it)"
            )
        return self.policy.refuse(real)

    def _link_refused(self, path: Path, real: Path, scope: str) -> str | None:
        """Why a file that came with the repository (CLAUDE.md, CLAUDE.local.md, a rule) may not
        be read where it is a symbolic link: a committed ``CLAUDE.md -> ~/.aws/credentials`` is
        an import by another name, so it obeys the same rules (outside the project only in a
        trusted folder; never a Read-denied file or a credential store)."""
        if scope not in PROJECT_SCOPES:
            return None
        try:
            inside = real.is_relative_to(self._real_root())
            linked = path.is_symlink() or not inside
        except OSError:
            return "its path cannot be resolved"
        if not linked:
            return None
        if not inside and not self.policy.trusted:
            return (
                "it links outside the project, which is followed only in a trusted folder "
                f"(run `keel trust {self.root}` if you trust it)"
            )
        return self.policy.refuse(real)

    def _load_rules(self, base: Path) -> None:
        try:
            found = sorted(base.rglob("*.md")) if base.is_dir() else []
        except OSError:
            return
        project = base in (self.root / ".claude" / "rules", self.root / ".keel" / "rules")
        for path in found:
            if project:
                try:
                    why = self._link_refused(path, path.resolve(), "rule")
                except (OSError, RuntimeError):
                    why = "its path cannot be resolved"
                if why:
                    self.notes.append(f"{path} not loaded: {why}")
                    continue
            text = _read(path)
            if text is None:
                continue
            try:
                doc = frontmatter.parse(text, path)
            except frontmatter.FrontmatterError as e:
                self.notes.append(f"{e} (not loaded)")
                continue
            body = doc.body
            globs = tuple(frontmatter.names(doc.meta.get("paths")) or ())
            if not globs:
                self._seen.add(path.resolve())
                self.files.append(InstructionFile(path, body, "rule", "session_start"))
                continue
            self.rules.append(Rule(path, body, globs))

    # --- files the session touches --------------------------------------------------------

    def relative(self, path: Path) -> str | None:
        try:
            return self._resolved(path).relative_to(self._real_root()).as_posix()
        except (ValueError, OSError):
            return None

    def _resolved(self, path: Path) -> Path:
        """``path.resolve()``, with its folder's resolution remembered: resolving costs a system call
        per component, and a session reads file after file in the same few folders. The file itself
        is still looked at (a symlink is resolved whole)."""
        if not path.is_absolute() or path.name in ("", ".", "..") or path.is_symlink():
            return path.resolve()
        folder = self._folders.get(path.parent)
        if folder is None:
            if len(self._folders) > 4096:
                self._folders.clear()
            folder = self._folders[path.parent] = path.parent.resolve()
        return folder / path.name

    def _real_root(self) -> Path:
        """The root with its symlinks resolved, resolved once per root (a path's resolve is a
        system call per component, and every file read asks)."""
        if self._root_real is None or self._root_real[0] != self.root:
            self._root_real = (self.root, self.root.resolve())
        return self._root_real[1]

    def touched(self, path: Path) -> list[InstructionFile]:
        """A file was read or edited: load the instruction files of the directories between the
        root and it not loaded yet, and the rules whose ``paths:`` match it (each once)."""
        rel = self.relative(path)
        if rel is None:
            return []
        out: list[InstructionFile] = []
        d = self.root
        for part in Path(rel).parent.parts:
            d = d / part
            if d not in self.loaded_dirs:
                out += self._load_dir(d, "nested", "nested_traversal")
        for rule in self.rules:
            if rule.path not in self.injected_rules and rule.matches(rel):
                self.injected_rules.add(rule.path)
                entry = InstructionFile(rule.path, rule.text, "rule", "path_glob_match", globs=rule.globs)
                self.files.append(entry)
                out.append(entry)
        return out

    def for_files(self, paths: list[str]) -> list[InstructionFile]:
        """The nested instructions and path rules that apply to these files (re-injected after a
        compaction: the tool results that carried them may be gone)."""
        out: list[InstructionFile] = [f for f in self.files if f.scope == "nested"]
        if not self.rules:
            return out  # no path rule to match: the files' paths need not be resolved
        rels = [r for p in paths if (r := self.relative(Path(p))) is not None]
        for rule in self.rules:
            if any(rule.matches(r) for r in rels):
                out.append(InstructionFile(rule.path, rule.text, "rule", "path_glob_match", globs=rule.globs))
        return out

    def startup(self) -> list[InstructionFile]:
        return [f for f in self.files if f.scope not in ("nested",) and f.reason != "path_glob_match"]


def render(f: InstructionFile) -> str:
    attrs = f'source="{f.path}"'
    if f.globs:
        attrs += f' applies-to="{", ".join(f.globs)}"'
    return f"<instructions {attrs}>\n{f.text.strip()}\n</instructions>"
