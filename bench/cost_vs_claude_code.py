"""keel and Claude Code side by side: what the same scripted work costs each, with Anthropic prompt
caching simulated on the request bodies they really sent.

Both agents (keel through ``keel -p``, Claude Code 2.1.328 through ``claude -p``) talk to one
scripted Anthropic Messages server started here (loopback, streamed SSE), on the same model id
(claude-sonnet-4-5 by default). The server answers each workload's script and records every
request body. Written after ../shared/bench/vs_claude_code.py and ../shared/tools/fakellm.py
(the shared side-by-side harness): their process handling and marker counting are copied here
so that keel's bench/ stands on its own.

Workloads:

- ``bash20``: 20 Bash calls (``echo step-N``), then an answer.
- ``coding12``: a 12-step coding task on a small Python project: Read, Edit, Bash (the tests).
- ``compact``: a long Bash session with bulky outputs over a small context window (the same for
  both: ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` for Claude Code, ``context.window`` for keel), long
  enough to cross the compaction threshold at least twice. An early output holds a fact
  (a failing test's name); the table says whether the last request still carries it.
- ``compact180``: the same, 180 steps: long enough for keel, whose command outputs are cut to
  256 lines (tools/output.py), to compact too (Claude Code compacts about every 22 steps).
- ``first``: the first request of a session in a Claude Code project with CLAUDE.md, a skill and
  a command (the compatibility fixture's files, tests/data/compat).
- ``second``: the same first request, in a second session of that project started after the
  first (within the cache's lifetime) and after an edit of the skill's description: what the
  previous session left in the cache is read (only the second session's request is counted).
- ``again``: the same, with nothing edited between the two sessions.

Prompt caching is simulated with Anthropic's rules: the prefix order is tools, system, messages;
each block with ``cache_control`` (at most 4) is a breakpoint; a breakpoint whose prefix is
shorter than the model's minimum cacheable length (the catalog's ``min_cache_tokens``) neither
writes nor reads; a request reads the longest prefix, ending at a block boundary at most 20
blocks before one of its breakpoints, that an earlier request of the same session wrote at a
breakpoint; it writes the prefixes at its breakpoints. Tokens are bytes/4 of each block's JSON
(``cost_cache.py``; the scripted server is ``cost_server.py``).
Cost: uncached input at the input price, reads at the cache-read price (0.1x), writes at the
cache-write price (1.25x), output at the output price (keel's model catalog). Each run starts with
a cold cache.

    .venv/bin/python bench/cost_vs_claude_code.py [--runs 1] [--quick] [--json out.json]
        [--workloads bash20,coding12,compact,compact180,first,second,again]
        [--keel .venv/bin/keel] [--model claude-sonnet-4-5]

``--quick``: shorter compacting session (fewer steps, smaller window). Claude Code is installed
from npm into ~/.cache/keel-peers on first use (needs node + npm).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cost_cache import canon, simulate
from cost_server import FACT, MARK, Recorder, Script, handler, is_summary_request

ROOT = Path(__file__).resolve().parents[1]
PEERS = Path.home() / ".cache" / "keel-peers"
COMPAT = ROOT / "tests" / "data" / "compat"
EXPAND = ROOT / "tests" / "data" / "expand"


# --- workloads ---------------------------------------------------------------------------

APP = '''"""Billing helpers."""


def total(items):
    return sum(price * qty for price, qty in items)


def discount(amount, pct):
    return amount - amount * pct / 100


def refund(amount, fee):
    return round(amount - fee, 1)
'''

TESTS = """import billing


def check():
    assert billing.total([(2, 3), (1, 4)]) == 10
    assert billing.discount(200, 10) == 180
    assert billing.refund(10.0, 1.25) == 8.75
    print("3 passed")


