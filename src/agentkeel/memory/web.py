"""``keel mem web``: a read-only dashboard over a memory store (live observations, search, sessions).

Starlette served by uvicorn (the ``web`` extra; both also come with the ``mcp`` extra). It binds
to loopback by default and only answers requests addressed to a loopback host name, so a web
page in the browser cannot reach it through DNS rebinding. It never writes: forgetting and
editing stay with ``keel mem forget`` and the markdown mirror. Everything it returns went
through the store's masking, like every other surface.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agentkeel.memory.model import EVENT_TYPES, Entry

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from agentkeel.memory.store import MemoryStore

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
FIRST_SCREEN = 20  # entries the live feed starts with
POLL = 100  # entries each poll of the store reads
ENTRY_CHARS = 4000  # a dashboard row shows this much of an entry; `keel mem get` shows all


def entry_json(entry: Entry, limit: int = ENTRY_CHARS) -> dict[str, Any]:
    text = (
        entry.text if len(entry.text) <= limit else entry.text[:limit] + f"\n… [{len(entry.text) - limit} more chars]"
    )
    return {
        "id": entry.id,
        "type": entry.type,
        "project": entry.project,
        "session": entry.session,
        "timestamp": entry.timestamp,
        "summary": entry.summary(),
        "text": text,
        "metadata": entry.metadata,
        "superseded_by": entry.superseded_by,
    }


def build_app(store: MemoryStore, project: str | None, poll_s: float = 1.0) -> Starlette:
    """The ASGI app. ``project`` scopes every view (None: all projects)."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import HTMLResponse, JSONResponse, StreamingResponse
    from starlette.routing import Route

    lock = asyncio.Lock()  # one store connection: one query at a time, off the event loop

    async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        async with lock:
            return await asyncio.to_thread(fn, *args, **kwargs)

    def _int(request: Request, name: str, default: int, top: int) -> int:
        try:
            return max(1, min(top, int(request.query_params.get(name, default))))
        except ValueError:
            return default

    async def page(_: Request) -> Response:
        return HTMLResponse(PAGE.replace("{{project}}", json.dumps(project or "all projects")))

    async def stats(_: Request) -> Response:
        return JSONResponse(await call(store.stats))

    async def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        kind = request.query_params.get("type") or None
        if kind is not None and kind not in EVENT_TYPES:
            return JSONResponse({"error": f"unknown type {kind!r}"}, status_code=400)
        if not query:
            return JSONResponse([])
        hits = await call(store.search, query, k=_int(request, "k", 20, 100), project=project, type=kind)
        return JSONResponse([h.to_dict() for h in hits])

    async def sessions(request: Request) -> Response:
        return JSONResponse(await call(store.sessions, project, _int(request, "limit", 50, 500)))

    async def session(request: Request) -> Response:
        sid = request.query_params.get("id", "")
        if not sid:
            return JSONResponse({"error": "pass ?id=<session>"}, status_code=400)

        def load() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for entry in store.export(session=sid, project=project):
                out.append(entry_json(entry))
                if len(out) >= 1000:
                    break
            return out

        return JSONResponse(await call(load))

    async def get(request: Request) -> Response:
        ids = [i for i in request.query_params.get("ids", "").split(",") if i][:50]
        entries = await call(store.get, ids)
        return JSONResponse([entry_json(e) for e in entries])

    async def stream(request: Request) -> Response:
        """Server-sent events: each new entry as it is indexed (polled; the store is the bus across processes)."""

        async def events() -> AsyncIterator[str]:
            seen: set[str] = set()
            first = True
            while not await request.is_disconnected():
                recent: list[Entry] = await call(store.recent, list(EVENT_TYPES), project, POLL)
                # oldest first: a page puts each entry it receives at the top, so the newest ends there.
                # The first poll sends the newest FIRST_SCREEN and counts every one it read as seen: the
                # older ones are not news, and sent later they would land above the newer ones
                fresh = [e for e in (recent[:FIRST_SCREEN] if first else recent) if e.id not in seen]
                seen.update(e.id for e in recent)
                for entry in reversed(fresh):
                    yield f"event: entry\ndata: {json.dumps(entry_json(entry, 600))}\n\n"
                if first:
                    yield ": live\n\n"
                    first = False
                if len(seen) > 20000:
                    seen = {e.id for e in recent}
                await asyncio.sleep(poll_s)

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", page),
        Route("/api/stats", stats),
        Route("/api/search", search),
        Route("/api/sessions", sessions),
        Route("/api/session", session),
        Route("/api/get", get),
        Route("/api/stream", stream),
    ]
    return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK))])


