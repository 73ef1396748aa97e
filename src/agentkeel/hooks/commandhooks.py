"""A slash command's own ``hooks`` (its frontmatter), live while that command's prompt runs.

Claude Code honours settings-shaped ``hooks:`` in a command's frontmatter for the turn the
command starts. keel builds them as it builds an agent definition's hooks (the session's
``hooks`` built-in bound to the main session: its transcript, bus and working directory; the
builder is the composition root's ``DefinitionHooks``, passed in) and adds them as the
``command-hooks`` extension, before the permission gate as the session's hooks are. At the next
prompt they retire themselves; the next command that has hooks replaces them.

A command from a project (or a plugin inside it) runs commands: its hooks are inert until the
folder is trusted (``keel trust``), as the project's own settings hooks are.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import msgspec
from msgspec.structs import replace

from agentkeel.config.trust import TrustState
from agentkeel.core.extensions import Extension, PromptInfo, PromptVerdict
from agentkeel.core.handle import SessionHandle
from agentkeel.core.tools import Services

NAME = "command-hooks"


class PromptGate(msgspec.Struct, frozen=True):
    """The session's UserPromptSubmit for a typed slash command, asked before the command expands
    (Claude Code fires it first: a block means none of the command's ``!`` lines run). ``check(line)``
    returns the block's reason, or None. Provided by the ``hooks`` built-in when the session has hooks."""

    check: Callable[[str], Awaitable[str | None]]


async def prompt_allowed(session: SessionHandle, line: str) -> str | None:
    """The block's reason when the session's UserPromptSubmit hooks refuse ``line``, else None."""
    gate = session.agent.services.find(PromptGate)
    return None if gate is None else await gate.check(line)


def _trusted(session: SessionHandle, source: Path) -> bool:
    agent = session.agent
    trust = agent.services.find(TrustState)
    if trust is not None and trust.trusted:
        return True
    try:
        return not source.resolve().is_relative_to(agent.context.cwd.resolve())
    except (OSError, ValueError):
        return False


def command_hooks(
    session: SessionHandle,
    hooks: object,
    *,
    source: Path,
    build: Callable[..., tuple[Extension | None, list[str] | None]] | None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Make ``hooks`` (a command's frontmatter value) live for the prompt the command is about to
    run (``env``: the session's environment, default this process's). Returns the lines to show
    the user: why they are off, what in them was ignored."""
    agent = session.agent
    agent.ext.remove(NAME)  # a previous command's, if its prompt never ran
    if not hooks:
        return []
    if not isinstance(hooks, Mapping):
        return [f"{source}: 'hooks' must be an object of event names; ignored"]
    if not _trusted(session, source):
        return [f"{source}: the command's hooks are inert in an untrusted folder (`keel trust`)"]
    if build is None:
        return [f"{source}: hooks are not available in this session; the command's hooks are off"]
    scratch = session.session_path.with_suffix("") / "command-hooks"
    built, notices = build(
        agent,
        dict(hooks),
        bus=agent.bus,
        scratch=scratch,
        provider=agent.provider,
        model=agent.config.model,
        agent_id=session.session_id,
        transcript=session.session_path,
        workdir=agent.context.workdir,
        env={**(os.environ if env is None else env), **agent.context.env},  # the session's, as its own hooks get
        services=Services(),
    )
    notes = [n.replace("sdk: ", f"{source}: ", 1) for n in notices or []]
    if built is None:
        return notes or [f"{source}: hooks are not available in this session; the command's hooks are off"]
    agent.ext.add(_for_one_prompt(session, built), before="permission-gate")
    return notes


def _for_one_prompt(session: SessionHandle, built: Extension) -> Extension:
    """The built extension, retired (taken off the session, its bus subscribers detached) when the
    next prompt is submitted."""
    agent = session.agent
    detach = [agent.bus.subscribe(s) for s in built.subscribers]
    prompts = 0
    inner = built.on_prompt

    async def on_prompt(info: PromptInfo) -> PromptVerdict | None:
        nonlocal prompts
        prompts += 1
        if prompts > 1:
            agent.ext.remove(NAME)  # the loop iterates the list it had: removing is safe here
            for d in detach:
                d()
            return None
        return await inner(info) if inner is not None else None

    # never fire SessionStart/SessionEnd for a command: its hooks live for one prompt
    return replace(built, name=NAME, on_prompt=on_prompt, subscribers=[], start=None, close=None)


__all__ = ["NAME", "PromptGate", "command_hooks", "prompt_allowed"]