check()
"""


def _bash(cmd: str) -> list[dict[str, Any]]:
    return [{"name": "Bash", "input": {"command": cmd, "description": "Run a step"}}]


@dataclass
class Workload:
    name: str
    prompt: str
    script: Script
    expect: str
    setup: Any = None  # (project dir) -> None
    window: int = 0  # a context window for both agents (compaction), 0: the model's
    steps: int = 0
    warm: Any = None  # (project dir) -> None: run a session first, then this edit, then the measured one


def _coding_setup(proj: Path) -> None:
    (proj / "billing.py").write_text(APP)
    (proj / "test_billing.py").write_text(TESTS)


def _compat_setup(proj: Path) -> None:
    (proj / "CLAUDE.md").write_text(
        "# Project notes\n\nThis is a billing service. Run the tests with `python3 test_billing.py`.\n"
        "Keep functions small; every change comes with a test. Never commit secrets.\n"
    )
    skill = proj / ".claude" / "skills" / "requesting-code-review"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text((EXPAND / "requesting-code-review" / "SKILL.md.txt").read_text())
    cmds = proj / ".claude" / "commands"
    cmds.mkdir(parents=True)
    (cmds / "plan.md").write_text(
        "---\ndescription: Creates a concise engineering implementation plan based on user requirements\n"
        "argument-hint: [user prompt] [orchestration prompt]\n---\n# Plan\n\nCreate a plan for: $ARGUMENTS\n"
    )
    _coding_setup(proj)


def _edit_skill(proj: Path) -> None:
    """Between two sessions: the project's skill gets a new description."""
    skill = proj / ".claude" / "skills" / "requesting-code-review" / "SKILL.md"
    text = skill.read_text()
    skill.write_text(text.replace("description: ", "description: (edited) ", 1))


def _no_edit(proj: Path) -> None:
    """Between two sessions: nothing changes."""


def workloads(quick: bool) -> list[Workload]:
    bash = Script([_bash(f"echo step-{n}") for n in range(20)], final="done after 20 steps")
    read = lambda p: [{"name": "Read", "input": {"file_path": p}}]  # noqa: E731
    edit = lambda p, a, b: [{"name": "Edit", "input": {"file_path": p, "old_string": a, "new_string": b}}]  # noqa: E731
    coding_steps: list[list[dict[str, Any]]] = [
        read("{P}/billing.py"),
        read("{P}/test_billing.py"),
        _bash("python3 test_billing.py"),
        edit("{P}/billing.py", "round(amount - fee, 1)", "round(amount - fee, 2)"),
        _bash("python3 ./test_billing.py"),
        edit("{P}/billing.py", "amount - amount * pct / 100", "amount * (100 - pct) / 100"),
        _bash("python3 -B test_billing.py"),
        read("{P}/billing.py"),
        edit("{P}/test_billing.py", "    print(", "    assert billing.total([]) == 0\n    print("),
        _bash("python3 -B ./test_billing.py"),
        _bash("git status --short"),
        _bash("python3 -I test_billing.py"),
    ]
    # Claude Code does not compact below a window of about 100k tokens: the same window for both
    steps = 60 if quick else 75
    window = 100000

    def long_check(steps: int) -> list[list[dict[str, Any]]]:
        cmds = [_bash(f"echo '{MARK}0'; echo '{FACT}'")]
        return cmds + [_bash(f"echo '{MARK}{n}'; seq {n * 10000} {n * 10000 + 899}") for n in range(1, steps)]

    cmds = long_check(steps)
    long_steps = 120 if quick else 180  # keel -p stops at 200 turns by default
    return [
        Workload("bash20", "run the steps", bash, "done after 20 steps", steps=20),
        Workload(
            "coding12",
            "fix the refund rounding and add a test",
            Script(coding_steps, final="fixed"),
            "fixed",
            _coding_setup,
            steps=12,
        ),
        Workload(
            "compact",
            "run the long check",
            Script(cmds, final="long check done", marker=True),
            "long check done",
            window=window,
            steps=steps,
        ),
        Workload(
            "compact180",
            "run the long check",
            Script(long_check(long_steps), final="long check done", marker=True),
            "long check done",
            window=window,
            steps=long_steps,
        ),
        Workload("first", "hello", Script([], final="hello there"), "hello there", _compat_setup, steps=0),
        Workload(
            "second",
            "hello",
            Script([], final="hello there"),
            "hello there",
            _compat_setup,
            steps=0,
            warm=_edit_skill,
        ),
        Workload(
            "again",
            "hello",
            Script([], final="hello there"),
            "hello there",
            _compat_setup,
            steps=0,
            warm=_no_edit,
        ),
    ]


def _resolve(script: Script, proj: Path) -> Script:
    def sub(v: Any) -> Any:
        if isinstance(v, str):
            return v.replace("{P}", str(proj))
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    return Script(sub(script.fixed), script.final, script.marker)


# --- running the agents ------------------------------------------------------------------


def claude_bin(version: str) -> str:
    exe = PEERS / "node_modules" / ".bin" / "claude"
    if not exe.exists():
        PEERS.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", f"@anthropic-ai/claude-code@{version}"], cwd=PEERS, check=True)
    return str(exe)


