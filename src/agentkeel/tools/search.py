"""Search tools: Glob and Grep.

Grep runs ripgrep when it is on PATH and a pure-Python search with the same flags and
output shape otherwise. Both skip hidden files and, inside a git repository, what
``.gitignore`` files exclude (as ripgrep does by default).
"""

from __future__ import annotations

import asyncio
import bisect
import os
import re
import shutil
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from msgspec import Meta, Struct, field

from agentkeel.core.tools import Effects, Tool, ToolContext, ToolError, ToolOutput, default_response
from agentkeel.internal import globs, procs
from agentkeel.internal.env import KeelEnv
from agentkeel.internal.git import find_root
from agentkeel.tools import READ
from agentkeel.tools.files import resolve
from agentkeel.tools.reading import check_regular

if TYPE_CHECKING:
    import pathspec

GLOB_LIMIT = 100

# file types for Grep's `type` (a subset of ripgrep's --type-list)
FILE_TYPES: dict[str, tuple[str, ...]] = {
    "py": ("*.py", "*.pyi"),
    "js": ("*.js", "*.mjs", "*.cjs", "*.jsx"),
    "ts": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "rust": ("*.rs",),
    "go": ("*.go",),
    "java": ("*.java",),
    "c": ("*.c", "*.h"),
    "cpp": ("*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.h", "*.hxx"),
    "md": ("*.md", "*.markdown"),
    "json": ("*.json",),
    "yaml": ("*.yaml", "*.yml"),
    "toml": ("*.toml",),
    "sh": ("*.sh", "*.bash", "*.zsh"),
    "html": ("*.html", "*.htm"),
    "css": ("*.css", "*.scss"),
    "rb": ("*.rb",),
    "php": ("*.php",),
    "txt": ("*.txt",),
    "sql": ("*.sql",),
    "kotlin": ("*.kt", "*.kts"),
    "swift": ("*.swift",),
}


# --- walking ---------------------------------------------------------------------------------


def walk_files(root: Path, *, hidden: bool = False) -> Iterator[Path]:
    """Files under root, skipping .git, hidden entries (unless hidden) and gitignored paths."""
    git_root = find_root(root)
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
    if git_root is not None:
        for d in (root, *root.parents):
            _load_ignore(d, specs)
            if d == git_root:
                break
        specs = [(base, globs.gitignore_below(spec, root.relative_to(base).as_posix())) for base, spec in specs]

    def ignored(path: Path, is_dir: bool) -> bool:
        for base, spec in specs:
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            if spec.match_file(rel + ("/" if is_dir else "")):
                return True
        return False

    def walk(d: Path) -> Iterator[Path]:
        pushed = git_root is not None and d != root and _load_ignore(d, specs)
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            entries = []
        for e in entries:
            if e.name == ".git" or (not hidden and e.name.startswith(".")):
                continue
            p = Path(e.path)
            is_dir = e.is_dir(follow_symlinks=False)
            if ignored(p, is_dir):
                continue
            if is_dir:
                yield from walk(p)
            elif e.is_file():
                yield p
        if pushed:
            specs.pop()

    yield from walk(root)


def _load_ignore(d: Path, specs: list[tuple[Path, pathspec.GitIgnoreSpec]]) -> bool:
    f = d / ".gitignore"
    if not f.is_file():
        return False
    try:
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    specs.append((d, globs.gitignore(lines)))  # pathspec lazily: the first walk pays for it
    return True


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


# --- Glob ----------------------------------------------------------------------------------


class GlobInput(Struct, forbid_unknown_fields=True, kw_only=True):
    pattern: Annotated[
        str, Meta(description='The glob pattern to match files against, e.g. "**/*.py" or "src/**/*.{ts,tsx}"')
    ]
    path: Annotated[str | None, Meta(description="The directory to search in (default: the working directory)")] = None


