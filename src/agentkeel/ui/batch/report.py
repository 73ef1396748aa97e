"""``keel batch report OUT.jsonl``: what a batch did, as a table and as an HTML page."""

from __future__ import annotations

import html
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from agentkeel.ui.batch.results import Result, recorded


@dataclass
class Summary:
    results: list[Result]
    by_status: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.by_status = Counter(r.status for r in self.results)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def success_rate(self) -> float:
        return self.by_status["success"] / self.total if self.total else 0.0

    @property
    def cost(self) -> float:
        return sum(r.cost_usd for r in self.results)

    @property
    def tokens(self) -> tuple[int, int]:
        return sum(r.input_tokens for r in self.results), sum(r.output_tokens for r in self.results)

    def durations(self) -> dict[str, float]:
        d = sorted(r.duration_s for r in self.results)
        if not d:
            return {}
        q = statistics.quantiles(d, n=100, method="inclusive") if len(d) > 1 else [d[0]] * 99
        return {"p50": q[49], "p90": q[89], "p99": q[98], "max": d[-1], "mean": statistics.fmean(d)}

    def slowest(self, n: int = 5) -> list[Result]:
        return sorted(self.results, key=lambda r: r.duration_s, reverse=True)[:n]

    def failed(self) -> list[Result]:
        return [r for r in self.results if r.status != "success"]


def summarise(path: Path) -> Summary:
    return Summary(list(recorded(path).values()))


def render_text(s: Summary) -> str:
    tin, tout = s.tokens
    lines = [
        f"tasks       {s.total}   " + "  ".join(f"{k} {v}" for k, v in sorted(s.by_status.items())),
        f"success     {s.success_rate:.1%}",
        f"cost        ${s.cost:.4f}",
        f"tokens      {tin:,} in / {tout:,} out",
    ]
    d = s.durations()
    if d:
        lines.append("duration    " + "  ".join(f"{k} {v:.2f}s" for k, v in d.items()))
    if s.results:
        lines.append("slowest     " + ", ".join(f"{r.id} ({r.duration_s:.2f}s)" for r in s.slowest()))
    bad = s.failed()
    if bad:
        lines.append(f"not successful ({len(bad)}):")
        lines += [f"  {r.id:<20} {r.status:<9} {(r.error or r.result)[:100]}" for r in bad[:50]]
        if len(bad) > 50:
            lines.append(f"  ... and {len(bad) - 50} more")
    return "\n".join(lines)


_CSS = (
    "body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}"
    ".success{color:#176c2d}.error,.timeout{color:#b00020}.cancelled{color:#8a6d00}"
    ".bar{display:inline-block;height:10px;background:#4a7bd0}"
)


def render_html(s: Summary, title: str) -> str:
    e = html.escape
    tin, tout = s.tokens
    d = s.durations()
    head = [
        ("tasks", str(s.total)),
        ("success rate", f"{s.success_rate:.1%}"),
        ("cost", f"${s.cost:.4f}"),
        ("tokens", f"{tin:,} in / {tout:,} out"),
        *((f"duration {k}", f"{v:.2f} s") for k, v in d.items()),
        *((f"status {k}", str(v)) for k, v in sorted(s.by_status.items())),
    ]
    longest = max((r.duration_s for r in s.results), default=0.0) or 1.0
    rows = "".join(
        f"<tr><td>{e(r.id)}</td><td class='{r.status}'>{r.status}</td>"
        f"<td><span class='bar' style='width:{int(120 * r.duration_s / longest)}px'></span> {r.duration_s:.2f} s</td>"
        f"<td>{r.turns}</td><td>${r.cost_usd:.4f}</td><td>{r.input_tokens:,}/{r.output_tokens:,}</td>"
        f"<td><code>{e(r.session_id)}</code></td><td>{e((r.error or r.result)[:300])}</td></tr>"
        for r in sorted(s.results, key=lambda r: (r.status == "success", -r.duration_s))
    )
    summary = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in head)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{e(title)}</h1><table>{summary}</table>"
        "<table><tr><th>task</th><th>status</th><th>duration</th><th>turns</th><th>cost</th><th>tokens</th>"
        f"<th>session</th><th>result / error</th></tr>{rows}</table></body></html>\n"
    )
