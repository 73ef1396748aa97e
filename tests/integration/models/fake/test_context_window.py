"""The scripted server's context window (the real APIs' too-long errors, classified by keel as
PromptTooLongError) and its prompt cache (read and written at the request's breakpoints)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from agentkeel.models._errors import from_response
from agentkeel.models.fake.server import FakeLLMServer


def post(server: FakeLLMServer, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(server.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_over_the_window_is_refused_as_the_real_apis_do(fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["fits"], "context_window": 1000})
    big = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 8000}]}
    status, raw = post(server, "/v1/messages", big)
    err = from_response(status, raw, {}, endpoint="e", model="m", key_hint="k")
    assert status == 400 and err.kind == "prompt_too_long" and getattr(err, "limit", None) == 1000
    status, raw = post(server, "/v1/chat/completions", big)
    assert json.loads(raw)["error"]["code"] == "context_length_exceeded"
    assert from_response(status, raw, {}, endpoint="e", model="m", key_hint="k").kind == "prompt_too_long"
    # refusals use no script step, and are logged with their size
    status, raw = post(
        server, "/v1/messages", {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert status == 200 and json.loads(raw)["content"][0]["text"] == "fits"
    assert [r["over_window"] for r in server.cursor.requests] == [True, True, False]
    assert server.cursor.requests[0]["input_tokens"] > 1000


def test_prompt_cache_reads_what_an_earlier_breakpoint_wrote(fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["a", "b", "c"]})
    system = [{"type": "text", "text": "S" * 4000, "cache_control": {"type": "ephemeral"}}]
    first = [{"role": "user", "content": [{"type": "text", "text": "q" * 400, "cache_control": {"type": "ephemeral"}}]}]
    _, raw = post(server, "/v1/messages", {"model": "m", "max_tokens": 5, "system": system, "messages": first})
    u1 = json.loads(raw)["usage"]
    assert u1["cache_read_input_tokens"] == 0 and u1["cache_creation_input_tokens"] > 1000
    second = [
        {"role": "user", "content": [{"type": "text", "text": "q" * 400}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}}]},
    ]
    _, raw = post(server, "/v1/messages", {"model": "m", "max_tokens": 5, "system": system, "messages": second})
    u2 = json.loads(raw)["usage"]
    assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"]  # the whole earlier prefix
    changed = [{"type": "text", "text": "T" * 4000, "cache_control": {"type": "ephemeral"}}]
    _, raw = post(server, "/v1/messages", {"model": "m", "max_tokens": 5, "system": changed, "messages": second})
    assert json.loads(raw)["usage"]["cache_read_input_tokens"] == 0  # a changed system prompt misses


def test_an_unscripted_summariser_request_uses_no_step(fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["the conversation's step"]})
    ask = {"role": "user", "content": "<keel-compact-request>\nSummarise this session so far: ..."}
    _, raw = post(server, "/v1/messages", {"model": "m", "max_tokens": 50, "messages": [ask]})
    assert json.loads(raw)["content"][0]["text"].startswith("[fake-llm summary]")
    _, raw = post(
        server, "/v1/messages", {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert json.loads(raw)["content"][0]["text"] == "the conversation's step"
