"""Record Claude Code 2.1.328 on the compatibility fixture (run once by hand; the output is test data).

    PYTHONPATH=src:tests python tests/data/compat/record_claude.py /path/to/claude

Builds the fixture in a fresh folder, runs
``claude -p PROMPT --allowedTools Skill,Write`` against keel's scripted model server, and stores
every request body, the hook payloads and the resulting files in claude-code-2.1.328.json, with
the project folder written as ``$PROJECT``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from integration.compat.fixture import PROMPT, build, plan
from kit import fake_llm_server, stop

OUT = Path(__file__).with_name("claude-code-2.1.328.json")


def main() -> None:
    claude = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        home = Path(tmp) / "home"
        home.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        build(project)
        server = fake_llm_server({"steps": plan(project), "match": [{"contains": "quota", "steps": ["ok"]}]})
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-0000",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        run = subprocess.run(
            [claude, "-p", PROMPT, "--allowedTools", "Skill,Write"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        requests = [r["body"] for r in server.cursor.requests]
        stop(server)
        hooks_log = project / "hooks.jsonl"
        hooks = [json.loads(line) for line in hooks_log.read_text().splitlines()] if hooks_log.exists() else []
        notes = project / "notes.txt"
        record = {
            "command": f"claude -p {PROMPT!r} --allowedTools Skill,Write",
            "exit": run.returncode,
            "stdout": run.stdout,
            "requests": requests,
            "hooks": hooks,
            "files": {"notes.txt": notes.read_text() if notes.exists() else None},
        }
        text = json.dumps(record, indent=1).replace(str(project), "$PROJECT").replace(str(home), "$HOME")
        OUT.write_text(text + "\n")
        print(run.returncode, run.stdout, run.stderr[-2000:], len(requests), len(hooks))


if __name__ == "__main__":
    main()
