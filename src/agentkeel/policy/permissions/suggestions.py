"""The allow rule keel offers to remember when it asks about a command: never one wider than
what was approved reaches (a runner's ``uv run *`` would admit any command).
"""

from __future__ import annotations

import re

from agentkeel.policy.permissions.bashmodel import SimpleCommand
from agentkeel.tools import SHELL

_SUBCOMMAND_TOOLS = frozenset(
    {
        "git",
        "npm",
        "pnpm",
        "yarn",
        "bun",
        "npx",
        "cargo",
        "go",
        "docker",
        "kubectl",
        "pip",
        "uv",
        "poetry",
        "make",
        "gh",
        "terraform",
        "dotnet",
        "mvn",
        "gradle",
        "bundle",
        "rails",
        "mix",
        "deno",
        "python",
        "python3",
    }
)


# (program, subcommand) pairs that run a command, code or a request named in their arguments:
# a suggestion never ends there (``Bash(uv run *)`` would admit ``uv run rm -rf /``)
_RUNS_ANYTHING = frozenset(
    {
        ("uv", "run"),
        ("npm", "run"),  # a script by name: the suggestion keeps the name (`npm run build *`)
        ("npm", "run-script"),
        ("pnpm", "run"),
        ("yarn", "run"),
        ("uv", "tool"),
        ("uvx", ""),
        ("npx", ""),
        ("pnpx", ""),
        ("bunx", ""),
        ("npm", "exec"),
        ("npm", "x"),
        ("pnpm", "exec"),
        ("pnpm", "dlx"),
        ("yarn", "exec"),
        ("yarn", "dlx"),
        ("bun", "x"),
        ("bun", "run"),
        ("bun", "exec"),
        ("poetry", "run"),
        ("pipenv", "run"),
        ("pdm", "run"),
        ("hatch", "run"),
        ("rye", "run"),
        ("bundle", "exec"),
        ("deno", "run"),
        ("deno", "eval"),
        ("deno", "task"),  # a task by name, as npm run
        ("yarn", "workspace"),  # yarn workspace <name> <any yarn command>: exec, dlx, node...
        ("yarn", "workspaces"),
        ("docker", "run"),
        ("docker", "exec"),
        ("docker", "compose"),
        ("podman", "run"),
        ("podman", "exec"),
        ("kubectl", "exec"),
        ("kubectl", "run"),
        ("kubectl", "debug"),
        ("gh", "api"),
        ("gh", "extension"),
        ("gh", "ext"),
        ("go", "run"),
        ("cargo", "run"),
        ("dotnet", "run"),
        ("mix", "run"),
        ("rails", "runner"),
        ("git", "bisect"),
        ("git", "submodule"),
        ("git", "filter-branch"),
        ("git", "difftool"),
        ("git", "mergetool"),
        ("mvn", "exec:exec"),
        ("mvn", "exec:java"),
        ("python", "-c"),
        ("python3", "-c"),
    }
)
# programs that run what their arguments say: a suggestion never ends right after one
_INTERPRETERS = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "fish", "env", "xargs", "exec", "eval", "sudo", "doas", "nohup"}
    | {"timeout", "nice", "setsid", "time", "watch", "node", "deno", "bun", "ruby", "perl", "php", "python"}
    | {"python3", "pip", "pip3", "npm", "npx", "uv", "uvx", "make", "cmake", "bundle", "docker", "git", "curl"}
    | {"wget", "ssh", "osascript", "powershell", "pwsh", "lua", "tclsh", "expect", "awk", "gawk", "sed", "find"}
    | {"run", "exec", "x", "dlx", "eval", "script", "shell", "repl", "console"}
    # interpreters and launchers a runner may start: each runs code or a command its arguments give
    | {"ipython", "pypy", "pypy3", "coverage", "tsx", "ts-node", "esno", "zx", "vite-node", "cross-env"}
    | {"dotenv", "dotenv-cli", "env-cmd", "concurrently", "npm-run-all", "run-p", "run-s", "nodemon", "pm2"}
    | {"xonsh", "irb", "pry", "iex", "elixir", "erl", "ghci", "runghc", "Rscript", "R", "julia", "scala"}
    | {"groovy", "jshell", "nu", "tcsh", "csh", "busybox", "strace", "ltrace", "gdb", "valgrind", "sudo"}
    | {"pnpm", "yarn", "bunx", "pnpx", "npm-exec", "tox", "nox", "invoke", "doit", "just", "watchexec"}
)
# runners whose next word names where, not what (``yarn workspace web <any yarn command>``)
_WORKSPACE_RUNNERS = frozenset({("yarn", "workspace"), ("yarn", "workspaces")})
# commands that run a command on another machine: a suggestion is exactly what was approved
_REMOTE_RUNNERS = frozenset(
    {("gcloud", "compute", "ssh"), ("gcloud", "cloud-shell", "ssh"), ("az", "vm", "run-command")}
    | {("gh", "codespace", "ssh"), ("aws", "ssm", "start-session"), ("aws", "ecs", "execute-command")}
)


# command groups whose second word is the action (`gh repo clone` / `gh repo delete`)
_TWO_LEVELS = frozenset({"gh", "aws", "gcloud", "az"})


def _runs_anything(words: list[str]) -> bool:
    return (words[0], "") in _RUNS_ANYTHING or (len(words) > 1 and (words[0], words[1]) in _RUNS_ANYTHING)


def uncovered_suggestion(cmd: SimpleCommand) -> str | None:
    """A rule the user may choose to remember for this command: never one wider than what was
    approved reaches (``uv run pytest`` suggests ``Bash(uv run pytest *)``, never ``uv run *``)."""
    if cmd.dynamic or not cmd.argv:
        return None
    words = [*cmd.privileged, *cmd.argv]
    if _runs_anything(words):
        # the runner, then the program it runs when that is a plain tool name (not an interpreter)
        at = 1 if (words[0], "") in _RUNS_ANYTHING else 2
        inner = words[at] if len(words) > at else ""
        if (
            words[0] not in ("docker", "podman", "kubectl", "gh", "git", "deno", "python", "python3")
            and tuple(words[:2]) not in _WORKSPACE_RUNNERS
            and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]*", inner)
            and not re.fullmatch(r"python[0-9.]*", inner)
            and inner not in _INTERPRETERS
            and not _runs_anything([inner, *words[at + 1 : at + 2]])
        ):
            return f"{SHELL}({' '.join(words[: at + 1])} *)"
        return f"{SHELL}({' '.join(words)})"  # exactly this command
    if tuple(words[:3]) in _REMOTE_RUNNERS:
        return f"{SHELL}({' '.join(words)})"
    if words[0] in _TWO_LEVELS and len(words) >= 3 and re.fullmatch(r"[a-z][a-z0-9-]*", words[2]):
        return f"{SHELL}({' '.join(words[:3])} *)"  # `gh pr list *`: approving a clone is not approving a delete
    if len(words) >= 2 and words[0] in _SUBCOMMAND_TOOLS and not words[1].startswith("-"):
        return f"{SHELL}({words[0]} {words[1]} *)"  # `npm test *`: that subcommand, any arguments
    return f"{SHELL}({' '.join(words)})"  # anything else: exactly this command, never a whole program
