"""The Memory page of `keel serve` (and of `keel mem web`) lists the newest entries first (issue #31 item 9)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.memory import open_store
from agentkeel.memory.project import project_id
from tests.integration.ui.serve.test_web_app import browser as browser
from tests.integration.ui.serve.test_web_app import click, pytestmark, serve, text, wait  # noqa: F401

Serve = Callable[..., Any]


def test_the_memory_page_lists_newest_first(serve: Serve, browser: Callable[[], Any], project: Path) -> None:  # noqa: F811
    store = open_store(Path(os.environ["KEEL_HOME"]) / "memory" / "memory.db", embedder="none")
    pid = project_id(project)
    # imported history, more than the page's first screenful (20), imported out of order
    minutes = [(i * 37) % 60 for i in range(60)]
    store.add_many(
        {
            "id": f"m{m}",
            "type": "user_prompt",
            "project": pid,
            "session": f"s{m}",
            "timestamp": f"2026-01-05T10:{m:02d}:00+00:00",
            "text": f"prompt of minute {m}",
        }
        for m in minutes
    )
    store.close()
    s = serve({"steps": ["ok"]})
    d = browser()
    d.get(s.login_url)  # the printed address with its token: the server swaps it for the cookie
    click(d, "nav button[data-tab=memory]")
    wait(d, lambda d: "minute 59" in text(d, "mem-feed"))
    time.sleep(3)  # a few of the stream's polls (one a second)
    shown = d.execute_script("return [...document.querySelectorAll('#mem-feed .row')].map((r) => r.innerText)")
    order = [int(t.split("minute ")[1].split()[0]) for t in shown if "prompt of minute" in t]
    assert order == sorted(order, reverse=True) and order[0] == 59, order
    assert len(order) == len(set(order))
