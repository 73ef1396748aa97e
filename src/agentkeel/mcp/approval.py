"""Claude Code's per-server approval of a project's ``.mcp.json`` servers.

A ``.mcp.json`` is checked into the repository, so whoever wrote it chooses what programs keel
starts. Folder trust (``keel trust``) is the first gate; each server is the second, as in
Claude Code:

* a server named in ``disabledMcpjsonServers`` never starts ("rejected");
* one named in ``enabledMcpjsonServers``, or any server under ``enableAllProjectMcpServers``,
  starts ("approved");
* any other is *pending*. Interactive mode asks once per pending server (use this server / use
  every server of this project / don't use it) and writes the answer to
  ``.keel/settings.local.json``, as Claude Code writes ``.claude/settings.local.json`` (keel reads
  both). With nobody to ask (``-p``, the SDK, a batch) a pending server of a trusted folder
  starts, as Claude Code does in non-interactive mode.

``keel mcp reset-project-choices`` forgets the answers (both files' keys), so the next
interactive session asks again.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from agentkeel.config.sections import McpSection
from agentkeel.mcp.config import Approval, ServerConfig, read_json, servers_in

__all__ = [
    "APPROVAL_KEYS",
    "Choice",
    "ask_about_servers",
    "pending_servers",
    "read_object",
    "record_choices",
    "reset_choices",
]

Choice = Literal["yes", "yes_all", "no"]
APPROVAL_KEYS = ("enabledMcpjsonServers", "disabledMcpjsonServers", "enableAllProjectMcpServers")


def local_settings(cwd: Path) -> Path:
    return cwd / ".keel" / "settings.local.json"


def pending_servers(
    cwd: Path, layers: Iterable[McpSection | Mapping[str, Any]], env: Mapping[str, str], errors: list[str]
) -> list[ServerConfig]:
    """The project's ``.mcp.json`` servers that no setting approves or rejects yet."""
    approval = Approval.from_layers(layers)
    data = read_json(cwd / ".mcp.json", errors)
    if data is None:
        return []
    found = servers_in(data, "project", str(cwd / ".mcp.json"), env, errors)
    return [s for s in found if approval.status(s.name) == "pending"]


def read_object(path: Path) -> dict[str, Any]:
    """A JSON settings file as a dict ({} when absent); OSError with one line when unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OSError(f"cannot read {path}: {e}; fix or remove the file first") from None
    if not isinstance(data, dict):
        raise OSError(f"{path} is not a JSON object; fix or remove it first")
    return data


def _write(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".settings.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record_choices(cwd: Path, choices: Mapping[str, Choice]) -> Path:
    """Write the answers to ``.keel/settings.local.json`` (other keys are kept as they are)."""
    path = local_settings(cwd)
    data = read_object(path)
    enabled = [n for n in data.get("enabledMcpjsonServers", []) if isinstance(n, str)]
    disabled = [n for n in data.get("disabledMcpjsonServers", []) if isinstance(n, str)]
    for name, choice in choices.items():
        if choice == "no":
            disabled += [] if name in disabled else [name]
            enabled = [n for n in enabled if n != name]
        else:
            enabled += [] if name in enabled else [name]
            disabled = [n for n in disabled if n != name]
            if choice == "yes_all":
                data["enableAllProjectMcpServers"] = True
    data["enabledMcpjsonServers"] = enabled
    data["disabledMcpjsonServers"] = disabled
    _write(path, data)
    from agentkeel.config.localfiles import ignore_local_files

    ignore_local_files(path)
    return path


def reset_choices(cwd: Path) -> list[Path]:
    """Forget every approval answer of this project (keel's and Claude Code's local settings)."""
    changed = []
    for path in (local_settings(cwd), cwd / ".claude" / "settings.local.json"):
        data = read_object(path) if path.is_file() else {}
        if any(k in data for k in APPROVAL_KEYS):
            _write(path, {k: v for k, v in data.items() if k not in APPROVAL_KEYS})
            changed.append(path)
    return changed


Ask = Callable[[str], Awaitable[str]]


async def ask_about_servers(pending: list[ServerConfig], ask: Ask, say: Callable[[str], None]) -> dict[str, Choice]:
    """Ask about each pending server; returns the answers (an empty answer means "no", as the
    safe default of a dialog the user dismissed)."""
    choices: dict[str, Choice] = {}
    for index, server in enumerate(pending):
        say(f"New MCP server found in .mcp.json: {server.name} ({server.describe()})")
        say("MCP servers may execute code or access system resources. Only use servers from sources you trust.")
        while True:
            answer = (await ask("Use it? [y] this server / [a] all of this project's servers / [n] no: ")).strip()
            if answer.lower() in ("y", "yes"):
                choices[server.name] = "yes"
                break
            if answer.lower() in ("a", "all"):
                for rest in pending[index:]:
                    choices[rest.name] = "yes_all"
                return choices
            if answer.lower() in ("n", "no", ""):
                choices[server.name] = "no"
                break
    return choices
