"""A turn costs the harness the same at turn 200 as at turn 20: a growth ratio measured within
one session (not a wall-clock limit). Everything keel does per turn is in it: the view, the
permission check, the tool, redaction (result guard and the bus), the session log, capture."""

from __future__ import annotations

import itertools
import json
import statistics
import time
from pathlib import Path

from agentkeel import Event, RequestStarted, Runtime, RuntimeOptions


async def test_per_turn_harness_cost_does_not_grow_with_the_session(project: Path) -> None:
    turns = 220
    steps: list[object] = []
    for i in range(turns):
        path = project / f"m{i}.py"
        path.write_text("".join(f"def f{j}(x):\n    return x + {j}  # file {i}\n\n" for j in range(150)))
        steps.append({"text": f"step {i}", "tool_calls": [{"name": "Read", "input": {"file_path": str(path)}}]})
    steps.append("done")
    script = project.parent / "long.json"
    script.write_text(json.dumps({"steps": steps}))
    stamps: list[float] = []

    def on_event(event: Event) -> None:
        if isinstance(event, RequestStarted):
            stamps.append(time.perf_counter())

    rt = Runtime.create(RuntimeOptions(cwd=project, model=f"scripted:{script}", max_turns=turns + 5))
    rt.bus.subscribe(on_event)
    try:
        result = await rt.run("go")
    finally:
        await rt.aclose()
    assert result.subtype == "success" and result.num_turns == turns + 1
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    early, late = statistics.median(gaps[10:60]), statistics.median(gaps[-50:])
    assert late / early < 2.5, (early, late)
