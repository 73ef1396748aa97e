"""keel's ``KEEL_*`` environment variables, each declared once with its type and default.

:class:`KeelEnv` is a typed view of the environment it is given (a session's, a server's, a
test's), never of ``os.environ`` at import: ``KeelEnv.of(env)``; ``KeelEnv.of()`` reads this
process's environment at that moment. An empty value is unset. A number that does not parse is
its default (a knob, not a safety setting: keel goes on). :data:`VARIABLES` is the list for
``keel --help``-style docs; :data:`SET_FOR_CHILDREN` are the ones keel sets for hooks, shells and
plugin servers rather than reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentkeel.internal.home import keel_home

VARIABLES: dict[str, str] = {
    "KEEL_HOME": "keel's own folder (settings, sessions, memory, logs); default ~/.keel",
    "KEEL_MODEL": "the model when none is asked for",
    "KEEL_EFFORT": "the reasoning effort hooks are told (default medium)",
    "KEEL_PROVIDER_TRANSPORT": "wire (default) or sdk: how the provider is reached",
    "KEEL_SCRIPT": "the scripted model's script file (the offline fake model)",
    "KEEL_MANAGED_SETTINGS": "the managed settings file; default /etc/keel/managed-settings.json",
    "KEEL_MANAGED_INSTRUCTIONS": "the managed instruction file; default /etc/keel/KEEL.md",
    "KEEL_MAX_RETRIES": "retries of a failed model request (default 4)",
    "KEEL_SUBAGENT_MAX_DEPTH": "how deep subagents may nest (default 3, as Claude Code)",
    "KEEL_SUBAGENT_CONCURRENCY": "subagents running at once (default 4)",
    "KEEL_SUBAGENT_MAX_TURNS": "a subagent's turns when its definition gives none (default 100)",
    "KEEL_BACKGROUND_WAIT_S": "how long a print-mode run waits for background agents (default 600)",
    "KEEL_THEME": "light or dark (the TUI); default from the terminal",
    "KEEL_SERVE_TOKEN": "the web server's access token; default a new random one",
    "KEEL_GREP_PYTHON": "set: Grep uses its Python engine, not ripgrep",
    "KEEL_MEMORY_EMBEDDER": "the memory embedder (default auto)",
    "KEEL_MEMORY_SQLITE": "stdlib: the standard library's sqlite3, not the bundled one",
    "KEEL_MEMORY_PROJECT": "the memory project name, instead of the one derived from the folder",
    "KEEL_MINILM_DIR": "a folder with the MiniLM model files",
    "KEEL_MINILM_QUERY": "int8 (default) or float32: the query embedding's precision",
    "KEEL_MINILM_RUNTIME": "the MiniLM runtime (one of the embedder's runtimes)",
    "KEEL_BWRAP": "another bubblewrap binary for the Bash sandbox",
}

SET_FOR_CHILDREN: dict[str, str] = {
    "KEEL_SHELL_TAG": "<session>:<call> on every process Bash starts (found and killed by it)",
    "KEEL_PROJECT_DIR": "the project folder (hooks; CLAUDE_PROJECT_DIR too)",
    "KEEL_SESSION_ID": "the session's id (hooks)",
    "KEEL_PID": "keel's process id (hooks)",
    "KEEL_HOOK_EVENT": "the hook event being run",
    "KEEL_ENV_FILE": "the file SessionStart hooks write exports to (CLAUDE_ENV_FILE too)",
    "KEEL_PLUGIN_ROOT": "the plugin's folder (CLAUDE_PLUGIN_ROOT too)",
}


@dataclass(frozen=True)
class KeelEnv:
    """The ``KEEL_*`` variables of one environment, typed."""

    env: Mapping[str, str]

    @classmethod
    def of(cls, env: Mapping[str, str] | None = None) -> KeelEnv:
        return cls(os.environ if env is None else env)

    def text(self, name: str) -> str | None:
        """The raw value of a declared variable; None when unset or empty."""
        if name not in VARIABLES:
            raise KeyError(f"{name} is not a declared KEEL_* variable (internal/env.py VARIABLES)")
        return self.env.get(name) or None

    def number(self, name: str, default: int, minimum: int | None = None) -> int:
        try:
            value = int(self.text(name) or "")
        except ValueError:
            return default
        return value if minimum is None else max(minimum, value)

    def seconds(self, name: str, default: float) -> float:
        try:
            return float(self.text(name) or "")
        except ValueError:
            return default

    def choice(self, name: str) -> str:
        """Lower-cased and stripped, '' when unset (the caller names the valid choices)."""
        return (self.text(name) or "").strip().lower()

    @property
    def home(self) -> Path:
        return keel_home(self.env)

    @property
    def model(self) -> str | None:
        return self.text("KEEL_MODEL")

    @property
    def effort(self) -> str:
        return self.text("KEEL_EFFORT") or "medium"

    @property
    def provider_transport(self) -> str | None:
        return self.text("KEEL_PROVIDER_TRANSPORT")

    @property
    def managed_settings(self) -> Path:
        return Path(self.text("KEEL_MANAGED_SETTINGS") or "/etc/keel/managed-settings.json")

    @property
    def managed_instructions(self) -> Path:
        return Path(self.text("KEEL_MANAGED_INSTRUCTIONS") or "/etc/keel/KEEL.md")

    @property
    def max_retries(self) -> int:
        return self.number("KEEL_MAX_RETRIES", 4)

    @property
    def subagent_max_depth(self) -> int:
        return self.number("KEEL_SUBAGENT_MAX_DEPTH", 3, minimum=1)

    @property
    def subagent_concurrency(self) -> int:
        return self.number("KEEL_SUBAGENT_CONCURRENCY", 4, minimum=1)

    @property
    def subagent_max_turns(self) -> int:
        return self.number("KEEL_SUBAGENT_MAX_TURNS", 100, minimum=1)

    @property
    def background_wait_s(self) -> float:
        return self.seconds("KEEL_BACKGROUND_WAIT_S", 600.0)

    @property
    def serve_token(self) -> str | None:
        return self.text("KEEL_SERVE_TOKEN")

    @property
    def grep_python(self) -> bool:
        return self.text("KEEL_GREP_PYTHON") is not None

    @property
    def memory_embedder(self) -> str:
        return self.text("KEEL_MEMORY_EMBEDDER") or "auto"

    @property
    def memory_project(self) -> str | None:
        return self.text("KEEL_MEMORY_PROJECT")
