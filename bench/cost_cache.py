"""Anthropic prompt caching, simulated on request bodies: the prefix order is tools, system,
messages; each block with ``cache_control`` (at most 4) is a breakpoint; a breakpoint whose prefix
is shorter than the model's minimum cacheable length neither writes nor reads; a request reads the
longest prefix, ending at a block boundary at most 20 blocks before one of its breakpoints, that an
earlier request wrote at a breakpoint; it writes the prefixes at its breakpoints. Tokens are
bytes/4 of each block's JSON."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

LOOKBACK = 20  # blocks a cache lookup walks back from a breakpoint
MAX_BREAKPOINTS = 4


def canon(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Block:
    tokens: int
    breakpoint: bool
    digest: bytes  # of the prefix up to and including this block


def blocks_of(body: dict[str, Any]) -> list[Block]:
    """The request as the cache sees it: tools, then system blocks, then message blocks."""
    parts: list[tuple[str, bool]] = []
    for tool in body.get("tools") or []:
        parts.append((canon(tool), isinstance(tool, dict) and "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str) and system:
        parts.append((canon({"type": "text", "text": system}), False))
    elif isinstance(system, list):
        parts += [(canon(b), isinstance(b, dict) and "cache_control" in b) for b in system]
    for msg in body.get("messages") or []:
        content = msg.get("content")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for i, b in enumerate(items):
            text = (canon(msg.get("role")) if i == 0 else "") + canon(b)
            parts.append((text, isinstance(b, dict) and "cache_control" in b))
    h = hashlib.blake2b(digest_size=16)
    h.update(str(body.get("model")).encode())
    out = []
    for text, bp in parts:
        h.update(text.encode())
        h.update(b"\0")
        out.append(Block(max(1, len(text.encode()) // 4), bp, h.copy().digest()))
    return out


@dataclass
class Figures:
    requests: int = 0
    uncached: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    sizes: list[int] = field(default_factory=list)  # input tokens of each request

    def cost(self, prices: dict[str, float]) -> float:
        return (
            self.uncached * prices["input"]
            + self.cache_read * prices["cache_read"]
            + self.cache_write * prices["cache_write"]
            + self.output * prices["output"]
        ) / 1e6


def simulate(bodies: list[tuple[bytes, int]], min_tokens: int, count_from: int = 0) -> Figures:
    """The figures of ``bodies[count_from:]``; the requests before only warm the cache."""
    written: set[bytes] = set()
    fig = Figures()
    for n, (raw, out_tokens) in enumerate(bodies):
        if n == count_from:
            fig = Figures()
        body = json.loads(raw)
        blocks = blocks_of(body)
        total = sum(b.tokens for b in blocks)
        cum = [0]
        for b in blocks:
            cum.append(cum[-1] + b.tokens)
        bps = [i for i, b in enumerate(blocks) if b.breakpoint][:MAX_BREAKPOINTS]
        bps = [i for i in bps if cum[i + 1] >= min_tokens]  # below the minimum: not cached at all
        read_end = -1
        for p in bps:
            for j in range(p, max(-1, p - LOOKBACK), -1):
                if blocks[j].digest in written:
                    read_end = max(read_end, j)
                    break
        for p in bps:
            written.add(blocks[p].digest)
        read = cum[read_end + 1]
        upto = cum[bps[-1] + 1] if bps else 0
        fig.requests += 1
        fig.cache_read += read
        fig.cache_write += max(0, upto - read)
        fig.uncached += total - max(read, upto)
        fig.output += out_tokens
        fig.sizes.append(total)
    return fig