async def _glob(args: GlobInput, ctx: ToolContext) -> ToolOutput:
    root = resolve(ctx, args.path) if args.path else ctx.workdir
    pattern = args.pattern
    if Path(pattern).is_absolute():
        parts = Path(pattern).parts
        fixed = [p for p in parts if not any(ch in p for ch in "*?[{")]
        base = Path(*parts[: len(fixed)]) if fixed else Path("/")
        root, pattern = base, Path(*parts[len(fixed) :]).as_posix()
    if not root.is_dir():
        raise ToolError(f"Directory does not exist: {root}")
    rx = globs.tool_regex(pattern)
    hidden = any(seg.startswith(".") for seg in pattern.split("/"))

    skip = ctx.hidden_path

    def run() -> list[Path]:
        found = [p for p in walk_files(root, hidden=hidden) if rx.match(p.relative_to(root).as_posix())]
        return [p for p in found if skip is None or not skip(p)]

    matches = await asyncio.to_thread(run)
    matches.sort(key=_mtime, reverse=True)
    shown = matches[:GLOB_LIMIT]
    body = "\n".join(str(p) for p in shown) or "No files found"
    if len(matches) > GLOB_LIMIT:
        body += f"\n(Results are truncated: {len(matches)} files matched. Use a more specific path or pattern.)"
    return ToolOutput(body, metadata={"pattern": args.pattern, "match_count": len(matches)})


# --- Grep ----------------------------------------------------------------------------------


_Count = Annotated[int, Meta(ge=0)]


class GrepInput(Struct, forbid_unknown_fields=True, kw_only=True):
    """Grep's flags go by ripgrep's names on the wire ("-i", "-A"...) and by words in Python."""

    pattern: Annotated[str, Meta(description="The regular expression to search for in file contents")]
    path: Annotated[str | None, Meta(description="File or directory to search in (default: the working directory)")] = (
        None
    )
    glob: Annotated[str | None, Meta(description='Glob to filter files, e.g. "*.js" or "*.{ts,tsx}"')] = None
    type: Annotated[str | None, Meta(description="File type to search, e.g. py, js, rust, go")] = None
    output_mode: Annotated[
        Literal["content", "files_with_matches", "count"],
        Meta(
            description="content shows matching lines; files_with_matches (default) shows paths; "
            "count shows match counts"
        ),
    ] = "files_with_matches"
    case_insensitive: Annotated[bool, Meta(description="Case insensitive search")] = field(default=False, name="-i")
    line_numbers: Annotated[bool, Meta(description="Show line numbers (content mode)")] = field(
        default=False, name="-n"
    )
    after: Annotated[_Count | None, Meta(description="Lines of context after each match")] = field(
        default=None, name="-A"
    )
    before: Annotated[_Count | None, Meta(description="Lines of context before each match")] = field(
        default=None, name="-B"
    )
    context: Annotated[_Count | None, Meta(description="Lines of context around each match")] = field(
        default=None, name="-C"
    )
    multiline: Annotated[bool, Meta(description="Let . match newlines and patterns span lines")] = False
    head_limit: Annotated[_Count | None, Meta(description="Return only the first N lines/entries")] = None
    offset: Annotated[_Count | None, Meta(description="Skip the first N lines/entries")] = None


def _compile(args: GrepInput) -> re.Pattern[str]:
    flags = re.MULTILINE
    if args.case_insensitive:
        flags |= re.IGNORECASE
    if args.multiline:
        flags |= re.DOTALL
    try:
        return re.compile(args.pattern, flags)
    except re.error as e:
        raise ToolError(f"invalid regex {args.pattern!r}: {e}") from None


def _file_filter(args: GrepInput) -> list[Callable[[str], bool]]:
    patterns = []
    if args.glob:
        patterns.append(args.glob)
    if args.type:
        exts = FILE_TYPES.get(args.type)
        if exts is None:
            raise ToolError(f"unknown file type {args.type!r}; known: {', '.join(sorted(FILE_TYPES))}")
        patterns.append("{" + ",".join(exts) + "}")
    return [globs.search_glob(g) for g in patterns]


def _wanted(path: Path, root: Path, filters: list[Callable[[str], bool]]) -> bool:
    if not filters:
        return True
    rel = path.relative_to(root).as_posix()
    return all(wanted(rel) for wanted in filters)


