"""keel's own wire clients: what they send (checked against the official SDKs), how they read
streams (sans-IO parsers, property-tested), and the edges the SDKs do not cover."""

from __future__ import annotations

import email.utils
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkeel.config.settings import SettingsError, load_settings
from agentkeel.core.provider import ModelRequest, ModelResponse, PromptTooLongError, Provider, ProviderError
from agentkeel.core.types import Message, ToolResultBlock
from agentkeel.models._errors import parse_retry_after
from agentkeel.models._sse import SSEDecoder, SSEEvent
from agentkeel.models.anthropic_format import MessageStream
from agentkeel.models.anthropic_messages import AnthropicProvider
from agentkeel.models.anthropic_wire import AnthropicWireProvider
from agentkeel.models.catalog import ModelConfigError, resolve_model
from agentkeel.models.endpoints import (
    ANTHROPIC_VERSION,
    AnthropicEndpoint,
    OpenAIEndpoint,
    anthropic_endpoint,
    openai_endpoint,
)
from agentkeel.models.factory import make_provider
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.models.openai_chat import OpenAIChatProvider
from agentkeel.models.openai_format import ChunkAccumulator
from agentkeel.models.openai_wire import OpenAIWireProvider
from tests.integration.models.test_providers_over_loopback import collect

FAKE_KEY = "sk-test-not-a-real-key"
TRANSPORT_HEADERS = {"host", "content-length", "accept-encoding", "connection", "user-agent"}


def comparable(headers: dict[str, str], wire: str) -> dict[str, str]:
    """Headers minus what each HTTP stack adds for itself (user agent, SDK telemetry, framing)."""
    out = {k: v for k, v in headers.items() if k not in TRANSPORT_HEADERS and not k.startswith("x-stainless-")}
    if wire == "anthropic":
        # Deliberate differences from the SDK, as Claude Code does: the API key goes in x-api-key (the
        # SDK in this venv sends it as a bearer token), and keel pins the documented API version.
        key = out.pop("x-api-key", None) or out.pop("authorization", "").removeprefix("Bearer ")
        out["credential"] = key
        out.pop("anthropic-version")
    return out


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_requests_match_what_the_sdks_send(wire: str, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    custom = {"X-Gateway-Route": "team-a", "X-Trace": "abc 123"}
    sent: dict[str, dict[str, Any]] = {}
    for transport in ("sdk", "wire"):
        server = fake_llm({"steps": ["fine"]})
        provider: Provider
        if wire == "anthropic":
            a = AnthropicEndpoint(
                base_url=server.url, api_key=FAKE_KEY, betas=("interleaved-thinking-2025-05-14",), custom_headers=custom
            )
            provider = AnthropicWireProvider(a) if transport == "wire" else AnthropicProvider(endpoint=a)
        else:
            o = OpenAIEndpoint(
                base_url=server.url + "/v1",
                api_key=FAKE_KEY,
                organization="org-x",
                project="proj-y",
                custom_headers=custom,
            )
            provider = OpenAIWireProvider(o) if transport == "wire" else OpenAIChatProvider(endpoint=o)
        await collect(provider)
        await provider.aclose()
        [sent[transport]] = server.cursor.requests
    sdk, ours = sent["sdk"], sent["wire"]
    assert ours["path"] == sdk["path"]
    assert ours["body"] == sdk["body"]
    assert comparable(ours["headers"], wire) == comparable(sdk["headers"], wire)
    assert ours["headers"]["user-agent"].startswith("agentkeel/")
    if wire == "anthropic":
        assert ours["headers"]["x-api-key"] == FAKE_KEY and "authorization" not in ours["headers"]
        assert ours["headers"]["anthropic-version"] == ANTHROPIC_VERSION
        assert ours["headers"]["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    else:
        assert ours["headers"]["openai-organization"] == "org-x" and ours["headers"]["openai-project"] == "proj-y"


@pytest.mark.parametrize(
    ("env", "expected", "absent"),
    [
        ({"ANTHROPIC_API_KEY": FAKE_KEY}, {"x-api-key": FAKE_KEY}, "authorization"),
        ({"ANTHROPIC_AUTH_TOKEN": "tok-fake"}, {"authorization": "Bearer tok-fake"}, "x-api-key"),
        (
            {
                "ANTHROPIC_API_KEY": FAKE_KEY,
                "ANTHROPIC_CUSTOM_HEADERS": "X-Team: infra\n\nanthropic-version: 2099-01-01\nX-Empty:",
                "ANTHROPIC_BETAS": "a-beta, b-beta",
            },
            {"x-team": "infra", "anthropic-version": "2099-01-01", "x-empty": "", "anthropic-beta": "a-beta,b-beta"},
            "authorization",
        ),
    ],
)
async def test_anthropic_credentials_and_headers_from_env(
    env: dict[str, str], expected: dict[str, str], absent: str, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["fine"]})
    provider = AnthropicWireProvider(anthropic_endpoint({**env, "ANTHROPIC_BASE_URL": server.url + "/"}))
    await collect(provider)
    await provider.aclose()
    headers = server.cursor.requests[0]["headers"]
    assert {k: headers.get(k) for k in expected} == expected
    assert absent not in headers


async def test_openai_key_is_optional_for_local_servers(fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["fine"]})
    provider = OpenAIWireProvider(openai_endpoint("openai", {"OPENAI_BASE_URL": server.url + "/v1"}))
    [*_, final] = await collect(provider)
    await provider.aclose()
    assert isinstance(final, ModelResponse) and final.message.text() == "fine"
    assert "authorization" not in server.cursor.requests[0]["headers"]


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"ANTHROPIC_CUSTOM_HEADERS": "X-Ok: 1\nnot a header"}, "ANTHROPIC_CUSTOM_HEADERS line 2 is not 'Name: Value'"),
        ({"ANTHROPIC_CUSTOM_HEADERS": "Bad Name: 1"}, "line 1 is not 'Name: Value'"),
        ({"API_TIMEOUT_MS": "soon"}, "API_TIMEOUT_MS must be a positive number of milliseconds, got 'soon'"),
        ({"API_TIMEOUT_MS": "-5"}, "API_TIMEOUT_MS must be a positive"),
        ({"ANTHROPIC_BASE_URL": "localhost:8080"}, "ANTHROPIC_BASE_URL must be an http:// or https:// URL"),
    ],
)
def test_bad_endpoint_settings_say_what_to_fix(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ModelConfigError) as err:
        anthropic_endpoint({"ANTHROPIC_API_KEY": FAKE_KEY, **env})
    assert needle in str(err.value)