def run_agent(agent: str, exe: str, wl: Workload, base: dict[str, str], tmp: Path, model: str) -> float:
    proj = tmp / "proj"
    fresh = not proj.exists()  # else: a second session of the same project
    if fresh:
        proj.mkdir(parents=True)
        if wl.setup:
            wl.setup(proj)
        subprocess.run(["git", "init", "-q", "."], cwd=proj, check=True)
        (tmp / "home").mkdir()
    env = dict(base, HOME=str(tmp / "home"))
    allowed = "Bash,Read,Edit,Skill"
    if agent == "keel":
        home = tmp / "keelhome"
        home.mkdir(exist_ok=True)
        context = dict(json.loads(os.environ.get("KEEL_BENCH_CONTEXT") or "{}"))  # trying other settings
        if wl.window:
            context["window"] = wl.window
        if context:
            (home / "settings.json").write_text(json.dumps({"context": context}))
        env["KEEL_HOME"] = str(home)
        argv = [exe, "-p", wl.prompt, "--output-format", "json", "--allowedTools", allowed, "--model", model]
    else:
        env.update(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1")
        if wl.window:
            env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(wl.window)
        argv = [exe, "-p", wl.prompt, "--output-format", "json", "--allowedTools", allowed, "--model", model]
    t0 = time.time()
    p = subprocess.run(argv, env=env, cwd=proj, capture_output=True, stdin=subprocess.DEVNULL, timeout=600)
    out = p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
    if wl.expect not in out:
        raise SystemExit(f"{agent} did not finish {wl.name} (exit {p.returncode}): {out[-600:]}")
    return time.time() - t0


def _strip_marks(msgs: list[dict[str, Any]]) -> list[str]:
    return [
        canon(
            {
                "role": m.get("role"),
                "content": [canon(b) for b in m["content"]] if isinstance(m.get("content"), list) else m.get("content"),
            }
        )
        for m in msgs
    ]


def _compactions(bodies: list[tuple[bytes, int]]) -> tuple[int, int, list[int], int]:
    """Compactions (a main request whose messages do not continue the previous one's, whatever
    the strategy: summary or cleared tool results), summary requests, the index of the first
    main request after each compaction, and how many summary requests carry the early fact."""
    n = summaries = with_fact = 0
    after: list[int] = []
    prev: list[str] | None = None
    for i, (raw, _) in enumerate(bodies):
        body = json.loads(raw)
        text = raw.decode("utf-8", "replace")
        if is_summary_request(body, text):
            summaries += 1
            with_fact += FACT in text
            continue
        if not body.get("tools"):
            continue
        msgs = _strip_marks(body.get("messages") or [])
        if prev is not None and msgs[: len(prev)] != prev:
            n += 1
            after.append(i)
        prev = msgs
    return n, summaries, after, with_fact


def catalog(model: str) -> tuple[dict[str, float], int]:
    data = json.loads((ROOT / "src" / "agentkeel" / "models" / "models.json").read_text())
    entry = data["models"][f"anthropic:{model}"]
    prices = {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0, **entry["price"]}
    return prices, int(entry.get("min_cache_tokens", 1024))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keel", default=str(ROOT / ".venv" / "bin" / "keel"))
    ap.add_argument("--model", default="claude-sonnet-4-5")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="a shorter compacting session")
    ap.add_argument("--workloads", default="bash20,coding12,compact,compact180,first,second,again")
    ap.add_argument("--claude-version", default="2.1.328")
    ap.add_argument("--json", help="write the figures here (default bench/results/cost_vs_claude_code.json)")
    ap.add_argument("--keep", action="store_true", help="keep the recorded request bodies (printed path)")
    a = ap.parse_args()
    keel = a.keel if Path(a.keel).exists() else (shutil.which("keel") or "/work/main/.venv/bin/keel")
    claude = claude_bin(a.claude_version)
    prices, min_tokens = catalog(a.model)
    chosen = [w for w in workloads(a.quick) if w.name in a.workloads.split(",")]
    rec = Recorder()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler(rec))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE", "KEEL_"))}
    base.update(ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}", ANTHROPIC_API_KEY="sk-ant-fake-0000")
    tmp = Path(tempfile.mkdtemp(prefix="cost-vs-cc-"))
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    try:
        for wl in chosen:
            results[wl.name] = {"keel": [], "claude-code": []}
            for i in range(a.runs):
                for agent, exe in (("keel", keel), ("claude-code", claude)):
                    where = tmp / f"{wl.name}-{agent}-{i}"
                    rec.reset(_resolve(wl.script, where / "proj"))
                    warm = 0
                    if wl.warm:  # earlier sessions of the project, then an edit of its skill
                        # two: a keel home's very first session has an empty memory and so no memory
                        # tools, which every later session has (memory/plugin.py): the steady state is
                        # measured, the one-time change of a new install is reported in the docs
                        run_agent(agent, exe, wl, base, where, a.model)
                        run_agent(agent, exe, wl, base, where, a.model)
                        warm = len(rec.bodies)
                        wl.warm(where / "proj")
                    wall = run_agent(agent, exe, wl, base, where, a.model)
                    bodies = list(rec.bodies)
                    if a.keep:
                        (where / "requests.jsonl").write_bytes(b"\n".join(r for r, _ in bodies))
                    fig = simulate(bodies, min_tokens, warm)
                    row: dict[str, Any] = {
                        "requests": fig.requests,
                        "cost_usd": fig.cost(prices),
                        "uncached": fig.uncached,
                        "cache_read": fig.cache_read,
                        "cache_write": fig.cache_write,
                        "output": fig.output,
                        "first_request_tokens": fig.sizes[0] if fig.sizes else 0,
                        "wall_s": wall,
                    }
                    if wl.window:
                        n, summaries, after, with_fact = _compactions(bodies)
                        row["compactions"] = n
                        row["summary_requests"] = summaries
                        row["summary_requests_with_fact"] = with_fact
                        row["compactions_per_12_steps"] = n * 12 / wl.steps
                        row["post_compaction_pct_of_window"] = [round(100 * fig.sizes[j] / wl.window, 1) for j in after]
                        row["fact_in_last_request"] = FACT in bodies[-1][0].decode("utf-8", "replace")
                    results[wl.name][agent].append(row)
    finally:
        srv.shutdown()
    summary = report(results, a)
    out = Path(a.json) if a.json else ROOT / "bench" / "results" / "cost_vs_claude_code.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "model": a.model,
                "prices": prices,
                "min_cache_tokens": min_tokens,
                "quick": a.quick,
                "summary": summary,
                "runs": results,
            },
            indent=1,
        )
    )
    if a.keep:
        print(f"request bodies kept under {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def report(results: dict[str, dict[str, list[dict[str, Any]]]], a: argparse.Namespace) -> dict[str, Any]:
    def med(rows: list[dict[str, Any]], k: str) -> float:
        return float(statistics.median(r[k] for r in rows))

    print(f"cache-weighted cost, {a.model}, {a.runs} run(s) each (medians)")
    head = f"{'workload':10} {'keel $':>10} {'CC $':>10} {'keel/CC':>8} {'req k/CC':>9} {'1st req tok k/CC':>17}"
    print(head)
    summary: dict[str, Any] = {}
    for name, by in results.items():
        k, c = by["keel"], by["claude-code"]
        ratio = med(k, "cost_usd") / med(c, "cost_usd")
        summary[name] = {
            "keel_cost_usd": med(k, "cost_usd"),
            "cc_cost_usd": med(c, "cost_usd"),
            "ratio": ratio,
            "keel_requests": med(k, "requests"),
            "cc_requests": med(c, "requests"),
        }
        print(
            f"{name:10} {med(k, 'cost_usd'):10.4f} {med(c, 'cost_usd'):10.4f} {ratio:8.2f} "
            f"{med(k, 'requests'):4.0f}/{med(c, 'requests'):<4.0f} "
            f"{med(k, 'first_request_tokens'):8.0f}/{med(c, 'first_request_tokens'):<8.0f}"
        )
        if "compactions" in k[0]:
            for agent, rows in by.items():
                r = rows[0]
                summary[name][agent] = {
                    x: r[x]
                    for x in (
                        "compactions",
                        "compactions_per_12_steps",
                        "post_compaction_pct_of_window",
                        "fact_in_last_request",
                        "summary_requests",
                        "summary_requests_with_fact",
                    )
                }
                print(
                    f"  {agent}: {r['compactions']} compactions, {r['summary_requests']} summary requests "
                    f"({r['summary_requests_with_fact']} with the early fact) "
                    f"({r['compactions_per_12_steps']:.2f} per 12 steps), "
                    f"after each: {r['post_compaction_pct_of_window']} % of the window, "
                    f"early fact in the last request: {r['fact_in_last_request']}"
                )
    return summary


if __name__ == "__main__":
    sys.exit(main())