def serve(store: MemoryStore, project: str | None, host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve until interrupted; prints the address first (port 0 picks a free one)."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    print(f"keel memory dashboard on http://{shown}:{bound}/", flush=True)
    config = uvicorn.Config(build_app(store, project), log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>keel memory</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
 header { background: #1d2330; color: #fff; padding: 10px 18px; display: flex; gap: 18px; align-items: center; }
 header b { font-size: 16px; } header span { opacity: .7; }
 nav button { background: none; border: 0; color: #cfd6e4; font: inherit; cursor: pointer; padding: 4px 8px; }
 nav button.on { color: #fff; border-bottom: 2px solid #6aa0ff; }
 main { padding: 14px 18px; max-width: 1100px; }
 .row { background: #fff; border: 1px solid #e2e5ea; border-radius: 6px; padding: 8px 10px; margin: 6px 0; }
 .meta { color: #6b7385; font-size: 12px; } .type { font-weight: 600; color: #3d5afe; margin-right: 6px; }
 pre { white-space: pre-wrap; word-break: break-word; margin: 6px 0 0; font-size: 12.5px; }
 input, select { font: inherit; padding: 5px 8px; } .hidden { display: none; }
 .session { cursor: pointer; } #stats { font-size: 12px; opacity: .8; margin-left: auto; }
</style></head>
<body>
<header><b>keel memory</b><span id="scope"></span>
 <nav><button data-tab="live" class="on">Live</button><button data-tab="search">Search</button>
 <button data-tab="sessions">Sessions</button></nav><span id="stats"></span></header>
<main>
 <section id="live"><div class="meta" id="livestate">connecting…</div><div id="feed"></div></section>
 <section id="search" class="hidden">
  <form id="sform"><input id="q" size="50" placeholder="search memory" autofocus>
  <select id="stype"><option value="">any type</option></select> <button>Search</button></form>
  <div id="results"></div></section>
 <section id="sessions" class="hidden"><div id="slist"></div><div id="sview"></div></section>
</main>
<script>
const PROJECT = {{project}};
const TYPES = ["user_prompt", "assistant_response", "tool_observation", "session_summary", "lesson", "fact"];
const $ = (id) => document.getElementById(id);
function el(tag, cls, text) {
  const n = document.createElement(tag); if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text; return n;
}
function row(e, full) {
  const r = el("div", "row");
  const head = el("div");
  head.append(el("span", "type", e.type), el("span", "", e.summary));
  const meta = el("div", "meta", `[${e.id}] ${e.timestamp} · session ${e.session || "-"} · ${e.project}`);
  r.append(head, meta);
  if (full && e.text) r.append(el("pre", "", e.text));
  r.addEventListener("click", async () => {
    if (r.querySelector("pre")) return;
    const got = await (await fetch(`/api/get?ids=${encodeURIComponent(e.id)}`)).json();
    if (got.length) r.append(el("pre", "", got[0].text));
  });
  return r;
}
$("scope").textContent = PROJECT;
for (const t of TYPES) { const o = el("option", "", t); o.value = t; $("stype").append(o); }
document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => {
  document.querySelectorAll("nav button").forEach((x) => x.classList.toggle("on", x === b));
  for (const t of ["live", "search", "sessions"]) $(t).classList.toggle("hidden", t !== b.dataset.tab);
  if (b.dataset.tab === "sessions") loadSessions();
}));
const source = new EventSource("/api/stream");
source.addEventListener("entry", (m) => {
  $("feed").prepend(row(JSON.parse(m.data), false));
  while ($("feed").childElementCount > 300) $("feed").lastChild.remove();
});
source.onopen = () => { $("livestate").textContent = "live: new observations appear at the top"; };
source.onerror = () => { $("livestate").textContent = "disconnected; retrying…"; };
$("sform").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const q = encodeURIComponent($("q").value), t = encodeURIComponent($("stype").value);
  const hits = await (await fetch(`/api/search?q=${q}&type=${t}`)).json();
  $("results").replaceChildren(...(hits.length ? hits.map((h) => row(h, false)) : [el("p", "meta", "nothing found")]));
});
async function loadSessions() {
  const list = await (await fetch("/api/sessions")).json();
  $("slist").replaceChildren(...list.map((s) => {
    const r = el("div", "row session");
    r.append(el("div", "", s.prompt || "(no prompt)"),
             el("div", "meta", `${s.session} · ${s.entries} entries · ${s.first} → ${s.last} · ${s.project}`));
    r.addEventListener("click", async () => {
      const entries = await (await fetch(`/api/session?id=${encodeURIComponent(s.session)}`)).json();
      $("sview").replaceChildren(el("h3", "", s.session), ...entries.map((e) => row(e, true)));
      $("sview").scrollIntoView();
    });
    return r;
  }));
}
async function refreshStats() {
  const s = await (await fetch("/api/stats")).json();
  $("stats").textContent = `${s.entries} entries · ${s.sessions} sessions · ${s.vectors} vectors`;
}
refreshStats(); setInterval(refreshStats, 10000);
</script></body></html>
"""
