"""Record Claude Code 2.1.328 on the plugin scenario of the compatibility fixture (run once by hand).

    PYTHONPATH=src:tests python tests/data/compat/record_claude_plugin.py /path/to/claude

Runs ``claude -p /toolkit:commit --allowedTools Read --plugin-dir PLUGINS`` (a folder of plugins)
against keel's scripted model server; stores request bodies, hook payloads and the resulting git
log in claude-code-2.1.328-plugin.json ($PROJECT, $PLUGINS for the folders).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from integration.compat.fixture import PLUGIN_PROMPT, build_plugin, plugin_plan
from kit import fake_llm_server, stop

OUT = Path(__file__).with_name("claude-code-2.1.328-plugin.json")


def main() -> None:
    claude = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        project, plugins, home = Path(tmp) / "project", Path(tmp) / "plugins", Path(tmp) / "home"
        for folder in (project, plugins, home):
            folder.mkdir()
        env = {"PATH": os.environ["PATH"], "HOME": str(home)}
        build_plugin(project, plugins, env)
        server = fake_llm_server({"steps": plugin_plan()})
        env |= {
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-0000",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        command = [claude, "-p", PLUGIN_PROMPT, "--allowedTools", "Read", "--plugin-dir", str(plugins)]
        run = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=180)
        requests = [r["body"] for r in server.cursor.requests]
        stop(server)
        log = project / "hooks.jsonl"
        hooks = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        git_log = subprocess.run(
            ["git", "log", "--format=%s", "--name-only"], cwd=project, capture_output=True, text=True, check=True
        ).stdout
        record = {
            "command": "claude -p /toolkit:commit --allowedTools Read --plugin-dir $PLUGINS",
            "exit": run.returncode,
            "stdout": run.stdout,
            "requests": requests,
            "hooks": hooks,
            "git_log": git_log,
        }
        text = json.dumps(record, indent=1).replace(str(project), "$PROJECT").replace(str(plugins), "$PLUGINS")
        OUT.write_text(text.replace(str(home), "$HOME") + "\n")
        print(run.returncode, run.stdout, run.stderr[-2000:], len(requests), len(hooks), git_log)


if __name__ == "__main__":
    main()
