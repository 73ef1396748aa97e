"""An ACP client for the tests: the ACP SDK's own client side (``acp.spawn_agent_process``) driving
the real ``keel acp`` binary over stdio, against keel's scripted model on loopback."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, schema, spawn_agent_process, text_block

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, wire_env


class RecordingClient:
    """Records every session/update; answers permission requests from a list of option ids
    (``"cancelled"`` answers with the cancelled outcome); reads and writes files when asked."""

    def __init__(self, answers: list[str] | None = None, buffers: dict[str, str] | None = None) -> None:
        self.buffers = buffers  # an editor's open files (path -> unsaved text): offers fs/* when given
        self.reads: list[str] = []
        self.incoming: list[dict[str, Any]] = []  # every message from the agent, as the SDK read it
        self.writes: list[tuple[str, str]] = []
        self.updates: list[tuple[str, Any]] = []
        self.answers = list(answers or [])
        self.asked: list[tuple[schema.ToolCallUpdate, list[schema.PermissionOption]]] = []
        self.asked_event = asyncio.Event()
        self.hold: asyncio.Event | None = None  # set: permission answers wait for it

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self, session_id: str, tool_call: schema.ToolCallUpdate, options: list[schema.PermissionOption], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        self.asked.append((tool_call, options))
        self.asked_event.set()
        if self.hold is not None:
            await self.hold.wait()
        choice = self.answers.pop(0) if self.answers else "cancelled"
        if choice == "cancelled":
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected", option_id=choice))

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        if self.buffers is None:
            raise RequestError.method_not_found("fs/write_text_file")
        self.writes.append((path, content))
        self.buffers[path] = content  # the buffer changes; saving it is the user's business
        return schema.WriteTextFileResponse()

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        if self.buffers is None:
            raise RequestError.method_not_found("fs/read_text_file")
        self.reads.append(path)
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return schema.ReadTextFileResponse(content=self.buffers[path])

    def of(self, session_id: str, kind: str) -> list[Any]:
        return [u for sid, u in self.updates if sid == session_id and u.session_update == kind]

    def text(self, session_id: str) -> str:
        return "".join(u.content.text for u in self.of(session_id, "agent_message_chunk"))

    def tool_updates(self, session_id: str, tool_call_id: str) -> list[Any]:
        return [
            u
            for sid, u in self.updates
            if sid == session_id
            and u.session_update in ("tool_call", "tool_call_update")
            and u.tool_call_id == tool_call_id
        ]


@pytest.fixture
def acp_env() -> Callable[[FakeLLMServer], dict[str, str]]:
    def env(server: FakeLLMServer) -> dict[str, str]:
        return {**os.environ, **wire_env(server, "anthropic"), "KEEL_MAX_RETRIES": "0"}

    return env


@asynccontextmanager
async def keel_acp(
    client: RecordingClient, cwd: Path, env: dict[str, str], *args: str
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process]]:
    """``keel acp`` started by the SDK's client side, initialized."""

    def observe(event: Any) -> None:
        if event.direction == "incoming":
            client.incoming.append(event.message)

    async with spawn_agent_process(client, KEEL, "acp", *args, env=env, cwd=cwd, observers=[observe]) as (
        conn,
        proc,
    ):
        await conn.initialize(
            protocol_version=1,
            client_capabilities=schema.ClientCapabilities(
                fs=schema.FileSystemCapabilities(
                    read_text_file=client.buffers is not None, write_text_file=client.buffers is not None
                ),
                terminal=False,
            ),
            client_info=schema.Implementation(name="keel-tests", version="0"),
        )
        yield conn, proc


def prompt(text: str) -> list[Any]:
    return [text_block(text)]
