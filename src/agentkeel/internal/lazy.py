"""Modules imported at their first use, and imported ahead on a thread while the first request
waits for the model.

``lazy_module`` stands in for ``from package import module as alias`` at a module's top: the
first attribute read imports the module and puts it in the importing module's globals in the
stand-in's place, so later reads cost what a plain global costs. The type checker sees the real
import (write it under ``if TYPE_CHECKING:``, the stand-in under ``else:``).

``warm_later`` names modules the first tool call needs but the first request does not (the shell
analysis of the permission engine, tree-sitter, the tool input models); ``warm_now`` (the HTTP
layer calls it once a request is sent) imports them on a daemon thread while the main thread
waits for the answer, which with a real model is most of a second or more. Importing on a thread
is safe with the interpreter's per-module import locks: a module both threads want is executed
once, and the main thread waits for it as it would for its own import. A warmed module that
fails to import is left to fail where it is used, with its real error.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any

_wanted: list[str] = []
_lock = threading.Lock()


class LazyModule:
    """A stand-in for a module not imported yet; see the module docstring."""

    __slots__ = ("_alias", "_name", "_namespace")

    def __init__(self, name: str, namespace: dict[str, Any], alias: str) -> None:
        self._name = name
        self._namespace = namespace
        self._alias = alias

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        if self._namespace.get(self._alias) is self:
            self._namespace[self._alias] = module
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str, namespace: dict[str, Any], alias: str) -> Any:
    """The module if it is loaded already, else a :class:`LazyModule` bound to ``namespace[alias]``."""
    loaded = sys.modules.get(name)
    return loaded if loaded is not None else LazyModule(name, namespace, alias)


def warm_later(*names: str) -> None:
    """Import these modules on a thread once the next request is sent (``warm_now``)."""
    with _lock:
        _wanted.extend(n for n in names if n not in _wanted)


def warm_now() -> None:
    """Start importing what ``warm_later`` named, once; a no-op when nothing is waiting."""
    with _lock:
        if not _wanted:
            return
        names = list(_wanted)
        _wanted.clear()
    threading.Thread(target=_warm, args=(names,), name="keel-warm-imports", daemon=True).start()


def _warm(names: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: S112 - fails again, with its real error, where it is used
            continue
