"""Record Claude Code 2.1.328's agent and skill listings on the collections fixture (run once by hand).

    PYTHONPATH=src:tests python tests/data/compat/record_claude_collections.py /path/to/claude

For each listing budget in ``collections.BUDGETS`` it copies the fixture into a fresh folder and runs
``claude --model claude-sonnet-4-5 -p hello --allowedTools Read --plugin-dir PLUGINS`` (HOME = the
fixture's home, which holds user skills) against keel's scripted model server, then stores the agent
and skill listing lines of the first request (only those: not Claude Code's own prompt text) in
claude-code-2.1.328-collections.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from integration.compat.collections import BUDGETS, MODEL, PROMPT, RECORDING, build, listings
from kit import fake_llm_server, stop


def main() -> None:
    claude = sys.argv[1]
    record: dict[str, object] = {
        "command": f"claude --model {MODEL} -p {PROMPT} --allowedTools Read --plugin-dir PLUGINS",
        "runs": {},
    }
    for label, budget in BUDGETS.items():
        with tempfile.TemporaryDirectory() as tmp:
            project, home, plugins = build(Path(tmp))
            subprocess.run(["git", "init", "-q"], cwd=project, check=True)
            server = fake_llm_server({"steps": ["ok"], "match": [{"contains": "quota", "steps": ["ok"]}]})
            env = {
                "PATH": os.environ["PATH"],
                "HOME": str(home),
                "ANTHROPIC_BASE_URL": server.url,
                "ANTHROPIC_API_KEY": "sk-ant-fake-0000",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            }
            if budget is not None:
                env["SLASH_COMMAND_TOOL_CHAR_BUDGET"] = budget
            cmd = [claude, "--model", MODEL, "-p", PROMPT, "--allowedTools", "Read", "--plugin-dir", str(plugins)]
            run = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
            first = server.cursor.requests[0]["body"]
            stop(server)
            record["runs"][label] = {"exit": run.returncode, **listings(first)}  # type: ignore[index]
    RECORDING.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
