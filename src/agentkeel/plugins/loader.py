"""Finding plugins: ``RuntimeOptions.plugin_dirs`` (``--plugin-dir``) and ``enabledPlugins``.

A plugin folder (Claude Code's layout)::

    my-plugin/
      .claude-plugin/plugin.json   {"name": "my-plugin", "version": "1.0.0", "description": "..."}
      commands/*.md                /my-plugin:name
      agents/*.md                  subagent_type my-plugin:name
      skills/<name>/SKILL.md       skill my-plugin:name
      hooks/hooks.json             hooks (loaded by the hooks extension from the same folders)
      .mcp.json                    MCP servers (loaded by the MCP client)

``--plugin-dir`` may also name a folder of plugins (a marketplace checkout such as
anthropics/claude-code's ``plugins/``): a folder without ``.claude-plugin/plugin.json`` whose
children have one loads each such child, as Claude Code does; children without a manifest are
skipped there (Claude Code skips them too). A folder with neither is one plugin named after it.

``enabledPlugins`` in settings (``{"name@marketplace": true}``) names plugins of a marketplace
the settings declare in ``extraKnownMarketplaces`` with a local directory source; the
marketplace's ``.claude-plugin/marketplace.json`` lists its plugins and where they are.
Settings only reach here after the folder's trust rules (an untrusted project's are not read).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from agentkeel.config.settings import SettingsLayer


class Plugin(msgspec.Struct, frozen=True):
    name: str
    root: Path
    version: str = ""
    description: str = ""
    source: str = "plugin-dir"  # plugin-dir | marketplace:<name>
    manifest: dict[str, Any] = msgspec.field(default_factory=dict)

    def folder(self, key: str, default: str) -> Path:
        custom = self.manifest.get(key)
        if isinstance(custom, str) and custom:
            return (self.root / custom).resolve()
        return self.root / default

    def paths(self, key: str, default: str) -> list[Path]:
        """Where the plugin's ``key`` (commands, agents, skills) are: the default folder, then each
        path the manifest lists (a string or a list; folders or single ``.md`` files), as Claude
        Code reads them: custom paths supplement the default folder."""
        custom = self.manifest.get(key)
        listed = [custom] if isinstance(custom, str) else custom if isinstance(custom, list) else []
        out = [self.root / default]
        for entry in listed:
            if isinstance(entry, str) and entry.strip():
                path = (self.root / entry).resolve()
                if path.is_relative_to(self.root.resolve()):  # a manifest names its own files only
                    out.append(path)
        return list(dict.fromkeys(out))

    @property
    def commands_dir(self) -> Path:
        return self.folder("commands", "commands")

    @property
    def agents_dir(self) -> Path:
        return self.folder("agents", "agents")

    @property
    def skills_dir(self) -> Path:
        return self.folder("skills", "skills")

    @property
    def hooks_file(self) -> Path:
        return self.root / "hooks" / "hooks.json"

    @property
    def mcp_file(self) -> Path:
        return self.root / ".mcp.json"

    def parts(self) -> list[str]:
        out = []
        for label, path in (
            ("commands", self.commands_dir),
            ("agents", self.agents_dir),
            ("skills", self.skills_dir),
            ("hooks", self.hooks_file),
            ("mcp", self.mcp_file),
        ):
            if path.exists():
                out.append(label)
        return out


def read_json(path: Path) -> tuple[Any, str]:
    """A plugin's JSON file, or why not in one line: a plugin is third-party input, and no file of
    it (not UTF-8, nested past the parser's depth, truncated) may stop a session from starting."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), ""
    except OSError as e:
        return None, f"{path}: cannot read ({e.strerror or e})"
    except json.JSONDecodeError as e:
        return None, f"{path}: not valid JSON ({e.msg} at line {e.lineno}); fix the file"
    except UnicodeDecodeError as e:
        return None, f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8"
    except RecursionError:
        return None, f"{path}: nested too deeply to read; fix the file"
    except ValueError as e:
        return None, f"{path}: not valid JSON ({e}); fix the file"


def load_plugin(root: Path, source: str = "plugin-dir") -> tuple[Plugin | None, str]:
    root = root.expanduser()
    if not root.is_dir():
        return None, f"plugin folder {root} does not exist; check --plugin-dir"
    manifest_path = _manifest(root)
    manifest: dict[str, Any] = {}
    if manifest_path.is_file():
        data, error = read_json(manifest_path)
        if error:
            return None, error
        if not isinstance(data, dict):
            return None, f"{manifest_path}: must be a JSON object with a 'name'"
        manifest = data
    elif os.path.lexists(manifest_path):  # a folder, a FIFO, a dangling or looping link: never opened
        return None, f"{manifest_path}: not a readable file; fix it or remove it"
    name = str(manifest.get("name") or root.name).strip()
    if not name or ":" in name or "/" in name:
        return None, f"{manifest_path}: the plugin name '{name}' may not contain ':' or '/'"
    return (
        Plugin(
            name=name,
            root=root.resolve(),
            version=str(manifest.get("version") or ""),
            description=str(manifest.get("description") or ""),
            source=source,
            manifest=manifest,
        ),
        "",
    )


def _marketplaces(layers: Iterable[SettingsLayer]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for layer in layers:
        out.update(layer.plugins.marketplaces)
    return out


def _enabled(layers: Iterable[SettingsLayer]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for layer in layers:
        out.update(layer.plugins.enabled)
    return out


def _from_marketplace(ref: str, markets: dict[str, Path]) -> tuple[Plugin | None, str]:
    name, _, market = ref.partition("@")
    root = markets.get(market)
    if root is None:
        return (
            None,
            f"enabledPlugins: '{ref}': no marketplace '{market}' in extraKnownMarketplaces (a directory source)",
        )
    listing, error = read_json(root / ".claude-plugin" / "marketplace.json")
    if error:
        return None, f"enabledPlugins: '{ref}': {error}"
    plugins = listing.get("plugins") if isinstance(listing, dict) else None
    entry = next((p for p in plugins or [] if isinstance(p, dict) and p.get("name") == name), None)
    if entry is None:
        return None, f"enabledPlugins: marketplace '{market}' has no plugin '{name}'"
    source = entry.get("source")
    if not isinstance(source, str):
        return None, f"enabledPlugins: '{ref}': only local plugin sources (\"./path\") are supported"
    return load_plugin((root / source).resolve(), f"marketplace:{market}")


def _manifest(root: Path) -> Path:
    return root / ".claude-plugin" / "plugin.json"


def plugin_roots_of(root: Path) -> list[Path]:
    """The plugin folders a ``--plugin-dir`` names: itself when it has a manifest (or when no child
    has one), else each child folder with a ``.claude-plugin/plugin.json``, by name."""
    root = root.expanduser()
    if os.path.lexists(_manifest(root)) or not root.is_dir():
        return [root]
    try:
        children = sorted(c for c in root.iterdir() if not c.name.startswith(".") and c.is_dir())
    except OSError:
        return [root]
    plugins = [c for c in children if _manifest(c).is_file()]
    return plugins or [root]


def find_plugins(plugin_dirs: Sequence[Path], layers: Iterable[SettingsLayer] = ()) -> tuple[list[Plugin], list[str]]:
    """The session's plugins and a warning for each one that could not be loaded."""
    layers = list(layers)
    plugins: list[Plugin] = []
    warnings: list[str] = []
    for root in (p for d in plugin_dirs for p in plugin_roots_of(Path(d))):
        plugin, warning = load_plugin(root)
        warnings += [warning] if warning else []
        if plugin is not None:
            plugins.append(plugin)
    markets = _marketplaces(layers)
    for ref, on in _enabled(layers).items():
        if not on:
            continue
        plugin, warning = _from_marketplace(ref, markets)
        warnings += [warning] if warning else []
        if plugin is not None:
            plugins.append(plugin)
    seen: set[str] = set()
    unique = []
    for plugin in plugins:
        if plugin.name in seen:
            warnings.append(f"plugin '{plugin.name}' ({plugin.root}) is loaded twice; the first one is used")
            continue
        seen.add(plugin.name)
        unique.append(plugin)
    return unique, warnings


def manifest_hook_files(root: Path) -> list[Path]:
    """The hooks files a plugin's manifest lists (``"hooks": "./x.json"`` or a list), inside the plugin."""
    listed = plugin_manifest(root).get("hooks")
    entries = [listed] if isinstance(listed, str) else listed if isinstance(listed, list) else []
    out = []
    for entry in entries:
        if isinstance(entry, str) and entry.strip():
            path = (root / entry).resolve()
            if path.is_relative_to(root.resolve()):
                out.append(path)
    return out


def plugin_manifest(root: Path) -> Mapping[str, Any]:
    try:
        data = json.loads((root / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, Mapping) else {}
