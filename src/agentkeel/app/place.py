"""Where a session runs and what configures it: :class:`Place` (the working directory, KEEL_HOME,
the project's session folder), the folder's trust and the settings layers it reads."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.app.assembly import KeelError, writable
from agentkeel.app.options import RuntimeOptions
from agentkeel.config.settings import LoadedSettings, Settings, SettingsError, load_settings
from agentkeel.config.trust import TrustState, TrustStore
from agentkeel.internal.env import KeelEnv
from agentkeel.session.store import keel_home, project_dir


def project_trust(cwd: Path, home_dir: Path, override: bool | None = None) -> TrustState:
    state = TrustStore(home_dir).state(cwd)
    if override is True and not state.trusted:
        return TrustState(state.folder, "trusted", state.files)
    if override is False and state.status != "nothing-to-trust":
        return TrustState(state.folder, "untrusted", state.files)
    return state


SOURCES = frozenset({"user", "project", "local"})  # the settings files --setting-sources chooses from


def read_settings(
    cwd: Path,
    home: Path,
    home_dir: Path,
    extra: list[Path],
    env: Mapping[str, str],
    *,
    trusted: bool,
    sources: frozenset[str] | None = None,
) -> LoadedSettings:
    """``sources``: which settings files to read (``--setting-sources``); --settings files and
    managed settings are always read."""
    include: frozenset[Any] = frozenset({"cli", "managed", *(sources if sources is not None else SOURCES)})
    managed = KeelEnv.of(env).managed_settings
    moved = env.get("CLAUDE_CONFIG_DIR")  # Claude Code's user folder elsewhere (the Agent SDKs set it)
    try:
        return load_settings(
            cwd,
            home=home,
            keel_home=home_dir,
            extra_files=extra,
            managed=managed if managed.is_file() else None,
            include=include,
            trusted_project=trusted,
            claude_dir=Path(moved).expanduser() if moved else None,
        )
    except SettingsError as e:
        raise KeelError(f"invalid settings: {e}") from None


class Place(msgspec.Struct):
    """Where the session runs and what configures it."""

    cwd: Path
    env: dict[str, str]  # the process environment with the settings' ``env`` under it
    home_dir: Path  # KEEL_HOME
    sessions: Path  # the project's session folder
    trust: TrustState
    loaded: LoadedSettings

    @property
    def settings(self) -> Settings:
        return self.loaded.settings


def locate(opts: RuntimeOptions) -> Place:
    """The working directory, KEEL_HOME, the folder's trust and the settings it reads."""
    cwd = opts.cwd.resolve()
    env = dict(opts.env)
    home_dir = keel_home(env)
    sessions = project_dir(home_dir, cwd)
    writable(home_dir, sessions)
    trust = project_trust(cwd, home_dir, opts.trust_project)
    loaded = read_settings(
        cwd, opts.home, home_dir, opts.settings_files, env, trusted=trust.trusted, sources=opts.setting_sources
    )
    settings = loaded.settings
    env = {**settings.env, **env} if settings.env else env
    return Place(cwd, env, home_dir, sessions, trust, loaded)
