"""``keel plugins list``: the plugins a session here would load, and what each brings."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from agentkeel.ui.cli._common import EXIT_OK, EXIT_USAGE


def add_parser(sub: Any) -> None:
    plugins = sub.add_parser("plugins", help="list the Claude Code plugins a session here loads")
    psub = plugins.add_subparsers(dest="action", required=True)
    ls = psub.add_parser("list", help="each plugin with its version, folder and parts (commands, agents, ...)")
    ls.add_argument("--plugin-dir", action="append", default=[], metavar="PATH", help="a plugin folder to add")
    ls.add_argument("--settings", action="append", default=[], metavar="FILE", help="an extra settings file")
    ls.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from agentkeel.app.runtime import KeelError, project_trust, read_settings
    from agentkeel.plugins.loader import find_plugins
    from agentkeel.session.store import keel_home

    cwd = Path.cwd()
    env = dict(os.environ)
    home_dir = keel_home(env)
    trust = project_trust(cwd, home_dir)
    try:
        loaded = read_settings(cwd, Path.home(), home_dir, [Path(f) for f in args.settings], env, trusted=trust.trusted)
    except KeelError as e:
        print(f"keel: {e}", flush=True)
        return EXIT_USAGE
    plugins, warnings = find_plugins([Path(d) for d in args.plugin_dir], loaded.layers)
    if args.json:
        data = [
            {
                "name": p.name,
                "version": p.version,
                "description": p.description,
                "root": str(p.root),
                "source": p.source,
                "parts": p.parts(),
            }
            for p in plugins
        ]
        print(json.dumps({"plugins": data, "warnings": warnings}, indent=1))
        return EXIT_OK
    for warning in warnings:
        print(f"warning: {warning}")
    if not plugins:
        print("No plugins (add one with --plugin-dir PATH, or enabledPlugins in settings).")
    for p in plugins:
        version = f" {p.version}" if p.version else ""
        print(f"{p.name}{version}  [{p.source}]  {p.root}")
        print(f"  {', '.join(p.parts()) or 'nothing to load'}{'  - ' + p.description if p.description else ''}")
    return EXIT_OK