def test_api_timeout_ms_sets_the_timeout() -> None:
    assert anthropic_endpoint({"ANTHROPIC_API_KEY": FAKE_KEY, "API_TIMEOUT_MS": "1500"}).timeout_s == 1.5
    assert openai_endpoint("ollama", {"API_TIMEOUT_MS": "250"}).timeout_s == 0.25
    assert openai_endpoint("ollama", {}).base_url == "http://localhost:11434/v1"


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_one_connection_is_kept_alive_across_turns(wire: str, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["one", {"text": "two", "tool_calls": [{"name": "LS", "input": {}}]}, "three"]})
    provider = wire_provider(wire, server.url)
    for _ in range(3):
        await collect(provider)
    await provider.aclose()
    assert len({r["peer_port"] for r in server.cursor.requests}) == 1


def wire_provider(wire: str, base_url: str, timeout_s: float = 30.0) -> Provider:
    if wire == "anthropic":
        return AnthropicWireProvider(AnthropicEndpoint(base_url=base_url, api_key=FAKE_KEY, timeout_s=timeout_s))
    return OpenAIWireProvider(OpenAIEndpoint(base_url=base_url + "/v1", api_key=FAKE_KEY, timeout_s=timeout_s))


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_a_server_that_does_not_stream_still_answers(wire: str, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    step = {"thinking": "hm", "text": "whole", "tool_calls": [{"name": "LS", "input": {"path": "."}}]}
    server = fake_llm({"steps": [{**step, "ignore_stream": True}]})
    [final] = await collect(wire_provider(wire, server.url))
    assert isinstance(final, ModelResponse) and final.stop_reason == "tool_use"
    assert final.message.text() == "whole" and final.message.tool_uses()[0].input == {"path": "."}
    assert final.usage.input_tokens > 0


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_a_200_that_carries_an_error_is_classified(wire: str, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": [{"error": {"status": 200, "type": "overloaded_error", "message": "Overloaded"}}]})
    with pytest.raises(ProviderError) as err:
        await collect(wire_provider(wire, server.url))
    assert err.value.kind == "overloaded" and "Overloaded" in str(err.value)


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_a_stall_after_the_headers_hits_the_read_timeout(
    wire: str, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": [{"text": "never ends", "stall_after": 3, "stall_s": 120}]})
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        await collect(wire_provider(wire, server.url, timeout_s=0.3))
    assert err.value.kind == "timeout" and err.value.retryable
    assert "within 0.3 s" in str(err.value) and "API_TIMEOUT_MS" in str(err.value)
    assert time.monotonic() - started < 60  # the timeout ended it, not the server (a loaded machine: loose)


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_a_server_that_never_answers_hits_the_timeout(
    wire: str, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": [{"text": "too late", "delay_s": 3}]})  # not even the status line
    with pytest.raises(ProviderError) as err:
        await collect(wire_provider(wire, server.url, timeout_s=0.3))
    assert err.value.kind == "timeout" and str(err.value).startswith(f"no response from {server.url}")


@pytest.mark.parametrize(
    ("wire", "error", "tokens", "limit"),
    [
        ("anthropic", {"message": "prompt is too long: 210000 tokens > 200000 maximum"}, 210000, 200000),
        (
            "anthropic",
            {"message": "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease"},
            209573,
            200000,
        ),
        (
            "openai",
            {
                "type": "context_length_exceeded",
                "message": "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130500 tokens. Please reduce the length of the messages.",
            },
            130500,
            128000,
        ),
        ("openai", {"message": "the request exceeds the available context size, try increasing it"}, None, None),
    ],
)
async def test_prompt_too_long_is_a_typed_error(
    wire: str, error: dict[str, Any], tokens: int | None, limit: int | None, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": [{"error": {"status": 400, **error}}]})
    with pytest.raises(PromptTooLongError) as err:
        await collect(wire_provider(wire, server.url))
    assert err.value.kind == "prompt_too_long" and not err.value.retryable
    assert (err.value.tokens, err.value.limit) == (tokens, limit)
    assert "context window" in str(err.value)


@pytest.mark.parametrize(
    ("provider", "env", "variable"),
    [
        ("anthropic", {"ANTHROPIC_API_KEY": FAKE_KEY}, "check ANTHROPIC_API_KEY"),
        ("anthropic", {"ANTHROPIC_AUTH_TOKEN": "tok-fake"}, "check ANTHROPIC_AUTH_TOKEN"),
        ("openai", {"OPENAI_API_KEY": FAKE_KEY}, "check OPENAI_API_KEY"),
        ("ollama", {}, "check OLLAMA_API_KEY"),
    ],
)
async def test_auth_errors_name_the_variable(
    provider: str, env: dict[str, str], variable: str, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": [{"error": {"status": 401, "message": "invalid key"}}]})
    wired: Provider
    if provider == "anthropic":
        wired = AnthropicWireProvider(anthropic_endpoint({**env, "ANTHROPIC_BASE_URL": server.url}))
    else:
        prefix = provider.upper()
        wired = OpenAIWireProvider(openai_endpoint(provider, {**env, f"{prefix}_BASE_URL": server.url + "/v1"}))
    with pytest.raises(ProviderError) as err:
        await collect(wired)
    assert err.value.kind == "auth" and not err.value.retryable
    assert variable in str(err.value) and "invalid key" in str(err.value) and "\n" not in str(err.value)


async def test_text_utf8_cannot_carry_does_not_crash_the_request(fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["fine"]})
    messages = [Message(role="user", content=[ToolResultBlock(tool_use_id="t", content="bad \udcff byte")])]
    request = ModelRequest(model="m", system="", messages=[Message.user("x"), *messages], tools=[], max_tokens=10)
    await collect(wire_provider("anthropic", server.url), request)
    sent = server.cursor.requests[0]["body"]["messages"][1]["content"][0]["content"]
    assert sent == "bad ? byte"


# --- sans-IO parsers ----------------------------------------------------------------------


EVENTS = [
    SSEEvent("message_start", '{"a": 1}'),
    SSEEvent(None, "line one\nline two"),
    SSEEvent("ping", "{}"),
    SSEEvent("x", "ünïcödé ✓"),
]


def encode(events: list[SSEEvent], newline: bytes, comments: bool) -> bytes:
    out = b""
    for e in events:
        if comments:
            out += b": keep-alive" + newline
        if e.event:
            out += b"event: " + e.event.encode() + newline
        out += b"".join(b"data: " + line.encode() + newline for line in e.data.split("\n"))
        out += newline
    return out


@settings(max_examples=300, deadline=None)
@given(
    newline=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    comments=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_sse_decoder_reads_any_split_and_any_line_ending(newline: bytes, comments: bool, cuts: list[int]) -> None:
    data = encode(EVENTS, newline, comments)
    decoder, got, start = SSEDecoder(), [], 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        got += decoder.feed(data[start:cut])
        start = cut
    got += decoder.feed(data[start:]) + decoder.close()
    assert got == EVENTS


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_sse_decoder_never_crashes(data: bytes) -> None:
    decoder = SSEDecoder()
    events = decoder.feed(data) + decoder.close()
    assert all(isinstance(e.data, str) for e in events)


def test_sse_drops_an_event_cut_before_its_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: message_stop\ndata: {}\n") + decoder.close() == []


def test_message_stream_folds_events_as_the_api_defines_them() -> None:
    s = MessageStream("http://x")
    assert s.feed("ping", {"type": "ping"}) == []  # a ping may come first
    start = {"model": "m", "usage": {"input_tokens": 10, "cache_creation_input_tokens": 7, "output_tokens": 1}}
    s.feed("message_start", {"type": "message_start", "message": start})
    s.feed(
        "content_block_start", {"index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "A", "input": {}}}
    )
    s.feed("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"k": [1,'}})
    s.feed("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": " 2]}"}})
    s.feed("content_block_stop", {"index": 0})
    given_input = {"type": "tool_use", "id": "u", "name": "B", "input": {"whole": True}}
    s.feed("content_block_start", {"index": 1, "content_block": given_input})  # no deltas: input as given
    s.feed("content_block_stop", {"index": 1})
    s.feed("content_block_start", {"index": 2, "content_block": {"type": "server_tool_use", "id": "s"}})
    s.feed("content_block_start", {"index": 3, "content_block": {"type": "tool_use", "id": "v", "name": "C"}})
    s.feed("content_block_delta", {"index": 3, "delta": {"type": "input_json_delta", "partial_json": '{"cut'}})
    s.feed("some_future_event", {"type": "some_future_event"})
    s.feed("message_delta", {"delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9, "input_tokens": 12}})
    s.feed("message_stop", {"type": "message_stop"})
    final = s.response()
    assert final.stop_reason == "max_tokens" and final.model == "m"
    assert [(u.id, u.input) for u in final.message.tool_uses()] == [
        ("t", {"k": [1, 2]}),
        ("u", {"whole": True}),
        ("v", {"_unparsed_arguments": '{"cut'}),
    ]
    assert (final.usage.input_tokens, final.usage.output_tokens, final.usage.cache_write_tokens) == (12, 9, 7)


@pytest.mark.parametrize(
    ("events", "needle"),
    [
        ([], "empty body"),
        ([("content_block_start", {"index": 0, "content_block": {"type": "text"}})], "before message_start"),
        ([("message_start", {"message": {}})], "ended before the message was complete"),
        ([("message_start", {"message": {}}), ("content_block_delta", {"index": 4, "delta": {}})], "before its start"),
    ],
)
def test_message_stream_never_returns_half_a_message(events: list[tuple[str, Any]], needle: str) -> None:
    s = MessageStream("http://x")
    with pytest.raises(ProviderError) as err:
        for kind, data in events:
            s.feed(kind, data)
        s.response()
    assert err.value.kind == "stream_broken" and needle in str(err.value)


def test_chunk_accumulator_reads_compatible_servers() -> None:
    acc = ChunkAccumulator("http://x")

    def chunk(delta: dict[str, Any], index: int = 0, finish: str | None = None) -> dict[str, Any]:
        return {"model": "m", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}

    acc.add(chunk({"reasoning_content": "vllm ", "reasoning": "duplicate"}))  # one of the two, not both
    acc.add(chunk({"reasoning": "openrouter"}))
    acc.add(chunk({"content": "other choice"}, index=1))  # n > 1 is never asked for; ignored
    acc.add(chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "B", "arguments": '{"x"'}}]}))
    acc.add(chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "A", "arguments": ""}}]}))
    acc.add(chunk({"tool_calls": [{"index": 1, "function": {"arguments": ": 1}"}}]}))
    acc.add(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "[1]"}}]}))
    acc.add(chunk({}, finish="stop"))
    acc.add({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 60}})
    final = acc.response()
    assert final.message.content[0].type == "thinking" and final.message.text() == ""
    assert [(u.id, u.name, u.input) for u in final.message.tool_uses()] == [
        ("a", "A", {"_unparsed_arguments": "[1]"}),
        ("b", "B", {"x": 1}),
    ]
    assert final.stop_reason == "tool_use"  # finish "stop" with tool calls (Ollama does this)
    assert (final.usage.input_tokens, final.usage.cache_read_tokens, final.usage.output_tokens) == (40, 60, 5)
    with pytest.raises(ProviderError) as err:
        ChunkAccumulator("http://x").add({"error": {"code": 502, "message": "Provider disconnected"}})
    assert err.value.kind == "server" and "Provider disconnected" in str(err.value)


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < (parse_retry_after({"retry-after": later}) or 0) <= 30
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_wire_modules_import_httpx_only_at_the_first_request() -> None:
    probe = (
        "import sys\n"
        "from agentkeel.models.factory import make_provider\n"
        "from agentkeel.models.catalog import resolve_model\n"
        "env = {'ANTHROPIC_API_KEY': 'sk-test-not-a-real-key', 'OPENAI_BASE_URL': 'http://127.0.0.1:9/v1'}\n"
        "make_provider(resolve_model('anthropic:claude-sonnet-4-5', env), env)\n"
        "make_provider(resolve_model('openai:gpt-4.1', env), env)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'httpx', 'httpcore', 'anthropic', 'openai'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize(
    ("value", "ok"), [({"transport": "sdk"}, True), ({"transport": "grpc"}, False), ({"transprot": "sdk"}, False)]
)
def test_the_transport_setting_is_validated(value: dict[str, str], ok: bool, tmp_path: Path) -> None:
    settings = tmp_path / "p" / ".keel" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"provider": value}))
    if ok:
        loaded = load_settings(tmp_path / "p", home=tmp_path, keel_home=tmp_path / "kh")
        assert loaded.settings.provider is not None and loaded.settings.provider.transport == "sdk"
        assert loaded.warnings == []
        return
    with pytest.raises(SettingsError) as err:
        load_settings(tmp_path / "p", home=tmp_path, keel_home=tmp_path / "kh")
    assert str(settings) in str(err.value) and "key 'provider" in str(err.value) and "transp" in str(err.value)


def test_make_provider_takes_the_transport_setting(fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": []})
    env = {"ANTHROPIC_API_KEY": FAKE_KEY, "ANTHROPIC_BASE_URL": server.url, "KEEL_PROVIDER_TRANSPORT": "sdk"}
    info = resolve_model(None, env)
    assert type(make_provider(info, env, transport="wire")).__name__ == "AnthropicWireProvider"  # the setting wins
    assert type(make_provider(info, env)).__name__ == "AnthropicProvider"
    assert type(make_provider(info, {k: v for k, v in env.items() if k != "KEEL_PROVIDER_TRANSPORT"})).__name__ == (
        "AnthropicWireProvider"
    )
