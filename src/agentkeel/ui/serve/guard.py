"""Who may talk to ``keel serve``: an ASGI middleware in front of every route.

- Every request needs the server's secret token, on loopback too (another user of the machine
  can reach a loopback port): ``Authorization: Bearer T``, or the HttpOnly cookie the browser
  gets by opening the printed address once (``/?token=T``: the cookie is set and the page
  redirects to ``/``, so the token leaves the address bar). The cookie is named after the port
  (``keel_token_7378``): two servers on one machine do not overwrite each other's.
- Bound to loopback, the server also answers only requests addressed to a loopback host name (a
  web page cannot reach it through DNS rebinding).
- A state-changing request (anything but GET/HEAD) must be JSON (``Content-Type:
  application/json``, which a cross-site form or ``fetch`` cannot send without a CORS preflight,
  and none is answered) and its ``Origin``, when present, must be this server: another site open
  in the same browser can neither send a prompt nor answer a permission request.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "keel_token"  # + "_<port>"
REFUSED = (
    "this server needs its token: open the address `keel serve` printed (…/?token=…), "
    "or send Authorization: Bearer <token>"
)
LOGIN_PAGE = (
    "<!doctype html><meta charset=utf-8><title>keel</title>"
    "<p>This keel server needs its token: open the address <code>keel serve</code> printed "
    "(<code>http://…/?token=…</code>) in this browser.</p>"
)


def is_loopback(host: str) -> bool:
    """A loopback name or address: ``localhost``, 127.0.0.0/8, ::1 (never a name that merely starts with 127.)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    def __init__(self, app: ASGIApp, *, token: str, loopback_only: bool) -> None:
        if not token:
            raise ValueError("keel serve needs a token")
        self.app = app
        self.token = token
        self.loopback_only = loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if scope["type"] != "http":
            # a WebSocket (or any other kind of connection) needs the token and a loopback host
            # too; an Origin it sends must be this server (browsers do not preflight WebSockets)
            origin = headers.get("origin")
            if (
                (self.loopback_only and not is_loopback(_host_name(host)))
                or not self._authorized(headers, cookie_for(scope))
                or (origin is not None and urlsplit(origin).netloc != host)
            ):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        if self.loopback_only and not is_loopback(_host_name(host)):
            await _refuse(send, 400, f"this server answers only on loopback host names, not {host!r}")
            return
        method = scope.get("method", "GET")
        cookie_name = cookie_for(scope)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = (query.get("token") or [""])[0]
        if given and scope.get("path") == "/" and method == "GET" and self._ok(given):
            await _set_cookie(send, cookie_name, given)
            return
        if not self._authorized(headers, cookie_name):
            if scope.get("path") == "/" and method in ("GET", "HEAD"):
                await _refuse(send, 401, LOGIN_PAGE, html=True)
            else:
                await _refuse(send, 401, REFUSED)
            return
        if method not in ("GET", "HEAD", "OPTIONS"):
            origin = headers.get("origin")
            if origin is not None and urlsplit(origin).netloc != host:
                await _refuse(send, 403, f"cross-site request from {origin} refused")
                return
            if headers.get("content-type", "").split(";")[0].strip() != "application/json":
                await _refuse(send, 415, "send the request body as JSON (Content-Type: application/json)")
                return
        await self.app(scope, receive, send)

    def _ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())

    def _authorized(self, headers: dict[str, str], cookie_name: str) -> bool:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and self._ok(auth[7:].strip()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            return False
        morsel = cookie.get(cookie_name)
        return morsel is not None and self._ok(morsel.value)


def cookie_for(scope: Scope) -> str:
    """The cookie's name: ``keel_token_<port>`` (a browser sends a host's cookies to all its ports)."""
    server = scope.get("server")
    port = server[1] if isinstance(server, (tuple, list)) and len(server) > 1 and server[1] else ""
    return f"{COOKIE}_{port}" if port else COOKIE


async def _refuse(send: Send, status: int, message: str, *, html: bool = False) -> None:
    body = message.encode() if html else json.dumps({"error": message}).encode()
    kind = b"text/html; charset=utf-8" if html else b"application/json"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _set_cookie(send: Send, name: str, token: str) -> None:
    cookie = f"{name}={token}; HttpOnly; SameSite=Strict; Path=/"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", b"/"),
                (b"set-cookie", cookie.encode()),
                (b"cache-control", b"no-store"),
                (b"referrer-policy", b"no-referrer"),
                (b"content-length", b"0"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
