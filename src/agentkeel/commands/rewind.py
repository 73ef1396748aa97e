"""``/rewind`` and ``/fork``: slash-command bodies over :mod:`agentkeel.session.history`.

``/rewind`` lists the session's user turns; ``/rewind N [code|conversation|both] [--force]`` goes
back to just before turn N (default: both). A file changed since keel last changed it (a hand
edit) is not overwritten: the rewind is refused, naming the files, and ``--force`` is the user's
yes. ``/fork [N]`` copies the session (up to just before turn N)
into a new session and says how to resume it. The TUI and ``keel serve`` call the history API
directly; these are the line-mode and headless faces of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from agentkeel.commands.registry import CommandFailed
from agentkeel.session.fork import fork_session
from agentkeel.session.history import RewindConflict, RewindError, RewindMode, rewind, user_turns
from agentkeel.session.index import home_of

if TYPE_CHECKING:
    from agentkeel.core.handle import SessionHandle as Runtime

MODES = ("both", "code", "conversation")


def _listing(runtime: Runtime) -> str:
    turns = user_turns(runtime.session_path)
    if not turns:
        return "Nothing to rewind: the session has no user turns yet."
    lines = ["Turns (rewind with `/rewind N [code|conversation|both]`; both is the default):"]
    for t in turns:
        files = f"  [{len(t.files_changed)} file(s) changed]" if t.files_changed else ""
        lines.append(f"  {t.index}. {t.timestamp[11:19]}  {t.text[:70].replace(chr(10), ' ')}{files}")
    return "\n".join(lines)


def _turn_arg(word: str, command: str) -> int:
    try:
        return int(word)
    except ValueError:
        raise CommandFailed(f"{command} takes a turn number, not {word!r}: `/rewind` lists them") from None


async def rewind_command(runtime: Runtime, args: str) -> str:
    words = args.split()
    force = "--force" in words
    words = [w for w in words if w != "--force"]
    if not words:
        return _listing(runtime)
    if len(words) > 2 or (len(words) == 2 and words[1] not in MODES):
        raise CommandFailed("usage: /rewind [N [code|conversation|both] [--force]]")
    turn = _turn_arg(words[0], "/rewind")
    mode = cast(RewindMode, words[1] if len(words) == 2 else "both")
    try:
        result = await rewind(runtime, turn, mode, force=force)
    except RewindConflict as e:
        raise CommandFailed(str(e).replace(" code --force`", f" {mode} --force`")) from None
    except RewindError as e:
        raise CommandFailed(str(e)) from None
    parts = []
    if mode != "code":
        parts.append(f"conversation rewound to before turn {turn} ({result.conversation_turns} turn(s) kept)")
    if mode != "conversation":
        changed = len(result.restored_files) + len(result.removed_files)
        parts.append(
            f"{changed} file(s) restored" + (f" ({len(result.removed_files)} removed)" if result.removed_files else "")
        )
    text = "Rewound: " + "; ".join(parts) + "."
    return text + (f"\nWarning: {result.warning}" if result.warning else "")


async def fork_command(runtime: Runtime, args: str) -> str:
    words = args.split()
    if len(words) > 1:
        raise CommandFailed("usage: /fork [N]  (N: fork before user turn N; default: the whole session)")
    at = _turn_arg(words[0], "/fork") if words else None
    try:
        new_id = fork_session(home_of(runtime.session_path), runtime.agent.context.cwd, runtime.session_id, at)
    except RewindError as e:
        raise CommandFailed(str(e)) from None
    where = f"before turn {at}" if at is not None else "at its current end"
    return f"Forked this session {where} into {new_id}: continue there with `keel -r {new_id}`."
