"""The starlette app of ``keel serve``: the JSON API, the SSE event streams, the web app's files,
and the memory dashboard's API mounted under ``/memory``.

Every request needs the server's token (see :mod:`agentkeel.ui.serve.guard`). A client may name a
model only from the catalog of a configured provider, and bypassPermissions only when the server
was started with ``--allow-bypass-permissions`` (see :class:`~agentkeel.ui.serve.sessions.SessionManager`).

API (every body is JSON; every error is ``{"error": "one line"}``):

    GET  /api/info                                  version, cwd, whether bypassPermissions may be chosen
    GET  /api/sessions?cwd=                         {"live": [...], "saved": [...]} (saved: newest first)
    POST /api/sessions        {cwd?, resume?, fork?, model?, permission_mode?, prompt?}  open one (201)
    GET  /api/sessions/ID                           a live session's state (pending asks, busy, clients)
    GET  /api/sessions/ID/events?cwd=               the session log's events (live or saved)
    GET  /api/sessions/ID/stream                    SSE: every event, replayed after Last-Event-ID / ?after=N
    POST /api/sessions/ID/messages   {text}         start a prompt (409 while one runs)
    POST /api/sessions/ID/interrupt
    POST /api/sessions/ID/permissions/ASK  {answer} allow | allow_session | allow_project | deny
    POST /api/sessions/ID/elicitations/EID {action, content} an MCP server's elicitation_request frame
    POST /api/sessions/ID/mode       {mode}         the permission mode
    POST /api/sessions/ID/close
    GET  /api/sessions/ID/config                    permission rules, hooks, skills, MCP servers, tools
    GET  /api/sessions/ID/turns?cwd=                the user turns (the replay timeline's fork points)
    GET  /api/sessions/ID/replay?speed=&cwd=        SSE: the log's events re-emitted (0: at once; 1: as paced)
    POST /api/sessions/ID/fork       {at_turn?, cwd?}   a new session branched from this one
    POST /api/sessions/ID/rewind     {turn, mode}   conversation | code | both, on a live session
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel.ui.serve.guard import Guard
from agentkeel.ui.serve.sessions import ServeError, SessionManager
from agentkeel.ui.serve.views import edit_shapes

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger("agentkeel.ui.serve")
ASSETS = {"app.js": "text/javascript", "app.css": "text/css", "index.html": "text/html"}


def asset(name: str) -> str:
    return resources.files("agentkeel.ui.serve").joinpath("web", name).read_text(encoding="utf-8")


def build_app(
    manager: SessionManager,
    *,
    token: str,
    loopback_only: bool = True,
    memory_app: Callable[[], Any] | None = None,
) -> Any:
    """The ASGI app behind the :class:`~agentkeel.ui.serve.guard.Guard`."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route

    from agentkeel._version import __version__

    def error(message: str, status: int = 400) -> Response:
        return JSONResponse({"error": message}, status_code=status)

    async def body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw:
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise ServeError("the request body is not valid JSON") from None
        if not isinstance(data, dict):
            raise ServeError("the request body must be a JSON object")
        return data

    def handler(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def wrapped(request: Request) -> Response:
            try:
                result: Response = await fn(request)
                return result
            except ServeError as e:
                return error(str(e), e.status)

        return wrapped

    async def index(_: Request) -> Response:
        return Response(asset("index.html"), media_type="text/html", headers={"Cache-Control": "no-store"})

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return error(f"no file {name}", 404)
        return Response(asset(name), media_type=ASSETS[name], headers={"Cache-Control": "no-store"})

    async def info(_: Request) -> Response:
        return JSONResponse(
            {
                "version": __version__,
                "cwd": str(manager.cwd),
                "token": True,
                "bypass": manager.allow_bypass,
                "memory": memory_app is not None,
                "edit_shapes": edit_shapes(),
            }
        )

    async def sessions(request: Request) -> Response:
        cwd = manager.resolve_cwd(request.query_params.get("cwd"))
        live = [s.summary() for s in manager.live.values()]
        return JSONResponse({"cwd": str(cwd), "live": live, "saved": saved_sessions(manager, cwd)})

    async def create(request: Request) -> Response:
        data = await body(request)
        cwd = manager.resolve_cwd(data.get("cwd"))
        resume = _opt_str(data, "resume")
        live = await manager.open(
            cwd=cwd,
            resume=resume,
            fork=bool(data.get("fork")),
            model=_opt_str(data, "model"),
            mode=_opt_str(data, "permission_mode"),
        )
        prompt = _opt_str(data, "prompt")
        if prompt:
            manager.send(live.id, prompt)
        return JSONResponse(live.summary(), status_code=201)

    async def show(request: Request) -> Response:
        return JSONResponse(manager.get(request.path_params["sid"]).summary())

    async def events(request: Request) -> Response:
        from agentkeel.core.events import event_data
        from agentkeel.session.load import load_session

        path = session_path(manager, request.path_params["sid"], request.query_params.get("cwd"))
        loaded = load_session(path)
        return JSONResponse(
            {
                "session_id": loaded.session_id,
                "events": [event_data(e) for e in loaded.events],
                "report": None if loaded.report.clean else loaded.report.summary(),
            }
        )

    async def stream(request: Request) -> Response:
        live = manager.get(request.path_params["sid"])
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        try:
            after = max(0, int(raw))
        except ValueError:
            raise ServeError(f"Last-Event-ID / after must be an event number, not {raw!r}") from None

        async def frames() -> AsyncIterator[str]:
            yield "retry: 1000\n\n"
            async for text in live.stream.follow(after):
                yield text

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)

    async def message(request: Request) -> Response:
        data = await body(request)
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ServeError('send {"text": "your message"}')
        live = manager.send(request.path_params["sid"], text)
        return JSONResponse({"session_id": live.id, "accepted": True}, status_code=202)

    async def interrupt(request: Request) -> Response:
        return JSONResponse({"interrupted": manager.interrupt(request.path_params["sid"])})

    async def permission(request: Request) -> Response:
        data = await body(request)
        live = manager.get(request.path_params["sid"])
        live.answer(request.path_params["ask"], str(data.get("answer", "")))
        return JSONResponse({"answered": True})

    async def elicitation(request: Request) -> Response:
        data = await body(request)
        live = manager.get(request.path_params["sid"])
        live.answer_elicitation(request.path_params["eid"], str(data.get("action", "")), data.get("content"))
        return JSONResponse({"answered": True})

    async def mode(request: Request) -> Response:
        data = await body(request)
        manager.set_mode(request.path_params["sid"], str(data.get("mode", "")))
        return JSONResponse({"mode": data["mode"]})

    async def close(request: Request) -> Response:
        manager.get(request.path_params["sid"])
        await manager.close(request.path_params["sid"])
        return JSONResponse({"closed": True})

    async def config(request: Request) -> Response:
        from agentkeel.ui.serve.views import session_config

        live = manager.get(request.path_params["sid"])
        assert live.runtime is not None
        return JSONResponse(session_config(live.runtime))

    async def turns(request: Request) -> Response:
        history = _history()
        path = session_path(manager, request.path_params["sid"], request.query_params.get("cwd"))
        rows = history.user_turns(path)
        return JSONResponse(
            [
                {
                    "index": t.index,
                    "text": t.text,
                    "timestamp": t.timestamp,
                    "event_uuid": t.event_uuid,
                    "files_changed": list(t.files_changed),
                }
                for t in rows
            ]
        )

    async def replay(request: Request) -> Response:
        from agentkeel.core.events import event_data
        from agentkeel.ui.serve.stream import frame

        history = _history()
        path = session_path(manager, request.path_params["sid"], request.query_params.get("cwd"))
        raw = request.query_params.get("speed", "0")
        try:
            speed = float(raw)
        except ValueError:
            raise ServeError(f"speed must be a number (0: as fast as possible), not {raw!r}") from None
        if not 0 <= speed <= 1000:
            raise ServeError("speed must be between 0 and 1000")

        async def frames() -> AsyncIterator[str]:
            n = 0
            async for event in history.replay(path, speed):
                n += 1
                yield frame(n, event.type, {"event": event_data(event)})
            yield frame(n + 1, "replay_end", {"events": n})

        return StreamingResponse(frames(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    async def fork(request: Request) -> Response:
        from agentkeel.session.fork import fork_session

        data = await body(request)
        sid = request.path_params["sid"]
        path = session_path(manager, sid, data.get("cwd") if isinstance(data.get("cwd"), str) else None)
        at = data.get("at_turn")
        if at is not None and (not isinstance(at, int) or isinstance(at, bool) or at < 0):
            raise ServeError("at_turn must be a turn number (0 = before the first prompt), or absent")
        cwd = _log_cwd(path) or manager.cwd
        try:
            new_id = fork_session(manager.keel_home(), cwd, path.stem, at)
        except (ValueError, LookupError, OSError) as e:
            raise ServeError(f"cannot fork: {e}") from None
        return JSONResponse({"session_id": new_id, "cwd": str(cwd), "forked_from": path.stem}, status_code=201)

    async def rewind(request: Request) -> Response:
        history = _history()
        data = await body(request)
        live = manager.get(request.path_params["sid"])
        if live.busy:
            raise ServeError("the session is working on a prompt: interrupt it first", 409)
        turn, how = data.get("turn"), data.get("mode", "both")
        if not isinstance(turn, int) or isinstance(turn, bool) or turn < 0:
            raise ServeError("turn must be a user turn's index")
        if how not in ("conversation", "code", "both"):
            raise ServeError("mode must be conversation, code or both")
        assert live.runtime is not None
        try:
            result = await history.rewind(live.runtime, turn, how)
        except (ValueError, LookupError, OSError) as e:
            raise ServeError(f"cannot rewind: {e}") from None
        return JSONResponse(
            {
                "restored_files": list(result.restored_files),
                "removed_files": list(result.removed_files),
                "conversation_turns": result.conversation_turns,
                "warning": result.warning,
            }
        )

    sid = "/api/sessions/{sid}"
    routes: list[Any] = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/api/info", handler(info)),
        Route("/api/sessions", handler(sessions), methods=["GET"]),
        Route("/api/sessions", handler(create), methods=["POST"]),
        Route(sid, handler(show)),
        Route(f"{sid}/events", handler(events)),
        Route(f"{sid}/stream", handler(stream)),
        Route(f"{sid}/messages", handler(message), methods=["POST"]),
        Route(f"{sid}/interrupt", handler(interrupt), methods=["POST"]),
        Route(sid + "/permissions/{ask}", handler(permission), methods=["POST"]),
        Route(sid + "/elicitations/{eid}", handler(elicitation), methods=["POST"]),
        Route(f"{sid}/mode", handler(mode), methods=["POST"]),
        Route(f"{sid}/close", handler(close), methods=["POST"]),
        Route(f"{sid}/config", handler(config)),
        Route(f"{sid}/turns", handler(turns)),
        Route(f"{sid}/replay", handler(replay)),
        Route(f"{sid}/fork", handler(fork), methods=["POST"]),
        Route(f"{sid}/rewind", handler(rewind), methods=["POST"]),
    ]
    if memory_app is not None:
        routes.append(Mount("/memory", app=LazyApp(memory_app, loopback_only)))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await manager.close_all()

    app = Starlette(routes=routes, lifespan=lifespan)
    return Guard(app, token=token, loopback_only=loopback_only)


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ServeError(f"{key} must be a string")
    return value


def _history() -> Any:
    try:
        from agentkeel.session import history
    except ImportError:
        raise ServeError("this keel has no session history module (agentkeel.session.history)", 501) from None
    return history


def session_path(manager: SessionManager, ref: str, cwd: object) -> Path:
    """The log of a session: a live one's, else one of the project's (an id or unique prefix)."""
    from agentkeel.session.load import AmbiguousSession, find_session

    for live in manager.live.values():
        if live.id == ref and live.runtime is not None:
            return live.runtime.session_path
    directory = manager.project_dir(manager.resolve_cwd(cwd))
    try:
        found = find_session(directory, ref)
    except AmbiguousSession as e:
        raise ServeError(str(e)) from None
    if found is None:
        for row in _index_rows(manager, None):
            if row["session_id"] == ref:
                return Path(row["path"])
        raise ServeError(f"no session {ref!r} for this project", 404)
    return found


def _log_cwd(path: Path) -> Path | None:
    """The project a session belongs to, from its first ``session_start`` entry."""
    try:
        with path.open("rb") as f:
            for _ in range(20):
                line = f.readline()
                if not line:
                    break
                with contextlib.suppress(ValueError):
                    data = json.loads(line)
                    if isinstance(data, dict) and data.get("type") == "session_start" and data.get("cwd"):
                        return Path(str(data["cwd"]))
    except OSError:
        pass
    return None


def _index_rows(manager: SessionManager, cwd: Path | None) -> list[dict[str, Any]]:
    """Saved sessions from the SQLite session index, when this keel has it."""
    try:
        from agentkeel.session.index import SessionIndex
    except ImportError:
        return []
    try:
        rows = SessionIndex(manager.keel_home()).list(cwd, limit=200)
    except NotImplementedError:
        return []
    except Exception:  # the index is a convenience: fall back to the files
        log.warning("the session index failed; listing the files", exc_info=True)
        return []
    return [
        {
            "session_id": r.session_id,
            "path": str(r.path),
            "cwd": r.cwd,
            "title": r.title,
            "first_prompt": r.first_prompt,
            "cost_usd": r.cost_usd,
            "last_activity": r.last_activity,
            "turns": r.turns,
            "parent_id": r.parent_id,
        }
        for r in rows
    ]


def saved_sessions(manager: SessionManager, cwd: Path) -> list[dict[str, Any]]:
    rows = _index_rows(manager, cwd)
    if rows:
        return rows
    from agentkeel.session.load import list_sessions

    return [
        {
            "session_id": s.id,
            "path": str(s.path),
            "cwd": str(cwd),
            "title": "",
            "first_prompt": s.first_prompt,
            "cost_usd": 0.0,
            "last_activity": s.modified.isoformat(timespec="seconds"),
            "turns": None,
            "parent_id": None,
        }
        for s in list_sessions(manager.project_dir(cwd))[:200]
    ]


class LazyApp:
    """The memory dashboard's app, built (its store opened) at the first request under /memory.

    Its own loopback-only host check guards ``keel mem web``; here the Guard in front has already
    checked the token (and the host, on loopback), so when this server is bound beyond loopback the request is
    handed on as addressed to 127.0.0.1."""

    def __init__(self, factory: Callable[[], Any], loopback_only: bool) -> None:
        self.factory = factory
        self.loopback_only = loopback_only
        self.app: Any = None
        self.failure: str | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import JSONResponse

        if self.app is None and self.failure is None:
            try:
                self.app = self.factory()
            except Exception as e:
                log.warning("memory views unavailable", exc_info=True)
                self.failure = f"memory is unavailable: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        if self.app is None:
            await JSONResponse({"error": self.failure}, status_code=503)(scope, receive, send)
            return
        if scope["type"] == "http" and not self.loopback_only:
            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"host"]
            scope = {**scope, "headers": [*headers, (b"host", b"127.0.0.1")]}
        await self.app(scope, receive, send)
