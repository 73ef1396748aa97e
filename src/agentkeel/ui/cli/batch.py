"""``keel batch TASKS.jsonl -o OUT.jsonl`` and ``keel batch report OUT.jsonl``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from agentkeel.ui.cli._common import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_ERROR, EXIT_USAGE

if TYPE_CHECKING:
    from agentkeel.ui.batch.runner import Progress


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"keel batch: {message} (see keel batch --help)\n")


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _run_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="keel batch", description="Run many keel sessions from a TASKS.jsonl file.")
    p.add_argument("tasks", type=Path, help="one JSON task per line: {id, prompt, repo|git, ...}")
    p.add_argument("-o", "--output", type=Path, required=True, help="results, one JSON line per task")
    p.add_argument("--concurrency", type=_positive(int), default=4, help="tasks at a time (default 4)")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--address", help="a Ray cluster's address (default: start a local one)")
    p.add_argument("--resume", action="store_true", help="skip tasks already in the output; run the rest")
    p.add_argument("--max-budget-usd", type=_positive(float), help="start no task once the batch has spent this")
    p.add_argument("--rpm", type=_positive(int), help="provider requests per minute, shared by all workers")
    p.add_argument("--tpm", type=_positive(int), help="provider input tokens per minute, shared by all workers")
    p.add_argument("--rate-window-s", type=_positive(float), default=60.0, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=_positive(float), dest="timeout_s", help="seconds per task (default: none)")
    p.add_argument("--retries", type=int, default=1, help="re-runs of a task whose worker died (default 1)")
    return p


def _report_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="keel batch report", description="Summarise a batch's results.")
    p.add_argument("output", type=Path)
    p.add_argument("--html", type=Path, help="also write an HTML page here")
    p.add_argument("--json", action="store_true")
    return p


def _progress_printer(tty: bool) -> Callable[[Progress], None]:
    def show(p: Progress) -> None:
        if tty:
            width = 30
            filled = int(width * p.done / p.total) if p.total else width
            bar = "#" * filled + "." * (width - filled)
            sys.stderr.write(f"\r[{bar}] {p.done}/{p.total}  ok {p.ok}  failed {p.failed}  ${p.cost_usd:.4f}")
            if p.done == p.total:
                sys.stderr.write("\n")
        else:
            last = p.last
            line = {"type": "progress", "done": p.done, "total": p.total, "ok": p.ok, "failed": p.failed,
                    "cost_usd": round(p.cost_usd, 6), "task": last.id if last else None,
                    "status": last.status if last else None}  # fmt: skip
            sys.stderr.write(json.dumps(line) + "\n")
        sys.stderr.flush()

    return show


def main(argv: list[str]) -> int:
    if argv and argv[0] == "report":
        return _report(argv[1:])
    args = _run_parser().parse_args(argv)
    from agentkeel.ui.batch.results import BatchLocked
    from agentkeel.ui.batch.runner import BatchOptions, run_batch
    from agentkeel.ui.batch.tasks import TaskFileError

    opts = BatchOptions(
        tasks_path=args.tasks, out_path=args.output, concurrency=args.concurrency, backend=args.backend,
        address=args.address, resume=args.resume, max_budget_usd=args.max_budget_usd, rpm=args.rpm,
        tpm=args.tpm, rate_window_s=args.rate_window_s, timeout_s=args.timeout_s, retries=max(0, args.retries),
    )  # fmt: skip
    try:
        outcome = run_batch(opts, _progress_printer(sys.stderr.isatty()))
    except TaskFileError as e:
        print(f"keel batch: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BatchLocked as e:
        print(f"keel batch: {e}", file=sys.stderr)
        return EXIT_RUN_ERROR
    except OSError as e:
        print(f"keel batch: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    p = outcome.progress
    tail = f"; {len(outcome.not_started)} not started" if outcome.not_started else ""
    if outcome.limiter_admitted:
        tail += (f"; rate limiter: {outcome.limiter_admitted} request(s) sent, {outcome.limiter_429} refused by "
                 "the provider and resent")  # fmt: skip
    if outcome.budget_stopped:
        tail += f" (budget ${opts.max_budget_usd:g} reached)"
    print(f"keel batch: {p.ok} ok, {p.failed} not ok of {p.total} ({p.skipped} from earlier runs){tail}; "
          f"results in {args.output}", file=sys.stderr)  # fmt: skip
    if outcome.write_error:
        ids = ", ".join(outcome.unrecorded[:5]) + (" ..." if len(outcome.unrecorded) > 5 else "")
        print(f"keel batch: {outcome.write_error}; stopped. Not recorded: {ids} (their sessions are in `keel "
              "sessions`); make room and run again with --resume", file=sys.stderr)  # fmt: skip
        return EXIT_RUN_ERROR
    if outcome.interrupted:
        print("keel batch: interrupted; run again with --resume to finish", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if p.failed == 0 and not outcome.not_started else EXIT_RUN_ERROR


def _report(argv: list[str]) -> int:
    args = _report_parser().parse_args(argv)
    from agentkeel.ui.batch.report import render_html, render_text, summarise

    if not args.output.is_file():
        print(f"keel batch report: {args.output}: no such file", file=sys.stderr)
        return EXIT_USAGE
    s = summarise(args.output)
    if args.json:
        d = s.durations()
        print(json.dumps({"tasks": s.total, "by_status": dict(s.by_status), "success_rate": s.success_rate,
                          "cost_usd": s.cost, "tokens": list(s.tokens), "duration_s": d,
                          "failed": [r.id for r in s.failed()]}))  # fmt: skip
    else:
        print(render_text(s))
    if args.html:
        args.html.write_text(render_html(s, f"keel batch: {args.output.name}"), encoding="utf-8")
        print(f"wrote {args.html}", file=sys.stderr)
    return EXIT_OK
