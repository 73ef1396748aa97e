"""What a turn costs the harness at turn 400 is what it cost at turn 100: growth ratios measured
within one 400-turn session, in counted work and in CPU time, never against a wall clock.

Each turn reads a different 9 kB file (the long-session benchmark's session, each file the same
length), so by the end the session log holds 400 tool results and the memory store as many
observations, while compaction keeps the model's window bounded. It does so in cycles (a summary
every few turns: 9 kB turns in the scripted model's 32k window, about 4 turns a cycle by
docs/context.md's measurement), so the turns compared are whole cycles between summaries: the
second and the last complete one. Anything done
per turn over the whole session (the log folded again, every message re-serialised or re-redacted,
a list of everything seen scanned) makes a late turn cost a multiple of an early one. Measured:

- Python function calls of the event-loop thread per turn (``sys.setprofile``): counted, so the
  load of other processes does not move it; a flat session measures 0.99-1.00.
- Bytes appended to the session log per turn (serialise only what is new): 1.0000.
- CPU time of the process per turn, the median (C-level work a call count does not see: a growing
  JSON dump is one call); 0.8-1.1 here, a loose bound for a shared machine.

Checked by putting growth back: the session writer folding its log at each request (as an index
refreshed per turn would) fails the calls (1.81) and CPU (2.26) ratios; the writer adding a line
listing every entry so far at each request fails the log-bytes ratio (1.69).
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from agentkeel import Event, RequestStarted, Runtime, RuntimeOptions

TURNS = 400


def _source(i: int) -> str:
    """9 kB of Python, the same length for every i: a late turn handles as many bytes as an early one."""
    return "".join(f"def f{j:03}(x):\n    return x + {j:03}  # file {i:04}\n\n" for j in range(300))


async def test_a_late_turn_costs_what_an_early_one_did(project: Path, tmp_path: Path) -> None:
    steps: list[object] = []
    for i in range(TURNS):
        path = project / f"m{i}.py"
        path.write_text(_source(i))
        steps.append({"text": f"step {i}", "tool_calls": [{"name": "Read", "input": {"file_path": str(path)}}]})
    steps.append("done")
    script = tmp_path / "long.json"
    script.write_text(json.dumps({"steps": steps}))

    calls = [0]
    marks: list[tuple[int, float, int]] = []  # per request: calls so far, CPU so far, log bytes so far
    cycles: list[int] = []  # the request index after each compaction to a summary
    rt = Runtime.create(
        RuntimeOptions(
            cwd=project, model=f"scripted:{script}", max_turns=TURNS + 5, permission_mode="bypassPermissions"
        )
    )
    log = rt.session_path

    def on_event(event: Event) -> None:
        if isinstance(event, RequestStarted):
            size = log.stat().st_size if log.exists() else 0
            marks.append((calls[0], time.process_time(), size))
        elif event.type == "compaction" and getattr(event, "stage", "") == "summary":
            cycles.append(len(marks))

    def count(frame: FrameType, what: str, arg: Any) -> None:
        if what == "call" or what == "c_call":
            calls[0] += 1

    rt.bus.subscribe(on_event)
    sys.setprofile(count)
    try:
        result = await rt.run("go")
    finally:
        sys.setprofile(None)
        await rt.aclose()
    assert result.subtype == "success" and result.num_turns == TURNS + 1
    # Compaction runs in cycles (a summary every few turns); turns are compared over whole cycles,
    # the second and the last complete one.
    assert len(cycles) >= 4, f"expected several compaction cycles in {TURNS} turns, got {cycles}"
    early, late = (cycles[1], cycles[2]), (cycles[-2], cycles[-1])

    def per_turn(field: int, span: tuple[int, int]) -> float:
        a, b = marks[span[0]], marks[span[1]]
        return (b[field] - a[field]) / (span[1] - span[0])

    def cpu_median(span: tuple[int, int]) -> float:
        window = marks[span[0] : span[1] + 1]
        return statistics.median(b[1] - a[1] for a, b in itertools.pairwise(window))

    ratios = {
        "calls": per_turn(0, late) / per_turn(0, early),
        "log bytes": per_turn(2, late) / per_turn(2, early),
        "cpu": cpu_median(late) / cpu_median(early),
    }
    print(
        f"per turn over turns {early} / {late}: calls {per_turn(0, early):.0f} / {per_turn(0, late):.0f}, "
        f"log {per_turn(2, early):.0f} / {per_turn(2, late):.0f} B, "
        f"cpu {cpu_median(early) * 1000:.2f} / {cpu_median(late) * 1000:.2f} ms; ratios {ratios}"
    )
    assert ratios["calls"] < 1.05, ratios
    assert ratios["log bytes"] < 1.05, ratios
    assert ratios["cpu"] < 1.6, ratios
