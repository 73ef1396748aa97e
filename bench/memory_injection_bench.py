"""Benchmark: the tokens memory injects per prompt (``<memory-context>``), and what they hold.

Three workloads, each through keel's own ``MemoryPlugin.prompt_context`` over a real SQLite store
(the prompt path searches words only, as in a session):

1. LoCoMo (../shared/data/locomo/dev.json, as bench/locomo_bench.py loads it): every question of
   categories 1-4 is a later prompt of a session in its conversation's project. Per prompt: the
   tokens injected (keel's estimate) and whether an evidence turn is cited ("injected recall").
2. Prompts memory cannot help ("hi", "continue", "run the tests"...) and off-topic questions,
   against the same LoCoMo store: tokens injected.
3. A coding project's memory (session summaries, one of a session resumed twice; identical
   ``pytest`` observations from many sessions; prompts; a lesson) and one session of twelve
   prompts: tokens injected per prompt, and lines injected twice in the session.

    python bench/memory_injection_bench.py [--json bench/results/memory_injection.json]

Run it with another checkout's ``src`` first on PYTHONPATH to measure that code (before/after).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "bench"))

from agentkeel.config.settings import MemorySettings  # noqa: E402
from agentkeel.memory import open_store  # noqa: E402
from agentkeel.memory.model import estimate_tokens  # noqa: E402
from agentkeel.memory.plugin import MemoryPlugin  # noqa: E402
from locomo_bench import DATA, load  # noqa: E402

NO_HELP = ["hi", "hello!", "continue", "go ahead", "run the tests", "thanks", "ok, fix it", "yes please", "try again"]
OFF_TOPIC = [
    "kubernetes ingress certificate renewal",
    "why does the pytest fixture leak a port",
    "rust borrow checker lifetime error in iterator",
    "webpack config for source maps",
    "numpy broadcasting shape mismatch",
]
_CITED = re.compile(r"^- \[([^\]]+)\]", re.M)


def _tokens(block: str) -> int:
    return estimate_tokens(block) if block else 0


def plugin(db: Path, home: Path, project: str, session: str) -> MemoryPlugin:
    config = MemorySettings(store=str(db), embedder="none", project=project, lessons=False)
    p = MemoryPlugin(config, cwd=home, keel_home=home, session_id=session, window_tokens=200_000)
    p._prompts = 1  # a later prompt: the session start block is measured apart (workload 3)
    return p


def later_prompt(p: MemoryPlugin, prompt: str) -> str:
    if hasattr(p, "_shown"):
        p._shown.clear()  # each question on its own, as in a new session
    p._prompts = 1
    return p.prompt_context(prompt) or ""


def locomo(tmp: Path) -> dict[str, Any]:
    records, questions = load(DATA)
    db = tmp / "locomo.db"
    store = open_store(str(db), embedder="none")
    for i in range(0, len(records), 512):
        store.add_many(records[i : i + 512])
    store.close()
    plugins: dict[str, MemoryPlugin] = {}
    tokens: list[int] = []
    found = 0
    for project, question, evidence in questions:
        p = plugins.get(project) or plugins.setdefault(project, plugin(db, tmp, project, "bench"))
        block = later_prompt(p, question)
        tokens.append(_tokens(block))
        found += bool(evidence & set(_CITED.findall(block)))
    first = next(iter(plugins.values()))
    no_help = [_tokens(later_prompt(first, q)) for q in NO_HELP]
    off_topic = [_tokens(later_prompt(first, q)) for q in OFF_TOPIC]
    for p in plugins.values():
        p.close()
    return {
        "questions": len(questions),
        "tokens_per_prompt_mean": round(statistics.mean(tokens), 1),
        "tokens_per_prompt_p50": statistics.median(tokens),
        "prompts_with_no_block": sum(1 for t in tokens if t == 0),
        "injected_recall": round(found / len(questions), 3),
        "no_help_tokens": dict(zip(NO_HELP, no_help, strict=True)),
        "off_topic_tokens": dict(zip(OFF_TOPIC, off_topic, strict=True)),
    }


def coding_records(project: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def rec(n: int, kind: str, session: str, text: str, day: int, **meta: Any) -> None:
        out.append(
            {
                "id": f"m{n:03d}",
                "type": kind,
                "project": project,
                "session": session,
                "timestamp": f"2026-11-{day:02d}T10:00:00+00:00",
                "text": text,
                "metadata": meta,
            }
        )

    n = 0
    tasks = [
        ("fix the date parser for ISO weeks", "parser.py", "test_parse_iso_week"),
        ("add a --verbose flag to the cli", "cli.py", "test_cli_verbose"),
        ("speed up the csv export", "export.py", "test_export_large"),
        ("the config loader ignores env overrides", "config.py", "test_env_override"),
        ("refactor the http retry loop", "http.py", "test_retry_backoff"),
    ]
    for s, (task, file, test) in enumerate(tasks):
        session = f"s{s}"
        day = 10 + s
        rec(n := n + 1, "user_prompt", session, task, day)
        rec(n := n + 1, "tool_observation", session, f"Read /repo/src/{file} (120 lines)", day, tool="Read")
        rec(n := n + 1, "tool_observation", session, f"Edit /repo/src/{file}: The file was updated", day, tool="Edit")
        for _ in range(3):  # the same check, the same output, in every session
            rec(n := n + 1, "tool_observation", session, "$ pytest -q\n42 passed in 1.2s", day, tool="Bash")
        rec(n := n + 1, "tool_observation", session, f"$ pytest -q -k {test}\n1 passed", day, tool="Bash")
        runs = 2 if s == 1 else 1  # the cli session was resumed: one summary per run, the same text
        for _ in range(runs):
            summary = f"Asked: {task}. Changed src/{file}; {test} passes; the full suite passes."
            rec(n := n + 1, "session_summary", session, summary, day, summary=summary)
    rec(n := n + 1, "lesson", "s0", "bugfix: fix the date parser; lessons: run the one failing test first", 10)
    return out


CODING_PROMPTS = [
    "the csv export is slow again on big files",
    "run the tests",
    "continue",
    "make the date parser accept ISO week dates with a day",
    "run the tests",
    "thanks. now the cli --verbose flag should also print timings",
    "continue",
    "why does test_env_override fail on CI",
    "the config loader: env overrides again",
    "ok",
    "run the tests",
    "commit it",
]


def coding(tmp: Path) -> dict[str, Any]:
    db = tmp / "coding.db"
    store = open_store(str(db), embedder="none")
    store.add_many(coding_records("repo"))
    store.close()
    p = MemoryPlugin(
        MemorySettings(store=str(db), embedder="none", project="repo", lessons=False),
        cwd=tmp,
        keel_home=tmp,
        session_id="now",
        window_tokens=200_000,
    )
    per_prompt: list[int] = []
    lines: list[str] = []
    for prompt in CODING_PROMPTS:
        block = p.prompt_context(prompt) or ""
        per_prompt.append(_tokens(block))
        lines += [re.sub(r"^- \[[^\]]+\] \S+ ", "", x) for x in block.splitlines() if x.startswith("- [")]
    p.close()
    return {
        "prompts": len(CODING_PROMPTS),
        "tokens_per_prompt": per_prompt,
        "tokens_total": sum(per_prompt),
        "lines_injected": len(lines),
        "lines_injected_more_than_once": len(lines) - len(set(lines)),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = {"locomo": locomo(Path(tmp)), "coding": coding(Path(tmp))}
    print(json.dumps(result, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