def python_grep(args: GrepInput, root: Path, hidden: Callable[[Path], bool] | None = None) -> list[str]:
    """The fallback search; output lines in ripgrep's format. ``hidden`` files are skipped."""
    rx = _compile(args)
    filters = _file_filter(args)
    files = [root] if root.is_file() else [p for p in walk_files(root) if _wanted(p, root, filters)]
    if hidden is not None:
        files = [p for p in files if not hidden(p)]
    before = args.before if args.before is not None else (args.context or 0)
    after = args.after if args.after is not None else (args.context or 0)
    results: list[tuple[Path, list[str]]] = []
    for f in files:
        try:
            data = f.read_bytes()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue
        text = data.decode("utf-8", "replace")
        if args.multiline:
            spans = [(m.start(), m.end()) for m in rx.finditer(text) if m.end() > m.start() or m.group(0) == ""]
            if not spans:
                continue
            starts = _line_starts(text)
            hit_lines: set[int] = set()
            for s, e in spans:
                first, last = _line_of(starts, s), _line_of(starts, max(s, e - 1))
                hit_lines.update(range(first, last + 1))
            count = len(spans)
        else:
            lines_all = text.splitlines()
            hit_lines = {i for i, line in enumerate(lines_all) if rx.search(line)}
            count = len(hit_lines)
        if not hit_lines:
            continue
        lines = text.splitlines()
        out: list[str] = []
        if args.output_mode == "content":
            show: dict[int, bool] = {}
            for i in sorted(hit_lines):
                for j in range(max(0, i - before), min(len(lines), i + after + 1)):
                    show[j] = show.get(j, False) or j in hit_lines
            prev = None
            for j in sorted(show):
                if prev is not None and j != prev + 1:
                    out.append("--")
                sep = ":" if show[j] else "-"
                num = f"{j + 1}{sep}" if args.line_numbers else ""
                out.append(f"{f}{sep}{num}{lines[j]}")
                prev = j
        elif args.output_mode == "count":
            out.append(f"{f}:{count}")
        results.append((f, out))
    return _shape(args, results)


def _shape(args: GrepInput, results: list[tuple[Path, list[str]]]) -> list[str]:
    if args.output_mode == "files_with_matches":
        paths = sorted((p for p, _ in results), key=_mtime, reverse=True)
        return [str(p) for p in paths]
    lines: list[str] = []
    with_context = bool(args.before or args.after or args.context)
    for n, (_, out) in enumerate(sorted(results, key=lambda r: r[0].parts)):  # walk order, as ripgrep's --sort=path
        if n and args.output_mode == "content" and with_context:
            lines.append("--")
        lines.extend(out)
    return lines


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts += [m.end() for m in re.finditer("\n", text)]
    return starts


def _line_of(starts: list[int], pos: int) -> int:
    return bisect.bisect_right(starts, pos) - 1


async def ripgrep(args: GrepInput, root: Path, rg: str) -> list[str]:
    cmd = [rg, "--no-heading", "--with-filename", "--color=never", "--no-config", "--no-messages"]
    # --sort=path makes ripgrep search on one thread; a line per file is cheaper to sort here
    per_file = args.output_mode in ("files_with_matches", "count")
    if not per_file:
        cmd.append("--sort=path")
    if args.case_insensitive:
        cmd.append("-i")
    if args.multiline:
        cmd += ["-U", "--multiline-dotall"]
    if args.output_mode == "files_with_matches":
        cmd.append("--files-with-matches")
    elif args.output_mode == "count":
        cmd.append("--count-matches" if args.multiline else "--count")
    else:
        if args.line_numbers:
            cmd.append("-n")
        else:
            cmd.append("--no-line-number")
        if args.context is not None:
            cmd += ["-C", str(args.context)]
        if args.before is not None:
            cmd += ["-B", str(args.before)]
        if args.after is not None:
            cmd += ["-A", str(args.after)]
    if args.glob:
        cmd += ["--glob", args.glob]
    if args.type:
        exts = FILE_TYPES.get(args.type)
        if exts is None:
            raise ToolError(f"unknown file type {args.type!r}; known: {', '.join(sorted(FILE_TYPES))}")
        for e in exts:
            cmd += ["--glob", e]
    cmd += ["-e", args.pattern, "--", str(root)]
    # no limit of its own: the tool's timeout or an interrupt cancels the call, which kills the group;
    # killed by the kernel if keel dies mid-search
    ran = await procs.run(cmd, cwd=None, env=None, timeout=None, cap=None, die_with=signal.SIGKILL)
    if ran.error:
        raise ToolError(f"grep failed: {ran.error}")
    if ran.exit_code == 2 and not ran.stdout:
        raise ToolError(f"grep failed: {ran.stderr.decode(errors='replace').strip()}")
    lines = ran.stdout.decode("utf-8", "replace").splitlines()
    if per_file:  # in walk order (a directory's entries by name), as --sort=path gives them
        lines.sort(key=_walk_order if args.output_mode == "files_with_matches" else _walk_order_of_count)
    if args.output_mode == "files_with_matches":
        return [str(p) for p in sorted((Path(x) for x in lines), key=_mtime, reverse=True)]
    return lines


