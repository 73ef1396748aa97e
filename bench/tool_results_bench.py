"""Benchmark: the bytes of Read, Edit and Grep results the model sees, keel beside Claude Code.

Both agents run the same scripted coding task against keel's scripted model server (a
``conversations`` script, so side requests do not shift the steps): greps over a project of
real Python files (keel's own policy package, copied), Reads of whole files and of a range, Edits
and a re-read. The last request each agent sends carries every tool result; this prints the bytes
of each tool's results (what the model is billed for) and the keel/Claude Code ratio.

    python bench/tool_results_bench.py [--keel .venv/bin/keel] [--claude PATH] [--json out.json]
          [--show]  # also print every result text, side by side

Claude Code (2.1.328 was the comparison point) is looked for at ~/.cache/keel-peers; without it
only keel's figures are printed. As root it refuses bypass mode, so both get ``--allowedTools``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer

SRC = Path(__file__).resolve().parent.parent / "src" / "agentkeel" / "policy"
CLAUDE = Path.home() / ".cache" / "keel-peers" / "node_modules" / ".bin" / "claude"
MARK = "TOOLBENCH-TASK"
TOOLS = "Read Edit Grep Glob Bash"


def make_project(root: Path) -> Path:
    proj = root / "proj"
    shutil.copytree(SRC, proj / "pkg", ignore=shutil.ignore_patterns("__pycache__"))
    (proj / "README.md").write_text("# pkg\n\nA package.\n")
    subprocess.run(["git", "init", "-q", "."], cwd=proj, check=True)
    return proj


def plan(proj: Path) -> list[list[dict[str, Any]]]:
    pkg = proj / "pkg"
    safety = str(pkg / "safety.py")
    return [
        [{"name": "Grep", "input": {"pattern": "def ", "path": str(proj)}}],
        [{"name": "Grep", "input": {"pattern": "class \\w+", "path": str(pkg), "output_mode": "content", "-n": True}}],
        [{"name": "Grep", "input": {"pattern": "import", "path": str(pkg), "output_mode": "count"}}],
        [{"name": "Read", "input": {"file_path": safety}}],
        [{"name": "Read", "input": {"file_path": str(pkg / "redact.py"), "offset": 20, "limit": 60}}],
        [
            {
                "name": "Edit",
                "input": {"file_path": safety, "old_string": 'NO_RESULT = "', "new_string": 'NO_RESULT: str = "'},
            }
        ],
        [
            {
                "name": "Edit",
                "input": {
                    "file_path": safety,
                    "old_string": "log = logging.getLogger",
                    "new_string": "log: logging.Logger = logging.getLogger",
                },
            }
        ],
        [{"name": "Read", "input": {"file_path": safety, "offset": 20, "limit": 12}}],
        [{"name": "Grep", "input": {"pattern": "NO_RESULT", "path": str(proj), "output_mode": "content"}}],
    ]


def script(proj: Path) -> dict[str, Any]:
    steps: list[Any] = [{"tool_calls": calls} for calls in plan(proj)] + ["done: the task is finished"]
    return {"conversations": [{"match": MARK, "steps": steps}, {"match": "", "steps": ["ok"]}]}


def results_by_tool(body: dict[str, Any]) -> dict[str, list[str]]:
    names: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    for m in body.get("messages", []):
        if not isinstance(m.get("content"), list):
            continue
        for b in m["content"]:
            if b.get("type") == "tool_use":
                names[b["id"]] = b["name"]
            elif b.get("type") == "tool_result":
                c = b.get("content")
                text = c if isinstance(c, str) else "".join(x.get("text", "") for x in c or [])
                out.setdefault(names.get(b["tool_use_id"], "?"), []).append(text)
    return out


def run_agent(name: str, argv: list[str], env: dict[str, str], root: Path) -> dict[str, list[str]]:
    proj = make_project(root / name)
    server = FakeLLMServer(Script.from_data(script(proj)))
    server.start_background()
    try:
        env = dict(env, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-bench-not-a-key")
        prompt = f"{MARK}: tidy the type annotations"
        p = subprocess.run(
            [*argv, "-p", prompt, "--allowedTools", *TOOLS.split()],
            env=env,
            cwd=proj,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if "done: the task is finished" not in p.stdout:
            raise SystemExit(f"{name} did not finish (exit {p.returncode}): {p.stdout[-300:]} {p.stderr[-600:]}")
        mine = [r["body"] for r in server.cursor.requests if MARK in json.dumps(r["body"].get("messages", [])[:1])]
        return results_by_tool(mine[-1])
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keel", default=shutil.which("keel") or ".venv/bin/keel")
    ap.add_argument("--claude", default=str(CLAUDE))
    ap.add_argument("--json")
    ap.add_argument("--show", action="store_true")
    a = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE", "KEEL_"))}
    root = Path(tempfile.mkdtemp(prefix="tool-results-"))
    agents: dict[str, dict[str, list[str]]] = {}
    try:
        agents["keel"] = run_agent("keel", [a.keel], dict(base, KEEL_HOME=str(root / "keelhome")), root)
        if Path(a.claude).exists():
            env = dict(
                base, HOME=str(root / "cchome"), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1"
            )
            agents["claude-code"] = run_agent("claude-code", [a.claude], env, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sizes = {n: {t: sum(len(x.encode()) for x in v) for t, v in r.items()} for n, r in agents.items()}
    tools = sorted({t for s in sizes.values() for t in s})
    print(f"{'bytes of results':18}" + "".join(f"{n:>14}" for n in sizes) + ("      ratio" if len(sizes) == 2 else ""))
    for t in [*tools, "total"]:
        row = [sum(s.values()) if t == "total" else s.get(t, 0) for s in sizes.values()]
        ratio = f"{row[0] / row[1]:11.2f}" if len(row) == 2 and row[1] else ""
        print(f"{t:18}" + "".join(f"{v:>14}" for v in row) + ratio)
    if a.show:
        for n, r in agents.items():
            for t, texts in r.items():
                for x in texts:
                    print(f"\n===== {n} {t} ({len(x.encode())} bytes)\n{x[:1500]}")
    if a.json:
        Path(a.json).write_text(json.dumps({"bytes": sizes, "results": agents}, indent=1))


if __name__ == "__main__":
    main()
