"""Pieces of assembling a session that the builder (:mod:`agentkeel.app.builder`) calls: which model,
the fallback model, the Bash sandbox, a forked log, a writable KEEL_HOME; and the one error a
session cannot start with.

Kept apart from the builder so that the assembly order reads in one place there.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel.config.settings import LoadedSettings, Settings
from agentkeel.internal.env import KeelEnv
from agentkeel.models.catalog import ModelConfigError, ModelInfo, resolve_model, untrusted_model_allowed

if TYPE_CHECKING:
    from agentkeel.config.trust import TrustState
    from agentkeel.policy.permissions import PermissionEngine


class KeelError(Exception):
    """A problem the user can fix; the message is one line that says how."""


def sandbox_for(
    settings: Settings,
    cwd: Path,
    home: Path,
    keel_home_dir: Path,
    add_dirs: tuple[Path, ...],
    engine: PermissionEngine,
    warnings: list[str],
) -> Any:
    """The Bash sandbox (agentkeel.policy.sandbox), imported only when settings mention it."""
    if settings.sandbox is None:
        return None
    from agentkeel.policy.sandbox import SandboxError, setup_sandbox

    try:
        return setup_sandbox(
            settings.sandbox,
            cwd=cwd,
            home=home,
            keel_home=keel_home_dir,
            additional_dirs=add_dirs,
            engine=engine,
            warnings=warnings,
        )
    except SandboxError as e:
        raise KeelError(str(e)) from None


def model_name(requested: str | None, loaded: LoadedSettings, env: Mapping[str, str], trust: TrustState) -> str | None:
    """The model to use. An untrusted project may only pick a catalog model of a provider the
    user already configured: never a provider, a path (``scripted:...``) or a base URL."""
    chosen = requested or KeelEnv.of(env).model
    if chosen:
        return chosen
    name = loaded.settings.model
    if not name or trust.trusted:
        return name
    source = next((layer for layer in reversed(loaded.layers) if layer.settings.model is not None), None)
    if source is None or source.scope not in ("project", "local"):
        return name
    if untrusted_model_allowed(name, env):
        return name
    loaded.warnings.append(
        f"{source.path}: model '{name}' ignored until you trust this folder (`keel trust`): an untrusted "
        "project may only choose a catalog model of a provider you have configured"
    )
    return None


def fallback_model_id(name: str | None, info: ModelInfo, env: Mapping[str, str], warnings: list[str]) -> str:
    """The fallback model's id for this session's provider, or "" (none, or one keel cannot use)."""
    if not name:
        return ""
    try:
        fallback = resolve_model(name, env)
    except ModelConfigError as e:
        warnings.append(f"fallback model ignored: {e}")
        return ""
    if fallback.provider != info.provider:
        warnings.append(
            f"fallback model '{name}' is a {fallback.provider} model and this session uses {info.provider}: ignored"
        )
        return ""
    return fallback.model


class ResumeRefused(KeelError):
    """A truncating resume that does not fit the session (``--resume-drops-turn``): Claude Code ends
    with an error result, not a usage message."""


def forked(source: Path, sessions: Path, at_uuid: str | None = None, drops_turn: str | None = None) -> Path:
    """A copy of a session's log under a new id: the conversation goes on there, the original stays
    (``at_uuid``: only up to that message; ``drops_turn``: the turn after it must be that prompt's)."""
    from agentkeel.session.fork import TruncationRefused, fork_file  # with a parent link and the checkpoints

    try:
        return fork_file(source, at_uuid=at_uuid, drops_turn=drops_turn)
    except TruncationRefused as e:
        raise ResumeRefused(str(e)) from None
    except OSError as e:
        raise KeelError(f"cannot fork session {source.stem}: {e.strerror or e}") from None


def writable(home_dir: Path, sessions: Path) -> None:
    """KEEL_HOME and the project's session folder exist, private to the user, and can be written."""
    from agentkeel.internal.private import private_dir, private_home

    try:
        changed = private_home(home_dir)
        private_dir(sessions)
    except OSError as e:
        raise KeelError(
            f"cannot write to KEEL_HOME ({home_dir}): {e.strerror or e}; point KEEL_HOME at a writable folder"
        ) from None
    if changed:
        logging.getLogger("agentkeel").warning("%s", changed)
    if not os.access(sessions, os.W_OK | os.X_OK):
        raise KeelError(
            f"cannot write to KEEL_HOME ({home_dir}): permission denied; point KEEL_HOME at a writable folder"
        )