def _walk_order(path: str) -> list[str]:
    return path.split("/")


def _walk_order_of_count(line: str) -> list[str]:
    return _walk_order(line.rpartition(":")[0])


async def _grep(args: GrepInput, ctx: ToolContext) -> ToolOutput:
    root = resolve(ctx, args.path) if args.path else ctx.workdir
    try:
        st = root.stat()
    except OSError:
        raise ToolError(f"Path does not exist: {root}") from None
    if not stat.S_ISDIR(st.st_mode):
        check_regular(root, st)  # a FIFO or a device would never end (or never answer)
    _compile(args)  # same error for both engines
    rg = shutil.which("rg")
    engine = "ripgrep" if rg and not KeelEnv.of().grep_python else "python"
    if ctx.hidden_path is not None:
        engine = "python"  # it can skip files a deny rule hides; ripgrep cannot be told reliably
    if rg and engine == "ripgrep":
        lines = await ripgrep(args, root, rg)
    else:
        lines = await asyncio.to_thread(python_grep, args, root, ctx.hidden_path)
    base = _base(ctx.workdir)
    if base:
        lines = [x.removeprefix(base) for x in lines]
    total = len(lines)
    start = args.offset or 0
    lines = lines[start:]
    if args.head_limit:
        lines = lines[: args.head_limit]
    if args.output_mode == "files_with_matches":
        body = (f"Found {total} file{'s' if total != 1 else ''}\n" + "\n".join(lines)) if total else "No files found"
    else:
        body = "\n".join(lines) if lines else "No matches found"
    meta: dict[str, Any] = {"pattern": args.pattern, "match_count": total, "engine": engine}
    if base:
        meta[RELATIVE_TO] = str(ctx.workdir)
    return ToolOutput(body, metadata=meta)


RELATIVE_TO = "relative_to"
"""Grep's metadata key: the working directory its result's paths are relative to (the paths under it
are shown to the model relative, ~40 bytes a line fewer; the ones outside it stay absolute)."""


def _base(workdir: Path) -> str:
    base = str(workdir).rstrip("/")
    return base + "/" if base else ""  # "/" itself: every path stays absolute


def absolute_paths(text: str, relative_to: str, listing: bool) -> str:
    """A Grep result with its relative paths made absolute again (what the result was before paths
    were shortened): every line that names a path and does not start with "/". ``listing``: the
    files_with_matches mode, whose first line says how many files were found."""
    base = _base(Path(relative_to))
    if not base or text in ("No files found", "No matches found"):
        return text
    lines = text.split("\n")
    head = 1 if listing else 0
    return "\n".join(x if n < head or x == "--" or x.startswith("/") else base + x for n, x in enumerate(lines))


def _grep_response(tool_input: dict[str, Any], output: ToolOutput) -> Any:
    """Hooks' ``tool_response`` for Grep: as it always was (absolute paths), whatever the model got."""
    meta = {k: v for k, v in output.metadata.items() if k != RELATIVE_TO}
    relative_to = output.metadata.get(RELATIVE_TO)
    if not isinstance(relative_to, str):
        return default_response(output)
    return default_response(
        ToolOutput(
            absolute_paths(
                output.text(), relative_to, tool_input.get("output_mode", "files_with_matches") == "files_with_matches"
            ),
            output.is_error,
            meta,
        )
    )


def search_tools() -> list[Tool]:
    return [
        Tool(
            "Glob",
            "Find files by name pattern (e.g. **/*.py), newest first. Use it to locate files, not find or ls; "
            "Grep searches their contents.",
            GlobInput,
            _glob,
            group="fs",
            read_only=True,
            timeout_s=120,
            effects=Effects(rule=READ, path_fields=("path",), lists=True, glob_field="pattern"),
        ),
        Tool(
            "Grep",
            "Search file contents with a regular expression (ripgrep syntax); use it, not grep or rg. "
            "output_mode: files_with_matches (default), content (with -n, -A, -B, -C) or count; narrow with "
            "glob or type.",
            GrepInput,
            _grep,
            group="fs",
            read_only=True,
            timeout_s=120,
            effects=Effects(rule=READ, path_fields=("path",), reads=True, lists=True),
            respond=_grep_response,
        ),
    ]
