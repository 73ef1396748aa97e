"""Prevention: non-interactive environment for shell commands.

The Bash tool already runs with CI=true, GIT_EDITOR/EDITOR/VISUAL=true, PAGER/GIT_PAGER=cat and
the rest of SPEC 5's list (tools/shell.py); this built-in adds the variables of other tools that
page or prompt, and stops the commands that cannot work without a terminal before they run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension, ToolCall, Verdict
from agentkeel.reliability.state import ReliabilityState, notice
from agentkeel.tools import effects_of

# more tools that page or prompt (the user's own env settings win: these are defaults)
EXTRA_ENV = {
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "cat",
    "GH_PAGER": "cat",
    "GH_PROMPT_DISABLED": "1",
    "AWS_PAGER": "",
    "GIT_MERGE_AUTOEDIT": "no",
    "HOMEBREW_NO_AUTO_UPDATE": "1",
    "CONDA_ALWAYS_YES": "true",
    "YARN_ENABLE_IMMUTABLE_INSTALLS": "false",
}

EDITORS = frozenset({"vim", "vi", "nvim", "nano", "emacs", "pico", "joe", "micro", "mcedit", "ne", "kak", "hx"})
FULLSCREEN = frozenset({"top", "htop", "btop", "watch", "tmux", "screen", "vimdiff", "tig", "mc", "nnn", "ranger"})
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "nice", "timeout", "stdbuf"})
_SPLIT = re.compile(r"\|\||&&|[;|&\n]")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _segments(command: str) -> list[list[str]]:
    out: list[list[str]] = []
    for part in _SPLIT.split(command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        if words:
            out.append(words)
    return out


def interactive_problem(command: str) -> str | None:
    """Why ``command`` needs a terminal it will not get, with the non-interactive way; or None."""
    for words in _segments(command):
        assigned = {w.split("=", 1)[0] for w in words if _ASSIGN.match(w)}
        rest = [w for w in words if not _ASSIGN.match(w)]
        while rest and (rest[0] in _WRAPPERS or rest[0].startswith("-") or rest[0].isdigit()):
            rest = rest[1:]  # sudo, env -i, timeout 5 ...
        if not rest:
            continue
        name, args = PurePosixPath(rest[0]).name, rest[1:]
        if name in EDITORS and not ({"--batch", "-batch", "--script", "-es", "-Es"} & set(args)):
            return (
                f"`{name}` is an interactive editor and this shell has no terminal: it would hang or exit "
                "without saving. Use the Edit or Write tool to change files (Read to view them)."
            )
        if name in FULLSCREEN and not (name == "top" and "-b" in args):
            return (
                f"`{name}` is a full-screen program and this shell has no terminal. Use a one-shot command "
                "instead (`top -b -n 1`, `ps aux`, a plain loop with a bound)."
            )
        if name == "git" and args:
            sub, opts = args[0], set(args[1:])
            if sub in ("add", "checkout", "reset", "restore", "stash") and opts & {
                "-p",
                "--patch",
                "-i",
                "--interactive",
            }:
                flags = " ".join(sorted(opts & {"-p", "--patch", "-i", "--interactive"}))
                return (
                    f"`git {sub} {flags}` asks hunk by hunk "
                    "on a terminal this shell does not have. Stage whole paths (`git add FILE`) or write a patch and "
                    "`git apply --cached PATCH`."
                )
            if sub == "rebase" and opts & {"-i", "--interactive"} and "GIT_SEQUENCE_EDITOR" not in assigned:
                return (
                    "`git rebase -i` opens an editor for the todo list; here the editor is `true`, so the rebase would "
                    "run unchanged. Give the edit as a command: `GIT_SEQUENCE_EDITOR=\"sed -i 's/^pick X/squash X/'\" "
                    "git rebase -i BASE`, or use `git rebase BASE` / `git commit --fixup`."
                )
            if sub in ("mergetool", "difftool"):
                return f"`git {sub}` starts an interactive tool; use `git diff` and edit the files with the Edit tool."
    return None


def non_interactive_env(bus: EventBus, state: ReliabilityState, tool_env: dict[str, str] | None) -> Extension:
    """Failure: a command that waits for a terminal (an editor, a pager, `git add -p`,
    `git rebase -i`, `watch`) hangs the Bash tool until its timeout, or silently does something
    else. Prevention: pagers and prompts are switched off through the environment, and a command
    that cannot work without a terminal is refused before it runs with the way to do it without one."""
    if tool_env is not None:
        for key, value in EXTRA_ENV.items():
            tool_env.setdefault(key, value)

    async def before_tool(call: ToolCall) -> Verdict | None:
        if not (call.tool.effects if call.tool is not None else effects_of(call.name)).shell:
            return None
        command = call.input.get("command")
        if not isinstance(command, str) or call.input.get("run_in_background"):
            return None
        problem = interactive_problem(command)
        if problem is None:
            return None
        notice(bus, "non-interactive-env", f"refused: {command[:80]} ({problem.split(':')[0]})", "warning")
        return Verdict("deny", f"Not run: {problem}", "non-interactive-env")

    return Extension("non-interactive-env", before_tool=before_tool)
