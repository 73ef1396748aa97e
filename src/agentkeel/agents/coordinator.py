"""The coordinator (``/coordinate TASK``): plan -> a graph of subtasks -> parallel subagents -> merge.

1. A planning subagent (the read-only ``Plan`` type) answers with the graph as JSON::

       {"tasks": [{"id": "api", "prompt": "...", "depends_on": [], "agent": "general-purpose",
                   "writes": true}, ...]}

2. The graph is checked (unique ids, known dependencies, no cycle): a bad plan is one clear error.
3. Every task whose dependencies have finished runs at once, in its own subagent (the spawner's
   concurrency limit applies); its prompt carries the reports of the tasks it depends on. A task
   that ``writes`` runs in its own git worktree when the project is a git repository, and its
   branch is merged back when it succeeds. A failed task skips the tasks that depend on it.
4. The reports are merged into one summary. Each step is a :class:`CoordinatorProgress` event
   on the session's bus (and in its transcript).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

from agentkeel.agents.spawner import SubagentResult, SubagentSpawner
from agentkeel.core.events import CoordinatorProgress as CoordinatorProgress  # declared with every persisted type
from agentkeel.core.handle import SessionHandle

PLANNER_PROMPT = """Break the following goal into subtasks for parallel agents.
Answer with JSON only, in this shape:
{{"tasks": [{{"id": "short-id", "prompt": "complete instructions for one agent", "depends_on": ["other-id"],
"agent": "general-purpose", "writes": true}}]}}
Make tasks independent where you can (they run at the same time); use depends_on only when a task needs another's
result. Set "writes" when the task changes files.

Goal: {goal}"""


@dataclass
class Subtask:
    id: str
    prompt: str
    depends_on: tuple[str, ...] = ()
    agent: str = "general-purpose"
    writes: bool = False
    status: str = "pending"
    result: SubagentResult | None = None


class PlanError(ValueError):
    pass


def _json_object(text: str) -> Any:
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    candidate = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1]
    try:
        return json.loads(candidate)
    except ValueError:
        raise PlanError("the plan is not valid JSON") from None


def parse_plan(text: str) -> list[Subtask]:
    data = _json_object(text)
    raw = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(raw, list) or not raw:
        raise PlanError('the plan has no "tasks" list')
    tasks: list[Subtask] = []
    for n, item in enumerate(raw):
        if not isinstance(item, dict) or not str(item.get("prompt") or "").strip():
            raise PlanError(f"task {n + 1} has no prompt")
        deps = item.get("depends_on") or []
        if not isinstance(deps, list):
            raise PlanError(f"task {n + 1}: depends_on must be a list of ids")
        tasks.append(
            Subtask(
                id=str(item.get("id") or f"t{n + 1}"),
                prompt=str(item["prompt"]),
                depends_on=tuple(str(d) for d in deps),
                agent=str(item.get("agent") or "general-purpose"),
                writes=bool(item.get("writes", False)),
            )
        )
    check_graph(tasks)
    return tasks


def check_graph(tasks: list[Subtask]) -> None:
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise PlanError("two tasks share an id")
    known = set(ids)
    for t in tasks:
        missing = [d for d in t.depends_on if d not in known]
        if missing:
            raise PlanError(f"task {t.id} depends on unknown task(s) {', '.join(missing)}")
    state: dict[str, int] = {}
    by_id = {t.id: t for t in tasks}

    def visit(tid: str, path: list[str]) -> None:
        if state.get(tid) == 2:
            return
        if state.get(tid) == 1:
            raise PlanError("the tasks depend on each other in a cycle: " + " -> ".join([*path, tid]))
        state[tid] = 1
        for dep in by_id[tid].depends_on:
            visit(dep, [*path, tid])
        state[tid] = 2

    for t in tasks:
        visit(t.id, [])


@dataclass
class Coordinator:
    spawner: SubagentSpawner
    use_worktrees: bool = True
    tasks: list[Subtask] = field(default_factory=list)

    def _emit(self, task_id: str, status: str, detail: str = "") -> None:
        self.spawner.parent.bus.emit(CoordinatorProgress(task_id=task_id, status=status, detail=detail))

    async def plan(self, goal: str) -> list[Subtask]:
        planner = self.spawner.catalog.get("Plan") or self.spawner.catalog.get("general-purpose")
        assert planner is not None
        result = await self.spawner.run(planner, PLANNER_PROMPT.format(goal=goal), description="coordinator plan")
        if result.is_error:
            raise PlanError(f"planning failed: {result.text}")
        tasks = parse_plan(result.text)
        self._emit("", "planned", f"{len(tasks)} tasks")
        return tasks

    async def execute(self, tasks: list[Subtask]) -> list[Subtask]:
        self.tasks = tasks
        by_id = {t.id: t for t in tasks}
        running: dict[asyncio.Task[SubagentResult], Subtask] = {}
        while True:
            for t in tasks:
                if t.status != "pending":
                    continue
                deps = [by_id[d] for d in t.depends_on]
                if any(d.status in ("failed", "skipped") for d in deps):
                    t.status = "skipped"
                    self._emit(t.id, "skipped", "a task it depends on failed")
                elif all(d.status == "finished" for d in deps):
                    t.status = "running"
                    self._emit(t.id, "started")
                    running[asyncio.ensure_future(self._run_one(t, deps))] = t
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                t = running.pop(future)
                try:
                    t.result = future.result()
                    t.status = "finished" if not t.result.is_error else "failed"
                except Exception as exc:
                    t.status = "failed"
                    self._emit(t.id, "failed", str(exc))
                    continue
                self._emit(t.id, t.status, t.result.text[:200])
        return tasks

    async def _run_one(self, task: Subtask, deps: list[Subtask]) -> SubagentResult:
        agent = self.spawner.catalog.get(task.agent) or self.spawner.catalog.get("general-purpose")
        assert agent is not None
        prompt = task.prompt
        if deps:
            reports = "\n\n".join(f'<task id="{d.id}">\n{d.result.text if d.result else ""}\n</task>' for d in deps)
            prompt += f"\n\nReports of the tasks this one builds on:\n{reports}"
        if task.writes and self.use_worktrees:
            from agentkeel.agents.worktree import WorktreeError, run_in_worktree

            try:
                result, merged = await run_in_worktree(self.spawner, agent, prompt, description=task.id, merge=True)
            except WorktreeError as e:
                self._emit(task.id, "worktree", f"running in place: {e}")
            else:
                if merged:
                    self._emit(task.id, "merged", merged)
                return result
        return await self.spawner.run(agent, prompt, description=task.id)

    async def run(self, goal: str) -> str:
        tasks = await self.plan(goal)
        await self.execute(tasks)
        self._emit("", "done")
        return summary(tasks)


def summary(tasks: list[Subtask]) -> str:
    lines = [f"Coordinated {len(tasks)} tasks:"]
    for t in tasks:
        text = t.result.text.strip() if t.result else ""
        lines.append(f"\n## {t.id} ({t.status})\n{text}")
    return "\n".join(lines)


async def coordinate_command(session: SessionHandle, args: str) -> str:
    from agentkeel.commands.registry import CommandFailed

    if not args.strip():
        raise CommandFailed("/coordinate needs a goal: /coordinate <what to build>")
    spawner = session.agent.services.find(SubagentSpawner)
    if spawner is None:
        raise CommandFailed("subagents are off in this session")
    try:
        return await Coordinator(spawner).run(args.strip())
    except PlanError as e:
        raise CommandFailed(f"/coordinate: {e}") from None
