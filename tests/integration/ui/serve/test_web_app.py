"""The web app in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium)
against a real `keel serve` and the fake model. Skipped, with the reason, where Chromium is absent.

Set KEEL_SERVE_SCREENSHOTS=DIR to save the main pages as PNGs there (docs/ holds the README's)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from serve_fixtures import Served
from serve_fixtures import serve as serve  # the fixture

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
Serve = Callable[..., Served]

try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER and HAVE_SELENIUM),
    reason="the web tests need Chromium, its driver and selenium: apt-get install chromium chromium-driver "
    "(scripts/setup does it where apt is usable) and pip install selenium",
)

WRITE = {"text": "Writing.", "tool_calls": [{"name": "Write", "input": {"file_path": "out.txt", "content": "made\n"}}]}
STALLED = {"text": "Streaming partial text that keeps going for a while longer.", "stall_after": 4, "stall_s": 30}


@pytest.fixture
def browser() -> Iterator[Callable[[], Any]]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    drivers: list[Any] = []

    def make() -> Any:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,860"):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
        driver.implicitly_wait(0)
        drivers.append(driver)
        return driver

    yield make
    for d in drivers:
        d.quit()


def shot(driver: Any, name: str) -> None:
    target = os.environ.get("KEEL_SERVE_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(target) / f"serve-{name}.png"))


def wait(driver: Any, check: Callable[[Any], Any], timeout: float = 60) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(check)


def text(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, element_id).text)


def click(driver: Any, css: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, css).click()


def send(driver: Any, message: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "prompt").send_keys(message)
    click(driver, "#send")


def live_rows(driver: Any) -> set[str]:
    ids = driver.execute_script("return [...document.querySelectorAll('#live-list .row')].map((r) => r.dataset.id)")
    return set(ids)


def new_session(driver: Any, url: str) -> str:
    from selenium.webdriver.common.by import By

    driver.get(url)  # the address with ?token=: the server sets the cookie and redirects to /
    click(driver, "#new-session")
    wait(driver, lambda d: d.find_element(By.ID, "session").is_displayed() and text(d, "s-status") == "idle")
    return text(driver, "s-title")


def test_a_session_streams_text_is_interrupted_and_answers_a_permission_prompt(
    serve: Serve, browser: Callable[[], Any], project: Path
) -> None:
    from selenium.webdriver.common.by import By

    s = serve({"steps": [STALLED, WRITE, "written it"]})
    d = browser()
    sid = new_session(d, s.login_url)
    assert len(sid) == 36
    send(d, "stream please")
    # the reply stalls after two text deltas: what is on screen came from the stream, not a final message
    bubble = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#transcript .msg.streaming"))[0]
    wait(d, lambda d: bubble.text.startswith("Streaming partial"))
    assert "keeps going for a while longer" not in bubble.text
    assert text(d, "s-status") == "working"
    shot(d, "streaming")
    click(d, "#s-interrupt")
    wait(d, lambda d: "interrupted" in text(d, "transcript") and text(d, "s-status") == "idle")
    assert bubble.get_attribute("class") == "msg assistant cut"  # what was streamed stays, marked as cut

    send(d, "write the file")
    wait(d, lambda d: d.find_element(By.ID, "ask").is_displayed())
    assert "Write" in text(d, "ask-text") and "out.txt" in text(d, "ask-input")
    assert not (project / "out.txt").exists()
    shot(d, "permission")
    click(d, "#ask button[data-answer=allow]")
    wait(d, lambda d: "written it" in text(d, "transcript"))
    assert not d.find_element(By.ID, "ask").is_displayed()
    assert bubble.text.startswith("Streaming partial")  # the next reply did not write into the cut one
    assert (project / "out.txt").read_text() == "made\n"
    tool = d.find_element(By.CSS_SELECTOR, "#transcript .tool.ok")
    assert tool.get_attribute("data-name") == "Write"
    assert "+ made" in tool.find_element(By.CSS_SELECTOR, ".diff .add").text
    shot(d, "session")

    click(d, "#s-timeline")  # rewind code and conversation to before the write
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".tl-rewind")) == 2)
    click(d, ".tl-rewind[data-turn='1']")
    wait(d, lambda d: "rewound to before turn #1" in text(d, "transcript"))
    assert not (project / "out.txt").exists()
    shown = text(d, "transcript")
    assert "stream please" in shown and "write the file" not in shown and "written it" not in shown


def test_a_second_client_follows_live_then_replays_and_forks(serve: Serve, browser: Callable[[], Any]) -> None:
    from selenium.webdriver.common.by import By

    s = serve({"steps": ["answer one", "answer two", "answer in the fork"]})
    first = browser()
    sid = new_session(first, s.login_url)
    send(first, "turn zero")
    wait(first, lambda d: "answer one" in text(d, "transcript") and text(d, "s-status") == "idle")

    second = browser()
    second.get(s.login_url + f"#session={sid}")  # the redirect to / keeps the #fragment
    wait(second, lambda d: "answer one" in text(d, "transcript"))  # the history, replayed to a late client
    send(first, "turn one")
    wait(second, lambda d: "answer two" in text(d, "transcript"))  # live, without a reload
    assert "turn one" in text(second, "transcript")
    wait(first, lambda d: text(d, "s-status") == "idle")

    click(second, "#s-timeline")
    wait(second, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".tl-fork")) == 2)
    second.execute_script(
        "const r = document.getElementById('tl-range'); r.value = 3; r.dispatchEvent(new Event('input'))"
    )
    wait(second, lambda d: "answer one" not in text(d, "transcript"))  # replayed up to event 3 only
    assert text(second, "tl-pos").startswith("event 3 of")
    click(second, "#s-timeline")  # close: back to the live session
    wait(second, lambda d: not d.find_element(By.ID, "timeline").is_displayed() and "turn one" in text(d, "transcript"))
    click(second, "#s-timeline")  # reopen: at the end
    wait(second, lambda d: d.find_element(By.ID, "timeline").is_displayed() and "answer two" in text(d, "transcript"))
    second.execute_script(
        "const r = document.getElementById('tl-range'); r.value = 0; r.dispatchEvent(new Event('input'))"
    )
    wait(second, lambda d: "turn zero" not in text(d, "transcript"))
    click(second, "#tl-play")  # the server's replay, paced
    wait(second, lambda d: "answer two" in text(d, "transcript"))
    total = second.execute_script("return document.getElementById('tl-range').max")
    wait(second, lambda d: text(d, "tl-pos") == f"event {total} of {total}")
    shot(second, "timeline")
    click(second, ".tl-fork[data-turn='1']")
    wait(second, lambda d: text(d, "s-title") != sid and "answer one" in text(d, "transcript"))
    forked = text(second, "s-title")
    transcript = text(second, "transcript")
    assert "turn zero" in transcript and "answer one" in transcript
    assert "turn one" not in transcript
    send(second, "in the fork")
    wait(second, lambda d: "answer in the fork" in text(d, "transcript"))
    wait(first, lambda d: {sid, forked} <= live_rows(d))  # the first client's list shows the fork (polled)


def test_the_setup_and_memory_pages(serve: Serve, browser: Callable[[], Any]) -> None:
    from selenium.webdriver.common.by import By

    s = serve({"steps": ["remember the blue kettle"]})
    d = browser()
    new_session(d, s.login_url)
    send(d, "what colour is the kettle")
    wait(d, lambda d: "blue kettle" in text(d, "transcript") and text(d, "s-status") == "idle")
    click(d, "nav button[data-tab=setup]")
    wait(d, lambda d: "Tools" in text(d, "setup"))
    assert "Permission rules" in text(d, "setup") and "MCP servers" in text(d, "setup")
    shot(d, "setup")
    click(d, "nav button[data-tab=memory]")
    wait(d, lambda d: "entries" in text(d, "mem-stats"))
    d.find_element(By.ID, "mem-q").send_keys("kettle")
    click(d, "#mem-form button")
    wait(d, lambda d: "kettle" in text(d, "mem-results"))
    shot(d, "memory")
