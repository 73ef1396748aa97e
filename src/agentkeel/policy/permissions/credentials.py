"""Does a call read a credential store? One answer for both paths: the permission engine asks
(even inside the working directories, e.g. when the home directory is one), and the sandbox's
auto-allow lets the call ask rather than run it unasked. The list itself is
:data:`agentkeel.policy.permissions.paths.CREDENTIAL_STORES` (the sandbox hides the same paths).

What counts for Bash: every argument that may name a file (``--opt=value`` values, ``@file``,
``if=``), every read redirect, and the root of every tree a command reads recursively (a tree
that holds a store reads it). A glob counts when it may match a store. Arguments known only at
run time are not seen here; such a command is not read with confidence and asks anyway, and the
sandbox hides the stores from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkeel.policy.permissions.paths import candidates, credential_store
from agentkeel.policy.permissions.verdicts import StageResult
from agentkeel.policy.permissions.words import DYNAMIC

if TYPE_CHECKING:
    from agentkeel.policy.permissions.call import Call


def credential_verdict(call: Call, keel_home: str | None) -> StageResult | None:
    """The tool stage's ask for a read of a credential store (an allow rule still decides)."""
    why = credential_read(call, keel_home)
    return StageResult("tool", "ask", why) if why is not None else None


def credential_read(call: Call, keel_home: str | None) -> str | None:
    """Why ``call`` reads a credential store ("``cat ~/.npmrc`` reads ~/.npmrc, a credential
    store"), or None."""
    if call.reads_files and call.paths is not None:
        holding = call.effects.reads and call.effects.lists  # reads the files under its path (Glob lists names)
        for path in dict.fromkeys(call.paths):
            store = credential_store(path, call.home, keel_home, holding=holding)
            if store is not None:
                return f"{call.name} {call.paths[0]} reads {store}, a credential store; approval required"
        return None
    if not call.shell or call.bash is None:
        return None
    from agentkeel.policy.permissions import shellpolicy as sp
    from agentkeel.policy.permissions import targets, trees

    for cmd in call.bash.commands:
        words = [(w, False) for w in sp.path_words(cmd)]
        # files read through options the words above do not show: ``date -f~/.npmrc``
        # (an attached short value), ``git blame -S~/.netrc``, ``curl -H@~/.docker/config.json``
        words += [(w, False) for w in targets.read_targets(cmd)]
        words += [(t.root, True) for t in trees.tree_reads(cmd)]
        for word, holding in words:
            store = _store(word, cmd.cwd, call.home, keel_home, holding=holding)
            if store is not None:
                return f"`{sp._show(cmd)}` reads {store}, a credential store; approval required"
    for redirect in call.bash.redirects:
        if redirect.mode == "read" and DYNAMIC not in redirect.target:
            store = _store(redirect.target, redirect.cwd, call.home, keel_home, holding=False)
            if store is not None:
                return f"redirect {redirect.op} {redirect.target} reads {store}, a credential store; approval required"
    return None


def _store(word: str, cwd: str, home: str, keel_home: str | None, *, holding: bool) -> str | None:
    if DYNAMIC in word or not word:
        return None
    for path in dict.fromkeys(candidates(word, cwd or "/", home)):
        store = credential_store(path, home, keel_home, holding=holding)
        if store is not None:
            return store
    return None
