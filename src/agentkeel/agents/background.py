"""Background agents: a Task with ``run_in_background`` runs beside the parent's turns.

Each one is a subagent with its transcript and meta file under the session folder, so
``keel agents list|logs|wait`` can read it during the run and after the parent exits. When it
finishes, a notice goes on the parent's bus, and the result is added to the parent's next
prompt. A session waits for its background agents when it closes (``KEEL_BACKGROUND_WAIT_S``,
default 600 s), then interrupts the ones still running (their transcripts stay valid).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import msgspec

from agentkeel.agents.defs import AgentDef
from agentkeel.agents.spawner import SubagentResult, SubagentSpawner
from agentkeel.core.events import Notice
from agentkeel.internal.env import KeelEnv

log = logging.getLogger(__name__)


class BackgroundAgents(msgspec.Struct):
    """The session's background agents (a service)."""

    tasks: dict[str, asyncio.Task[SubagentResult]] = msgspec.field(default_factory=dict)
    finished: list[SubagentResult] = msgspec.field(default_factory=list)  # not yet told to the model
    spawner: SubagentSpawner | None = None
    hurry: bool = False  # the session ends after an interrupt: stop them now, do not wait

    def take_finished(self) -> list[SubagentResult]:
        out, self.finished = self.finished, []
        return out

    async def aclose(self) -> None:
        pending = [t for t in self.tasks.values() if not t.done()]
        if not pending:
            return
        env = self.spawner.env if self.spawner is not None else None  # the session's environment
        wait = 0.0 if self.hurry else KeelEnv.of(env).background_wait_s
        _, still = await asyncio.wait(pending, timeout=wait) if wait > 0 else (set(), set(pending))
        for task in still:
            task.cancel()
        if still:
            await asyncio.wait(still, timeout=15)


def start_background(
    spawner: SubagentSpawner, agent: AgentDef, prompt: str, *, description: str = "", tool_use_id: str = ""
) -> str:
    agents = spawner.parent.services.get(BackgroundAgents)
    agents.spawner = spawner
    agent_id = "a" + uuid.uuid4().hex[:16]
    emit = spawner.parent.bus.emit

    async def run() -> SubagentResult:
        result = await spawner.run(
            agent, prompt, description=description, tool_use_id=tool_use_id, agent_id=agent_id, background=True
        )
        agents.finished.append(result)
        try:
            emit(Notice(level="info", message=f"background agent {agent_id} ({agent.name}) finished: {result.subtype}"))
        except Exception:
            log.exception("cannot report background agent %s", agent_id)
        return result

    agents.tasks[agent_id] = asyncio.ensure_future(run())
    return agent_id


def finished_context(results: list[SubagentResult]) -> str:
    lines = []
    for r in results:
        lines.append(
            f'<background-agent id="{r.agent_id}" type="{r.agent_type}" status="{r.subtype}">\n{r.text}\n'
            "</background-agent>"
        )
    return "Background agents finished since your last turn:\n" + "\n".join(lines)
