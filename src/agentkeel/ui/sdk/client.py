"""``query()`` and :class:`KeelSDKClient`: the Claude Agent SDK's entry points, on either transport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Protocol

from agentkeel.core.types import Message as KeelMessage
from agentkeel.protocol import stream_json
from agentkeel.ui.sdk.types import KeelAgentOptions, KeelSDKError, Message, ResultMessage, parse_message


class Transport(Protocol):
    lines: Any  # asyncio.Queue[dict | None]: output lines, None at the end

    async def connect(self) -> None: ...
    async def send(self, message: KeelMessage) -> None: ...
    async def interrupt(self) -> None: ...
    async def set_permission_mode(self, mode: str) -> None: ...
    async def set_model(self, model: str | None) -> None: ...
    async def close(self) -> None: ...


def make_transport(options: KeelAgentOptions) -> Transport:
    if options.transport == "in-process":
        from agentkeel.ui.sdk.inprocess import InProcessTransport

        return InProcessTransport(options)
    if options.transport == "subprocess":
        from agentkeel.ui.sdk.spawned import SubprocessTransport

        return SubprocessTransport(options)
    raise KeelSDKError(f"transport must be 'in-process' or 'subprocess', not {options.transport!r}")


def _user_message(item: str | dict[str, Any]) -> KeelMessage:
    if isinstance(item, str):
        return KeelMessage.user(item)
    try:
        decoded = stream_json.decode(json.dumps(item))
    except stream_json.ProtocolError as e:
        raise KeelSDKError(f"not a user message: {e}") from None
    if not isinstance(decoded, stream_json.UserInput):
        raise KeelSDKError("only user messages can be sent as a prompt")
    return decoded.message


class KeelSDKClient:
    """A conversation: ``connect``, then ``query`` and ``receive_response`` as often as needed."""

    def __init__(self, options: KeelAgentOptions | None = None) -> None:
        self.options = options or KeelAgentOptions()
        self._transport: Transport | None = None

    async def connect(self, prompt: str | AsyncIterable[dict[str, Any]] | None = None) -> None:
        if self._transport is not None:
            return
        transport = make_transport(self.options)
        await transport.connect()
        self._transport = transport
        if prompt is not None:
            await self.query(prompt)

    def _live(self) -> Transport:
        if self._transport is None:
            raise KeelSDKError("not connected: call connect() (or use `async with`) first")
        return self._transport

    async def query(self, prompt: str | AsyncIterable[dict[str, Any]], session_id: str = "default") -> None:
        transport = self._live()
        if isinstance(prompt, str):
            await transport.send(_user_message(prompt))
            return
        async for item in prompt:
            await transport.send(_user_message(item))

    async def receive_messages(self) -> AsyncIterator[Message]:
        transport = self._live()
        while True:
            line = await transport.lines.get()
            if line is None:
                await transport.lines.put(None)  # later readers see the end too
                return
            message = parse_message(line)
            if message is not None:
                yield message

    async def receive_response(self) -> AsyncIterator[Message]:
        """Messages up to and including the next ResultMessage."""
        async for message in self.receive_messages():
            yield message
            if isinstance(message, ResultMessage):
                return

    async def interrupt(self) -> None:
        await self._live().interrupt()

    async def set_permission_mode(self, mode: str) -> None:
        await self._live().set_permission_mode(mode)

    async def set_model(self, model: str | None = None) -> None:
        await self._live().set_model(model)

    async def disconnect(self) -> None:
        if self._transport is not None:
            transport, self._transport = self._transport, None
            await transport.close()

    async def __aenter__(self) -> KeelSDKClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()


ClaudeSDKClient = KeelSDKClient


async def query(
    *, prompt: str | AsyncIterable[dict[str, Any]], options: KeelAgentOptions | None = None
) -> AsyncIterator[Message]:
    """One prompt to a stop: every message of the run, the ResultMessage last."""
    client = KeelSDKClient(options)
    await client.connect()
    try:
        items = [prompt] if isinstance(prompt, str) else [item async for item in prompt]
        for item in items:
            await client._live().send(_user_message(item))
        results = 0
        async for message in client.receive_messages():
            yield message
            if isinstance(message, ResultMessage):
                results += 1
                if results == len(items):
                    return
    finally:
        await client.disconnect()
