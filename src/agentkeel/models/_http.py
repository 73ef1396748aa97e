"""The HTTP side of the wire clients: one httpx connection pool per session (keep-alive across
turns, HTTP/1.1, CA bundles from the environment), a POST whose streamed answer comes back as
server-sent events, and every transport failure turned into a :class:`ProviderError`.

httpx is the one HTTP stack (#13, #32), imported at the first request. Loading the CA bundle
(60-130 ms here) starts on a thread when the session is created, so it overlaps the rest of
startup (OpenSSL parses the bundle without holding the GIL); an ``http://`` endpoint skips it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import aclosing, contextmanager
from typing import TYPE_CHECKING, Any

import msgspec

from agentkeel._version import __version__
from agentkeel.core.provider import ProviderError
from agentkeel.internal.lazy import lazy_module, warm_now
from agentkeel.models._body import encode_json as encode_json
from agentkeel.models._sse import SSEDecoder, SSEEvent
from agentkeel.models.endpoints import CONNECT_TIMEOUT_S

if TYPE_CHECKING:
    import ssl

    import httpx

    from agentkeel.models import _errors
else:  # what a failure is reported with: loaded at the first failure (agentkeel.internal.lazy)
    _errors = lazy_module("agentkeel.models._errors", globals(), "_errors")

USER_AGENT = f"agentkeel/{__version__}"
WHOLE_BODY = "keel.whole-body"  # the event a 200 JSON answer (a server that ignored stream: true) arrives as


class Target(msgspec.Struct, frozen=True):
    """One request's destination and what to say when it fails."""

    url: str
    endpoint: str  # the base URL, as the user configured it
    model: str
    key_hint: str  # the variable to name when the credentials are refused
    timeout_s: float


class TlsContext:
    """The TLS settings httpx would build (SSL_CERT_FILE, SSL_CERT_DIR, else certifi's bundle),
    built on a thread from the moment the session exists."""

    def __init__(self, base_url: str, environ: Mapping[str, str]) -> None:
        import ssl

        self._context: ssl.SSLContext | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if not base_url.startswith("https://") and not any(
            environ.get(name, "").startswith("https://") for name in _PROXY_VARIABLES
        ):
            # TLS is never used for this endpoint: a context with no CA at all, which refuses any
            # certificate should TLS come up after all (fails closed)
            self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            return
        cafile, capath = environ.get("SSL_CERT_FILE") or None, environ.get("SSL_CERT_DIR") or None
        if not cafile and not capath:
            import certifi

            cafile = certifi.where()
        self._thread = threading.Thread(target=self._build, args=(cafile, capath), name="keel-tls", daemon=True)
        self._thread.start()

    def _build(self, cafile: str | None, capath: str | None) -> None:
        import ssl

        try:
            self._context = ssl.create_default_context(cafile=cafile, capath=capath)
        except BaseException as e:  # re-raised where the context is needed
            self._error = e

    def get(self) -> ssl.SSLContext:
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._context is not None
        return self._context


_PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def _client_needed(base_url: str, environ: Mapping[str, str]) -> bool:
    """Whether httpx's client has work to do for this endpoint: proxies (the environment's, or the
    system's on macOS and Windows) or credentials in the URL (basic auth)."""
    if sys.platform in ("darwin", "win32") or "@" in base_url.split("://", 1)[-1].split("/", 1)[0]:
        return True
    return any(environ.get(name, "").strip() for name in _PROXY_VARIABLES)


