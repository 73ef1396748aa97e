"""The owner's browser flow in headless Chromium with the token (issue #30 item 4), and the user's
bubble showing the prompt as typed with injected context folded (issue #31 item 12)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.memory.project import project_id
from kit import KEEL
from serve_fixtures import Served
from tests.integration.ui.serve.test_web_app import browser as browser  # the fixture
from tests.integration.ui.serve.test_web_app import new_session, pytestmark, send, text, wait
from tests.integration.ui.serve.test_web_app import serve as serve  # the fixture

Serve = Callable[..., Served]
__all__ = ["pytestmark"]  # skipped, with the reason, where Chromium is absent


def test_without_the_token_the_page_is_refused_with_it_the_app_works(serve: Serve, browser: Callable[[], Any]) -> None:
    from selenium.webdriver.common.by import By

    s = serve({"steps": ["hello, owner"]})
    d = browser()
    d.get(s.url)  # no token: no app, a line that says what to open
    assert "needs its token" in d.find_element(By.TAG_NAME, "body").text
    assert not d.find_elements(By.ID, "new-session")

    new_session(d, s.login_url)
    assert d.current_url == s.url  # redirected: the token left the address bar
    assert "keel_token" not in d.execute_script("return document.cookie")  # HttpOnly
    modes = d.execute_script(
        "return [...document.querySelectorAll('#new-mode option, #s-mode option')].map(o => o.text)"
    )
    assert "bypassPermissions" not in modes and "acceptEdits" in modes  # not started with the flag
    send(d, "hi")
    wait(d, lambda d: "hello, owner" in text(d, "transcript") and text(d, "s-status") == "idle")


def test_the_users_bubble_shows_the_prompt_and_folds_hook_output_and_memory(
    serve: Serve, browser: Callable[[], Any], project: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    settings = tmp_path / "userhome" / ".claude" / "settings.json"  # a hook adding context to every prompt
    settings.parent.mkdir(parents=True)
    hook = {"type": "command", "command": "echo HOOK-SAID-THIS; echo second hook line"}
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}))
    seed = tmp_path / "seed.jsonl"  # a memory for the prompt to recall
    fact = {
        "id": "m1",
        "type": "fact",
        "project": project_id(project),
        "session": "s0",
        "text": "Deploys go out on Thursdays.",
    }
    seed.write_text(json.dumps(fact) + "\n")
    subprocess.run(
        [KEEL, "mem", "import", "jsonl", str(seed)], cwd=project, check=True, timeout=90, capture_output=True
    )

    s = serve({"steps": ["On Thursdays."]})
    d = browser()
    new_session(d, s.login_url)
    send(d, "deploys: which day?")
    wait(d, lambda d: "On Thursdays." in text(d, "transcript") and text(d, "s-status") == "idle")
    (bubble,) = d.find_elements(By.CSS_SELECTOR, "#transcript .msg.user")
    assert bubble.find_element(By.CSS_SELECTOR, ".prompt").text == "deploys: which day?"
    assert bubble.text.splitlines()[0] == "deploys: which day?"
    assert "HOOK-SAID-THIS" not in bubble.text and "memory-context" not in bubble.text  # folded: not shown
    fold = bubble.find_element(By.CSS_SELECTOR, "details.injected")
    assert fold.get_attribute("open") is None
    summary = fold.find_element(By.TAG_NAME, "summary").text
    assert "memory" in summary and "hook output" in summary
    hidden = fold.get_attribute("textContent")
    assert "HOOK-SAID-THIS" in hidden and "<memory-context" in hidden and "Thursdays" in hidden
    fold.find_element(By.TAG_NAME, "summary").click()  # one click shows it
    wait(d, lambda d: "HOOK-SAID-THIS" in bubble.text)
