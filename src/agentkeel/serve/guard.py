"""Who may talk to ``keel serve``: an ASGI middleware in front of every route.

- Bound to loopback, the server answers only requests addressed to a loopback host name (a web
  page cannot reach it through DNS rebinding). Bound elsewhere, it needs its token.
- The token (when set) comes as ``Authorization: Bearer T``, the ``keel_token`` cookie, or once as
  ``/?token=T`` on the page, which sets the cookie (HttpOnly, SameSite=Strict) and redirects.
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

COOKIE = "keel_token"


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
    def __init__(self, app: ASGIApp, *, token: str | None, loopback_only: bool) -> None:
        self.app = app
        self.token = token
        self.loopback_only = loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if self.loopback_only and not is_loopback(_host_name(host)):
            await _refuse(send, 400, f"this server answers only on loopback host names, not {host!r}")
            return
        method = scope.get("method", "GET")
        if self.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = (query.get("token") or [""])[0]
            if given and scope.get("path") == "/" and method == "GET" and self._ok(given):
                await _set_cookie(send, given)
                return
            if not self._authorized(headers):
                await _refuse(
                    send,
                    401,
                    "this server needs its token: open the address `keel serve` printed (…/?token=…), "
                    "or send Authorization: Bearer <token>",
                )
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
        assert self.token is not None
        return hmac.compare_digest(given.encode(), self.token.encode())

    def _authorized(self, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and self._ok(auth[7:].strip()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and self._ok(morsel.value)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _set_cookie(send: Send, token: str) -> None:
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", b"/"), (b"set-cookie", cookie.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