class HttpSession:
    """Owns the connection pool of one provider (one session). ``aclose`` ends it.

    A request goes straight to the client's transport (``AsyncHTTPTransport``, the pool
    the client itself would use) unless the client has work to do: a proxy from the environment (or
    the system's, on macOS and Windows) or credentials in the URL. What the client adds per request
    besides (cookie jar upkeep, auth and redirect loops, header merging and URL parsing per call) is
    nothing keel uses and was about a quarter of a request's CPU; the headers, URL and timeouts are
    built once per target instead (the bytes on the wire are the client's: its default headers,
    ``tests/test_first_request.py`` compares)."""

    def __init__(self, base_url: str) -> None:
        self._client: httpx.AsyncClient | None = None
        self._direct: httpx.AsyncHTTPTransport | None = None
        self._httpx: Any = None
        self._base_url = base_url
        self._tls = TlsContext(base_url, os.environ)
        self._prepared: dict[tuple[Any, ...], tuple[Any, Any, dict[str, Any]]] = {}

    def _get(self, timeout_s: float) -> httpx.AsyncClient:
        if self._client is None:
            httpx = import_httpx()
            self._httpx = httpx
            try:
                tls = self._tls.get()
            except (OSError, ValueError) as e:
                raise ProviderError("connection", f"cannot load the CA certificates for TLS: {e}") from None
            with without_unused():  # the transport imports httpcore
                # a client given its transport takes no proxies from the environment: only without them
                if not _client_needed(self._base_url, os.environ):
                    self._direct = httpx.AsyncHTTPTransport(verify=tls, trust_env=True)
                self._client = httpx.AsyncClient(
                    timeout=httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s)),
                    headers={"user-agent": USER_AGENT},
                    verify=tls,
                    trust_env=True,
                    follow_redirects=False,
                    transport=self._direct,
                )
        return self._client

    def _prepare(self, client: httpx.AsyncClient, target: Target, headers: dict[str, str]) -> tuple[Any, Any, Any]:
        """The URL, headers and timeouts of a request to ``target``, built once: what
        ``client.build_request`` would build on each call."""
        key = (target.url, target.timeout_s, *headers.items())
        found = self._prepared.get(key)
        if found is None:
            httpx = self._httpx
            merged = httpx.Headers(client.headers)  # the client's defaults (Accept-Encoding, Connection...)
            merged.update({"content-type": "application/json", "accept": "application/json", **headers})
            timeout = httpx.Timeout(target.timeout_s, connect=min(CONNECT_TIMEOUT_S, target.timeout_s))
            if len(self._prepared) > 32:  # a host that changes its headers per request: no unbounded memo
                self._prepared.clear()
            found = self._prepared[key] = (httpx.URL(target.url), merged, {"timeout": timeout.as_dict()})
        return found

    async def post_sse(self, target: Target, headers: dict[str, str], body: bytes) -> AsyncGenerator[SSEEvent, None]:
        """POST ``body`` and yield the server-sent events of the answer. An error status, a transport
        failure, a timeout or a 200 that carries an error raise :class:`ProviderError`."""
        client = self._get(target.timeout_s)
        httpx = self._httpx
        url, sent, extensions = self._prepare(client, target, headers)
        request = httpx.Request("POST", url, content=body, headers=sent, extensions=extensions)
        try:
            if self._direct is not None:
                response = await self._direct.handle_async_request(request)
                response.request = request
            else:
                response = await client.send(request, stream=True)
            warm_now()  # the model is answering: import what the first tool call needs meanwhile
        except httpx.TimeoutException as e:
            if isinstance(e, httpx.ConnectTimeout):
                raise _errors.unreachable(target.endpoint, "connection timed out") from None
            raise _errors.timed_out(target.endpoint, target.timeout_s, waiting_for="response") from None
        except httpx.ConnectError as e:
            raise _errors.unreachable(target.endpoint, _detail(e)) from None
        except httpx.ProxyError as e:
            raise _errors.unreachable(target.endpoint, f"proxy: {_detail(e)}") from None
        except httpx.LocalProtocolError:  # h11 refused to send it; its message quotes the header (a credential)
            raise ProviderError(
                "connection",
                f"cannot send the request to {target.endpoint}: a header value is not valid HTTP"
                " (a line break in a key, a token or a custom header?)",
            ) from None
        except httpx.TransportError as e:  # closed or reset before any answer (a stale keep-alive connection...)
            raise ProviderError("connection", f"{target.endpoint} closed the connection: {_detail(e)}") from None
        try:
            async with aclosing(self._events(response, target)) as events:
                async for event in events:
                    yield event
        except httpx.TimeoutException:
            raise _errors.timed_out(target.endpoint, target.timeout_s, waiting_for="data") from None
        except (httpx.TransportError, httpx.DecodingError) as e:
            raise ProviderError(
                "stream_broken", f"the response stream from {target.endpoint} broke: {_detail(e)}"
            ) from None
        finally:
            await response.aclose()

    async def _events(self, response: httpx.Response, target: Target) -> AsyncGenerator[SSEEvent, None]:
        if response.status_code >= 300:
            raw = await response.aread()
            raise _errors.from_response(
                response.status_code,
                raw,
                response.headers,
                endpoint=target.endpoint,
                model=target.model,
                key_hint=target.key_hint,
            )
        if "json" in response.headers.get("content-type", ""):
            yield _whole_body(await response.aread(), target)
            return
        decoder = SSEDecoder()
        async for piece in response.aiter_bytes():
            for event in decoder.feed(piece):
                yield event
        for event in decoder.close():
            yield event

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


# Optional imports of httpx's stack that keel never uses, each dearer than httpx itself where it is
# installed: httpx/__init__ imports its command-line client (click, rich, pygments: 100-140 ms
# here) only to offer ``httpx.main``, and httpcore imports trio (200-500 ms; selenium, for one,
# installs it) only to support trio event loops. Both fall back when the import fails (a stub
# ``main``; ``trio = None``), so they are marked absent while httpx is imported and the client
# built (httpcore loads then); each can still be imported afterwards. keel never calls
# ``httpx.main``. trio is left out only in a process of keel's own (``standalone``): an
# application hosting keel through the SDK may run httpx on trio itself.
_UNUSED = ["httpx._main"]


def standalone() -> None:
    """This process is keel's own (the ``keel`` command): nothing in it runs on trio."""
    if "trio" not in _UNUSED:
        _UNUSED.append("trio")


@contextmanager
def without_unused() -> Iterator[None]:
    blocked = [name for name in _UNUSED if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_httpx() -> Any:
    """httpx, without the parts of its stack keel does not use (``_UNUSED``)."""
    loaded = sys.modules.get("httpx")
    if loaded is not None:
        return loaded
    with without_unused():
        import httpx
    return httpx


def _whole_body(raw: bytes, target: Target) -> SSEEvent:
    text = raw.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
    except ValueError:
        raise ProviderError(
            "stream_broken", f"{target.endpoint} answered with malformed JSON: {_errors.one_line(text, 120)}"
        ) from None
    if isinstance(payload, dict) and payload.get("error") is not None:
        raise _errors.from_stream_error(payload, endpoint=target.endpoint)
    return SSEEvent(WHOLE_BODY, text)


def _detail(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text}: {cause}"
    return _errors.one_line(text, 160)


def parse_data(event: SSEEvent, endpoint: str) -> Any:
    try:
        return json.loads(event.data)
    except ValueError:
        raise ProviderError(
            "stream_broken", f"{endpoint} sent an event that is not JSON: {_errors.one_line(event.data, 120)}"
        ) from None
