"""``keel mem ...``: search, timeline, get, import, export, stats, forget, mirror, sync, retry,
check, repair, reindex, embed, mcp, web."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentkeel.internal.env import KeelEnv
from agentkeel.memory.sqlite_lib import sqlite3

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def add_parser(sub: Any) -> None:
    mem = sub.add_parser("mem", help="keel's memory: search, inspect, import, export, forget")
    mem.add_argument("--store", default=None, help="SQLite file or postgresql:// DSN (default: settings / $KEEL_HOME)")
    mem.add_argument("--embedder", default=None, help="auto | none | minilm | openai:<model>")
    mem.add_argument("--project", default=None, help="project id (default: from the git common dir of --cwd)")
    mem.add_argument("--cwd", default=None)
    msub = mem.add_subparsers(dest="action", required=True)

    search = msub.add_parser("search", help="layer 1: ids and one-line summaries")
    search.add_argument("query")
    search.add_argument("-k", "--limit", type=int, default=10)
    search.add_argument("--type", default=None)
    search.add_argument("--session", default=None)
    search.add_argument("--since", default=None, help="ISO 8601")
    search.add_argument("--until", default=None, help="ISO 8601")
    search.add_argument("--file", default=None)
    search.add_argument("--all-projects", action="store_true")
    search.add_argument("--budget", type=int, default=None, help="token budget for the result list")
    search.add_argument("--json", action="store_true")

    timeline = msub.add_parser("timeline", help="layer 2: entries around an id")
    timeline.add_argument("id")
    timeline.add_argument("--before", type=int, default=3)
    timeline.add_argument("--after", type=int, default=3)
    timeline.add_argument("--json", action="store_true")

    get = msub.add_parser("get", help="layer 3: full entries")
    get.add_argument("ids", nargs="+")
    get.add_argument("--budget", type=int, default=None)
    get.add_argument("--json", action="store_true")

    imp = msub.add_parser("import", help="import Claude Code, Codex or generic JSONL histories")
    imp.add_argument("source", choices=["claude-code", "codex", "jsonl"])
    imp.add_argument(
        "path", nargs="?", default=None, help="a file or folder (default: ~/.claude/projects, ~/.codex/sessions)"
    )

    exp = msub.add_parser("export", help="every entry as JSONL (masked) on stdout")
    exp.add_argument("--type", default=None)
    exp.add_argument("--all-projects", action="store_true")

    msub.add_parser("stats", help="entries by type, outbox and dead letters").add_argument(
        "--json", action="store_true"
    )
    forget = msub.add_parser("forget", help="erase entries for good")
    forget.add_argument("ids", nargs="+")
    mirror = msub.add_parser("mirror", help="write the project's facts, lessons and summaries as editable markdown")
    mirror.add_argument("path", nargs="?", default=None)
    sync = msub.add_parser("sync", help="apply edits made to the markdown mirror")
    sync.add_argument("path", nargs="?", default=None)
    msub.add_parser("retry", help="requeue dead-lettered capture records and index the outbox")
    msub.add_parser("check", help="check the memory database and its outbox for damage (exit 1 if damaged)")
    msub.add_parser(
        "repair", help="rebuild a damaged memory database or outbox from what is readable (with no session using it)"
    )
    for action, text in (
        ("reindex", "rebuild every vector with --embedder (after switching, or an endpoint outage)"),
        ("embed", "embed the entries still waiting for a vector (sessions capture lexically)"),
    ):
        # --embedder is accepted after the action too: keel mem reindex --embedder minilm
        msub.add_parser(action, help=text).add_argument("--embedder", default=argparse.SUPPRESS)
    msub.add_parser("mcp", help="serve search/timeline/get as an MCP server over stdio")
    web = msub.add_parser("web", help="a read-only dashboard: live observations, search, sessions")
    web.add_argument("--host", default="127.0.0.1", help="loopback by default; memory is private")
    web.add_argument("--port", type=int, default=7377, help="0 picks a free port")
    web.add_argument("--all-projects", action="store_true")


def _keel_home() -> Path:
    from agentkeel.internal.home import keel_home

    return keel_home()


def _memory_settings(cwd: Path) -> Any:
    """The ``memory`` settings a session in ``cwd`` would use (every layer; an untrusted project's dropped)."""
    from agentkeel.config.settings import MemorySettings, load_settings
    from agentkeel.config.trust import TrustStore

    home_dir = _keel_home()
    managed = KeelEnv.of().managed_settings
    loaded = load_settings(
        cwd,
        home=Path.home(),
        keel_home=home_dir,
        managed=managed if managed.is_file() else None,
        trusted_project=TrustStore(home_dir).state(cwd).trusted,
    )
    return loaded.settings.memory or MemorySettings()


def _store_errors() -> tuple[type[BaseException], ...]:
    """What a store can raise that deserves one line, not a traceback."""
    from agentkeel.memory import RecordError
    from agentkeel.memory.embed import EmbedderError

    errors: tuple[type[BaseException], ...] = (RecordError, EmbedderError, RuntimeError, OSError, sqlite3.Error)
    psycopg = sys.modules.get("psycopg")  # imported only when a PostgreSQL store was opened
    return errors + ((psycopg.Error,) if psycopg is not None else ())


def _fail(exc: BaseException, prefix: str = "keel mem: ") -> int:
    lines = str(exc).strip().splitlines()
    print(f"{prefix}{lines[0] if lines else type(exc).__name__}", file=sys.stderr)
    return EXIT_ERROR


def run(args: argparse.Namespace) -> int:
    from agentkeel.config.settings import SettingsError
    from agentkeel.memory import open_store
    from agentkeel.memory.project import project_id

    cwd = Path(args.cwd or Path.cwd())
    try:
        configured = _memory_settings(cwd)
    except SettingsError as exc:
        print(f"keel mem: invalid settings: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args.cross_project = configured.crossProject
    project = project_id(cwd, args.project or configured.project)
    location = args.store or configured.store or str(_keel_home() / "memory" / "memory.db")
    masks = tuple(configured.maskPatterns)
    if args.action in ("check", "repair"):
        return _check_or_repair(location, masks, repair=args.action == "repair")
    if args.action in ("reindex", "embed"):
        spec = args.embedder or configured.embedder
        return _reindex(location, spec, masks, only_pending=args.action == "embed")
    try:
        store = open_store(location, embedder=args.embedder or configured.embedder, mask_patterns=masks)
    except _store_errors() as exc:
        return _fail(exc)
    try:
        _drain_outbox(store, location)
        return _dispatch(args, store, project, cwd, location)
    except _store_errors() as exc:
        return _fail(exc)
    finally:
        store.close()


def _reindex(location: str, spec: str | None, masks: tuple[str, ...], only_pending: bool = False) -> int:
    from agentkeel.memory import open_store, resolve_embedder

    try:
        embedder = resolve_embedder(spec)
        if embedder is None:
            print(
                "keel mem: no embedder to reindex with: pass --embedder minilm or openai:<model>"
                " (the local one needs `pip install 'agentkeel[memory]'`)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        store = open_store(location, embedder=embedder.name if only_pending else "none", mask_patterns=masks)
    except _store_errors() as exc:
        return _fail(exc)
    try:
        _drain_outbox(store, location)
        if only_pending:
            count = 0
            while done := store.embed_pending(512):
                count += done
                print(f"\r{count} entries embedded", end="", file=sys.stderr)
            print(file=sys.stderr)
            print(f"embedded {count} pending entries with {embedder.name}")
            stats = store.stats()
            if stats["vectors"] < stats["entries"]:
                print(
                    f"keel mem: {stats['entries'] - stats['vectors']} entries still wait for a vector", file=sys.stderr
                )
                return EXIT_ERROR
            return EXIT_OK
        count = store.reindex(embedder, progress=lambda n: print(f"\r{n} entries embedded", end="", file=sys.stderr))
        print(file=sys.stderr)
        print(f"reindexed {count} entries with {embedder.name}")
        return EXIT_OK
    except _store_errors() as exc:
        return _fail(exc, "\nkeel mem: stopped, run it again: ")
    finally:
        store.close()


def _outbox(store: Any, location: str) -> Any:
    from agentkeel.memory.capture import Outbox, outbox_path

    return Outbox(outbox_path(_keel_home(), location), store)


def _drain_outbox(store: Any, location: str) -> None:
    """Index what capture acknowledged but no session finished indexing (a crash, a kill).

    A damaged outbox is named on stderr; the command goes on with the store."""
    from agentkeel.memory.capture import outbox_path

    if outbox_path(_keel_home(), location).exists():
        outbox = _outbox(store, location)
        try:
            outbox.drain()
            if outbox.damaged is not None:
                print(f"keel mem: warning: {outbox.damaged}", file=sys.stderr)
        finally:
            outbox.close()


def _dispatch(args: argparse.Namespace, store: Any, project: str, cwd: Path, location: str) -> int:
    action = args.action
    scope = None if getattr(args, "all_projects", False) else project
    if action == "search":
        hits = store.search(
            args.query,
            k=args.limit,
            budget_tokens=args.budget,
            project=scope,
            type=args.type,
            session=args.session,
            since=args.since,
            until=args.until,
            file=args.file,
        )
        if not hits:
            _verify_empty(store, location)
        if args.json:
            print(json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=2))
        else:
            print("\n".join(h.line() for h in hits) if hits else "no memories match")
        _pending_hint(store)
        return EXIT_OK
    if action == "timeline":
        hits = store.timeline(args.id, args.before, args.after)
        if not hits:
            print(f"keel mem: no memory with id {args.id}", file=sys.stderr)
            return EXIT_ERROR
        if args.json:
            print(json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=2))
        else:
            print("\n".join(("→ " if h.id == args.id else "  ") + h.line() for h in hits))
        return EXIT_OK
    if action == "get":
        entries = store.get(args.ids, budget_tokens=args.budget)
        if not entries:
            print("keel mem: no memories with those ids", file=sys.stderr)
            return EXIT_ERROR
        if args.json:
            print(json.dumps([e.to_dict() for e in entries], ensure_ascii=False, indent=2))
        else:
            print("\n\n".join(f"[{e.id}] {e.timestamp} {e.type} session={e.session or '-'}\n{e.text}" for e in entries))
        return EXIT_OK
    if action == "import":
        return _import(args, store, project)
    if action == "export":
        for entry in store.export(project=scope, type=args.type):
            print(json.dumps(entry.to_dict(), ensure_ascii=False))
        return EXIT_OK
    if action == "stats":
        stats = store.stats()
        stats["project"] = project
        stats["pending_vectors"] = store.pending_vectors() if store.embedder is not None else None
        outbox = _outbox(store, location)
        stats["outbox"] = outbox.counts() if outbox.damaged is None else {"damaged": str(outbox.damaged)}
        outbox.close()
        if args.json:
            print(json.dumps(stats, indent=2))
        else:
            for key, value in stats.items():
                print(f"{key}: {value}")
        return EXIT_OK
    if action == "forget":
        count = store.forget(args.ids)
        print(f"forgot {count} of {len(args.ids)} entries")
        return EXIT_OK if count else EXIT_ERROR
    if action in ("mirror", "sync"):
        from agentkeel.memory.consolidate import MirrorError, sync_mirror, write_mirror

        path = Path(args.path) if args.path else cwd / ".keel" / "memory" / "MEMORY.md"
        if action == "mirror":
            print(f"wrote {write_mirror(store, path, project)} entries to {path}")
        else:
            if not path.exists():
                print(f"keel mem: no mirror at {path}: run `keel mem mirror` first", file=sys.stderr)
                return EXIT_ERROR
            try:
                result = sync_mirror(store, path, project)
            except MirrorError as e:
                print(f"keel mem: {e}", file=sys.stderr)
                return EXIT_ERROR
            print(f"{result['changed']} entries superseded, {result['added']} added")
        return EXIT_OK
    if action == "retry":
        outbox = _outbox(store, location)
        requeued = outbox.retry_dead()
        indexed = outbox.drain(force=True)
        outbox.close()
        print(f"requeued {requeued} dead letters; indexed {indexed} records")
        return EXIT_OK
    if action == "web":
        return _web(args, store, scope)
    from agentkeel.memory.mcp_server import serve

    serve(store, project, cross_project=args.cross_project)
    return EXIT_OK


def _check_or_repair(location: str, masks: tuple[str, ...], repair: bool) -> int:
    """`keel mem check`: one line per file, exit 1 if any is damaged. `keel mem repair`: rebuild
    the damaged ones, index what the outbox holds, say what was kept and lost."""
    from agentkeel.memory import repair as fix
    from agentkeel.memory.backends import FILE, known_scheme

    try:
        file = known_scheme(location) == FILE
    except RuntimeError as exc:
        return _fail(exc)
    if not file:
        print(
            "keel mem: check and repair work on SQLite stores; PostgreSQL guards its own pages"
            " (see pg_amcheck and REINDEX)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        if repair:
            for line in fix.repair_files(Path(location).expanduser(), _keel_home(), masks):
                print(line)
        found = fix.check_files(Path(location).expanduser(), _keel_home())
    except _store_errors() as exc:
        return _fail(exc)
    for path, problems in found:
        if problems:
            print(f"keel mem: {path} is damaged ({problems[0]}): run `keel mem repair`", file=sys.stderr)
        elif not repair:
            print(f"{path}: ok")
    return EXIT_ERROR if any(problems for _, problems in found) else EXIT_OK


def _verify_empty(store: Any, location: str) -> None:
    """An empty answer is the one a user acts on ("keel does not remember that"): before giving
    it, make sure the store is not damaged (``PRAGMA quick_check`` and the word index's rows)."""
    from agentkeel.memory.health import MemoryDamaged

    problems = store.check()
    if problems:
        raise MemoryDamaged(store.stats()["location"] if "://" in location else location, problems[0])


def _pending_hint(store: Any) -> None:
    if store.embedder is None:
        return
    pending = store.pending_vectors()
    if pending:
        print(
            f"keel mem: {pending} entries have no vector yet and were matched by their words only;"
            " `keel mem embed` embeds them (idle sessions do it in the background)",
            file=sys.stderr,
        )


def _web(args: argparse.Namespace, store: Any, scope: str | None) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401

        from agentkeel.memory.web import serve
    except ImportError:
        print("keel mem web: the dashboard needs starlette and uvicorn: pip install 'agentkeel[web]'", file=sys.stderr)
        return EXIT_ERROR
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"keel mem web: warning: serving memory on {args.host}, reachable beyond this machine", file=sys.stderr)
    try:
        serve(store, scope, args.host, args.port)
    except OSError as exc:
        print(f"keel mem web: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def _import(args: argparse.Namespace, store: Any, project: str) -> int:
    from agentkeel.memory import importers

    source = "generic" if args.source == "jsonl" else args.source
    path = Path(args.path).expanduser() if args.path else None
    if source == "generic" and path is None:
        print("keel mem import jsonl: name the file or folder", file=sys.stderr)
        return EXIT_USAGE
    if path is not None and not path.exists():
        print(f"keel mem import: {path} does not exist", file=sys.stderr)
        return EXIT_ERROR
    files = importers.find_files(source, path, Path.home())
    report = importers.ImportReport()
    reader = {"claude-code": importers.claude_code, "codex": importers.codex, "generic": importers.generic}[source]
    batch: list[dict[str, Any]] = []
    added = 0
    for record in reader(files, project, report):
        batch.append(record)
        if len(batch) >= 256:
            added += store.add_many(batch)
            batch = []
    added += store.add_many(batch)
    print(
        f"imported {added} new records from {report.files} files"
        + (f"; skipped {report.skipped_lines} unreadable lines" if report.skipped_lines else "")
    )
    for problem in report.problems[:5]:
        print(f"  {problem}", file=sys.stderr)
    return EXIT_OK
