"""`keel serve`'s HTTP API over real loopback HTTP: a real server process, the fake model, real files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agentkeel.models.fake.server import FakeLLMServer
from kit import session_files, wait_until, wire_env
from serve_fixtures import Served, kind, read_frames, start_serve
from serve_fixtures import serve as serve  # the fixture

Serve = Callable[..., Served]
WRITE = {"text": "Writing.", "tool_calls": [{"name": "Write", "input": {"file_path": "out.txt", "content": "made\n"}}]}


def open_session(s: Served, **body: Any) -> str:
    res = s.post("api/sessions", body)
    assert res.status_code == 201, res.text
    sid: str = res.json()["session_id"]
    return sid


def events_of(frames: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [f["event"] for f in frames if f.get("event", {}).get("type") == type_]


def test_a_prompt_streams_text_deltas_then_the_result_in_numbered_frames(serve: Serve) -> None:
    s = serve({"steps": ["Hello from the scripted model, in several deltas."]})
    sid = open_session(s, prompt="say hello")
    frames = s.frames(sid, kind("idle"))
    kinds = [f["kind"] for f in frames]
    assert kinds[0] == "session_start"
    deltas = events_of(frames, "text_delta")
    assert len(deltas) > 1
    assert "".join(d["text"] for d in deltas) == "Hello from the scripted model, in several deltas."
    assert kinds.index("text_delta") < kinds.index("assistant") < kinds.index("result") < kinds.index("idle")
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert events_of(frames, "result")[0]["subtype"] == "success"


def test_a_late_client_gets_exactly_what_it_missed_after_its_last_event_id(serve: Serve) -> None:
    s = serve({"steps": ["first answer", "second answer"]})
    sid = open_session(s, prompt="one")
    first = s.frames(sid, kind("idle"))
    last_seen = first[-1]["seq"]
    assert s.post(f"api/sessions/{sid}/messages", {"text": "two"}).status_code == 202
    s.frames(sid, lambda f: f["kind"] == "idle" and f["seq"] > last_seen)  # the run is over
    missed = s.frames(sid, kind("idle"), after=last_seen)
    assert missed[0]["seq"] == last_seen + 1
    assert events_of(missed, "user")[0]["message"]["content"][0]["text"] == "two"
    assert "first answer" not in json.dumps(missed)
    everything = s.frames(sid, lambda f: f["kind"] == "idle" and f["seq"] > last_seen, after=0)
    assert [f["seq"] for f in everything] == list(range(1, everything[-1]["seq"] + 1))


def test_a_permission_request_waits_for_a_client_and_allow_runs_the_tool(serve: Serve, project: Path) -> None:
    s = serve({"steps": [WRITE, "written"]})
    sid = open_session(s, prompt="write it")
    ask = s.frames(sid, kind("permission_request"))[-1]
    assert ask["tool"] == "Write" and ask["input"]["file_path"] == "out.txt"
    assert not (project / "out.txt").exists()  # nothing runs before the answer
    pending = s.get(f"api/sessions/{sid}").json()["pending_asks"]
    assert [p["ask_id"] for p in pending] == [ask["ask_id"]]
    bad = s.post(f"api/sessions/{sid}/permissions/{ask['ask_id']}", {"answer": "sure"})
    assert bad.status_code == 400 and "allow, allow_session, allow_project, deny" in bad.json()["error"]
    assert s.post(f"api/sessions/{sid}/permissions/{ask['ask_id']}", {"answer": "allow"}).status_code == 200
    again = s.post(f"api/sessions/{sid}/permissions/{ask['ask_id']}", {"answer": "deny"})
    assert again.status_code == 409
    frames = s.frames(sid, kind("idle"), after=ask["seq"])
    assert frames[0]["kind"] == "permission_answered"
    assert (project / "out.txt").read_text() == "made\n"
    assert events_of(frames, "tool_end")[0]["is_error"] is False


def test_deny_keeps_the_file_unwritten_and_tells_the_model(serve: Serve, project: Path) -> None:
    s = serve({"steps": [WRITE, "ok, not writing"]})
    sid = open_session(s, prompt="write it")
    ask = s.frames(sid, kind("permission_request"))[-1]
    s.post(f"api/sessions/{sid}/permissions/{ask['ask_id']}", {"answer": "deny"})
    frames = s.frames(sid, kind("idle"), after=ask["seq"])
    assert not (project / "out.txt").exists()
    results = events_of(frames, "tool_results")[0]["message"]["content"][0]
    assert results["is_error"] is True and "denied" in json.dumps(results)


def test_interrupt_stops_a_slow_reply_and_the_session_takes_the_next_prompt(serve: Serve) -> None:
    s = serve({"steps": [{"text": "this takes long", "delay_s": 60}, "after the interrupt"]})
    sid = open_session(s, prompt="slow")
    s.frames(sid, kind("request_start"))
    # the request has reached the model (an interrupt before that leaves the slow step to "go on")
    assert s.model is not None
    wait_until(lambda: s.model is not None and len(s.model.cursor.requests) == 1, what="the slow request")
    busy = s.post(f"api/sessions/{sid}/messages", {"text": "too soon"})
    assert busy.status_code == 409 and "interrupt" in busy.json()["error"]
    assert s.post(f"api/sessions/{sid}/interrupt").json() == {"interrupted": True}
    frames = s.frames(sid, kind("idle"), after=0, timeout=30)  # well before the slow reply
    assert events_of(frames, "interrupted")
    assert events_of(frames, "result")[0]["subtype"] == "interrupted"
    last = frames[-1]["seq"]
    s.post(f"api/sessions/{sid}/messages", {"text": "go on"})
    later = s.frames(sid, kind("idle"), after=last)
    assert "after the interrupt" in "".join(d["text"] for d in events_of(later, "text_delta"))


def test_two_clients_watch_the_same_session_live(serve: Serve) -> None:
    import threading

    s = serve({"steps": ["shared answer"]})
    sid = open_session(s)
    seen: dict[str, list[dict[str, Any]]] = {}

    def watch(name: str) -> None:
        with httpx.Client(headers=s.client.headers) as c:
            seen[name] = read_frames(c, s.url + f"api/sessions/{sid}/stream", kind("idle"))

    watchers = [threading.Thread(target=watch, args=(n,)) for n in ("a", "b")]
    for w in watchers:
        w.start()
    wait_until(lambda: s.get(f"api/sessions/{sid}").json()["clients"] == 2, what="both clients to connect")
    assert s.post(f"api/sessions/{sid}/messages", {"text": "hi both"}).status_code == 202
    for w in watchers:
        w.join(30)
    assert [f["seq"] for f in seen["a"]] == [f["seq"] for f in seen["b"]]
    assert "shared answer" in json.dumps(seen["a"])


def test_a_saved_session_is_listed_read_and_resumed_with_its_history(serve: Serve) -> None:
    s = serve({"steps": ["remembered answer", "resumed answer"]})
    sid = open_session(s, prompt="the first prompt")
    s.frames(sid, kind("idle"))
    assert s.post(f"api/sessions/{sid}/close").json() == {"closed": True}
    listing = s.get("api/sessions").json()
    assert listing["live"] == []
    assert [r["first_prompt"] for r in listing["saved"] if r["session_id"] == sid] == ["the first prompt"]
    log = s.get(f"api/sessions/{sid}/events").json()["events"]
    assert [e["type"] for e in log if e["type"] in ("user", "assistant", "session_end")] == [
        "user",
        "assistant",
        "session_end",
    ]
    again = open_session(s, resume=sid[:8])
    assert again == sid
    frames = s.frames(sid, lambda f: f["kind"] == "session_start" and f["event"]["source"] == "resume", after=0)
    assert events_of(frames, "user")[0]["message"]["content"][0]["text"] == "the first prompt"
    s.post(f"api/sessions/{sid}/messages", {"text": "and now?"})
    done = s.frames(sid, lambda f: f["kind"] == "idle", after=frames[-1]["seq"])
    assert "resumed answer" in json.dumps(done)


def test_fork_at_a_turn_makes_a_new_session_with_the_turns_before_it(serve: Serve) -> None:
    s = serve({"steps": ["answer one", "answer two"]})
    sid = open_session(s, prompt="turn zero")
    first = s.frames(sid, kind("idle"))
    s.post(f"api/sessions/{sid}/messages", {"text": "turn one"})
    s.frames(sid, kind("idle"), after=first[-1]["seq"])
    turns = s.get(f"api/sessions/{sid}/turns").json()
    assert [t["text"] for t in turns] == ["turn zero", "turn one"]
    made = s.post(f"api/sessions/{sid}/fork", {"at_turn": 1})
    assert made.status_code == 201, made.text
    new_id = made.json()["session_id"]
    assert new_id != sid
    texts = [
        e["message"]["content"][0]["text"]
        for e in s.get(f"api/sessions/{new_id}/events").json()["events"]
        if e["type"] == "user"
    ]
    assert texts == ["turn zero"]
    bad = s.post(f"api/sessions/{sid}/fork", {"at_turn": 7})
    assert bad.status_code == 400 and "turn" in bad.json()["error"]


def test_bad_requests_get_one_clear_line_and_change_nothing(serve: Serve) -> None:
    s = serve({"steps": ["x"]})
    res = s.client.post(s.url + "api/sessions", content=b"{nope", headers={"Content-Type": "application/json"})
    assert res.status_code == 400 and res.json() == {"error": "the request body is not valid JSON"}
    assert s.post("api/sessions", {"cwd": "/no/such/dir"}).json()["error"] == "cwd '/no/such/dir' is not a directory"
    assert "permission_mode must be one of" in s.post("api/sessions", {"permission_mode": "yolo"}).json()["error"]
    missing = s.post("api/sessions", {"resume": "0000dead"})
    assert missing.status_code == 404 and "no session" in missing.json()["error"]
    assert s.get("api/sessions/nope").status_code == 404
    assert s.post("api/sessions/nope/messages", {"text": "hi"}).status_code == 404
    sid = open_session(s)
    assert s.post(f"api/sessions/{sid}/messages", {"text": "  "}).status_code == 400
    assert s.get(f"api/sessions/{sid}/stream", headers={"Last-Event-ID": "x"}).status_code == 400
    assert s.get("api/sessions").json()["live"][0]["busy"] is False


def test_loopback_refuses_other_host_names_and_cross_site_writes(serve: Serve) -> None:
    s = serve({"steps": ["x"]})
    assert s.get("api/info", headers={"Host": "attacker.example"}).status_code == 400
    assert s.get("api/info", headers={"Host": "127.0.0.1.attacker.example"}).status_code == 400  # rebinding name
    assert s.get("api/info", headers={"Host": "localhost:1"}).status_code == 200
    plain = s.client.post(s.url + "api/sessions", content=b'{"prompt": "hi"}', headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415
    cross = s.post("api/sessions", {"prompt": "hi"}, headers={"Origin": "http://attacker.example"})
    assert cross.status_code == 403
    assert s.get("api/sessions").json()["live"] == []  # none of them opened a session
    same = s.post("api/sessions", {}, headers={"Origin": s.url.rstrip("/")})
    assert same.status_code == 201


def test_beyond_loopback_every_request_needs_the_printed_token(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["x"]})
    s = start_serve(project, wire_env(server, "anthropic"), "--host", "0.0.0.0")
    try:
        assert s.token and len(s.token) >= 24
        with httpx.Client() as anon:
            refused = anon.get(s.url + "api/sessions")
            assert refused.status_code == 401 and "token" in refused.json()["error"]
            assert anon.get(s.url + "api/sessions", headers={"Authorization": "Bearer wrong"}).status_code == 401
            page = anon.get(s.url + f"?token={s.token}", follow_redirects=False)
            assert page.status_code == 303 and "HttpOnly" in page.headers["set-cookie"]
            assert anon.get(s.url + "api/sessions").status_code == 200  # the cookie now
            assert anon.get(s.url, headers={"Host": "example.org"}).status_code == 200  # no host check: the token
        assert s.get("api/sessions").status_code == 200  # Bearer
    finally:
        s.stop()


def test_a_token_from_the_environment_guards_loopback_too(serve: Serve) -> None:
    s = serve({"steps": ["x"]}, "--token", token_env="not-a-real-token-0123456789")
    assert s.token is None  # not printed: the user set it
    assert httpx.get(s.url + "api/info").status_code == 401
    assert s.get("api/info").json()["token"] is True


def test_stopping_the_server_closes_every_session_log_cleanly(serve: Serve, tmp_path: Path) -> None:
    s = serve({"steps": ["bye"]})
    sid = open_session(s, prompt="hi")
    s.frames(sid, kind("idle"))
    s.stop()
    assert s.proc.returncode == 0
    (log,) = [p for p in session_files(tmp_path / "keelhome") if p.stem == sid]
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["type"] == "session_end"
    assert all(lock.stat().st_size == 0 for lock in log.parent.glob("*.lock"))  # released: no holder recorded


def test_the_setup_view_shows_the_session_rules_hooks_and_tools(serve: Serve, tmp_path: Path) -> None:
    settings = tmp_path / "userhome" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo checked"}]}]}
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(git status:*)"]}, "hooks": hooks}))
    s = serve({"steps": ["x"]})
    sid = open_session(s, permission_mode="acceptEdits")
    config = s.get(f"api/sessions/{sid}/config").json()
    assert config["permissions"]["mode"] == "acceptEdits"
    assert {"kind": "allow", "rule": "Bash(git status:*)"}.items() <= config["permissions"]["rules"][0].items()
    assert config["hooks"][0]["event"] == "PreToolUse" and config["hooks"][0]["handler"] == "echo checked"
    assert "Write" in config["tools"]
    s.post(f"api/sessions/{sid}/mode", {"mode": "plan"})
    assert s.get(f"api/sessions/{sid}").json()["mode"] == "plan"


def test_the_memory_views_are_mounted_and_the_app_is_served(serve: Serve) -> None:
    s = serve({"steps": ["x"]})
    stats = s.get("memory/api/stats")
    assert stats.status_code == 200 and stats.json()["backend"] == "sqlite"
    page = s.get("")
    assert page.status_code == 200 and '<script src="/static/app.js">' in page.text
    assert "EventSource" in s.get("static/app.js").text
    assert s.get("static/../app.py").status_code == 404


def test_rewind_of_a_live_session_restores_the_files_and_the_conversation(serve: Serve, project: Path) -> None:
    s = serve({"steps": ["nothing yet", WRITE, "written"]})
    sid = open_session(s, prompt="turn zero", permission_mode="acceptEdits")
    first = s.frames(sid, kind("idle"))
    s.post(f"api/sessions/{sid}/messages", {"text": "turn one: write"})
    s.frames(sid, kind("idle"), after=first[-1]["seq"])
    assert (project / "out.txt").read_text() == "made\n"
    res = s.post(f"api/sessions/{sid}/rewind", {"turn": 1, "mode": "both"})
    assert res.status_code == 200, res.text
    assert res.json()["conversation_turns"] == 1
    assert not (project / "out.txt").exists()
    assert [t["text"] for t in s.get(f"api/sessions/{sid}/turns").json()] == ["turn zero"]
    bad = s.post(f"api/sessions/{sid}/rewind", {"turn": 1, "mode": "everything"})
    assert bad.status_code == 400 and bad.json()["error"] == "mode must be conversation, code or both"


def test_replay_re_emits_the_session_log_as_sse_and_ends(serve: Serve) -> None:
    s = serve({"steps": ["replayed answer"]})
    sid = open_session(s, prompt="replay me")
    s.frames(sid, kind("idle"))
    log = [e["uuid"] for e in s.get(f"api/sessions/{sid}/events").json()["events"]]
    frames = read_frames(s.client, s.url + f"api/sessions/{sid}/replay?speed=0", kind("replay_end"))
    assert [f["event"]["uuid"] for f in frames[:-1]] == log
    assert frames[-1] == {"seq": len(log) + 1, "kind": "replay_end", "events": len(log)}
    assert s.get(f"api/sessions/{sid}/replay?speed=fast").status_code == 400
