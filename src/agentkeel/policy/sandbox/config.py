"""The ``sandbox`` settings key: parsed by the settings package (agentkeel.config.sandbox), once,
when the settings are loaded; re-exported here for the sandbox's own modules."""

from __future__ import annotations

from agentkeel.config.sandbox import SandboxConfig, parse_config

__all__ = ["SandboxConfig", "parse_config"]
