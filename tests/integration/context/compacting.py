"""What the compaction tests share: the mark of keel's summary request, and a script of Reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkeel.context.compaction import COMPACT_MARK as COMPACT


def reads(project: Path, n: int, size: int = 40) -> list[Any]:
    """``n`` scripted steps, each a Read of a new file of ``size`` lines under ``project/data``."""
    data = project / "data"
    data.mkdir(exist_ok=True)
    steps: list[Any] = []
    for i in range(n):
        f = data / f"f{i}.txt"
        f.write_text("\n".join(f"line {i}.{k} " + "words " * 12 for k in range(size)))
        steps.append({"text": f"Reading {i}.", "tool_calls": [{"name": "Read", "input": {"file_path": str(f)}}]})
    return steps


__all__ = ["COMPACT", "reads"]
