"""The per-session event stream behind `keel serve`'s SSE: replay by id, slow clients cut off
(never holding the others back), eviction announced, bursts batched into one write."""

from __future__ import annotations

import asyncio
import json

from agentkeel.ui.serve.stream import EventStream


def ids(chunks: list[str]) -> list[int]:
    return [int(line[4:]) for chunk in chunks for line in chunk.splitlines() if line.startswith("id: ")]


async def collect(stream: EventStream, after: int, until_id: int) -> list[str]:
    out: list[str] = []
    async for chunk in stream.follow(after):
        out.append(chunk)
        if until_id in ids([chunk]):
            break
    return out


def test_a_client_gets_exactly_the_frames_after_its_last_id_then_the_live_ones() -> None:
    async def run() -> list[str]:
        stream = EventStream()
        for n in range(10):
            stream.publish("text_delta", {"n": n})
        task = asyncio.create_task(collect(stream, 6, 12))
        await asyncio.sleep(0.01)
        stream.publish("text_delta", {"n": 10})
        stream.publish("idle", {})
        return await task

    chunks = asyncio.run(run())
    assert ids(chunks) == [7, 8, 9, 10, 11, 12]
    frame = next(c for c in chunks if "id: 12" in c)
    assert json.loads(frame.rsplit("data: ", 1)[1]) == {"seq": 12, "kind": "idle"}


def test_a_slow_client_is_cut_off_and_catches_up_by_reconnecting_while_a_fast_one_gets_everything() -> None:
    async def run() -> tuple[list[int], list[int], list[int]]:
        stream = EventStream(queue=5)
        slow = stream.follow(0)
        assert await slow.__anext__() == ": live\n\n"  # joined, then reads nothing for a while
        fast_task = asyncio.create_task(collect(stream, 0, 20))
        await asyncio.sleep(0.01)
        for n in range(20):
            stream.publish("text_delta", {"n": n})
            await asyncio.sleep(0)
        fast = ids(await fast_task)
        got = [chunk async for chunk in slow]  # what it had queued, then its end
        seen = ids(got)
        again = ids(await collect(stream, seen[-1] if seen else 0, 20))
        return fast, seen, again

    fast, seen, again = asyncio.run(run())
    assert fast == list(range(1, 21))
    assert len(seen) < 20  # cut off: its queue filled
    assert seen + again == list(range(1, 21))  # nothing lost across the reconnect


def test_a_client_whose_frames_were_evicted_is_told_to_reload() -> None:
    async def run() -> list[str]:
        stream = EventStream(buffer=5)
        for n in range(12):
            stream.publish("text_delta", {"n": n})
        out: list[str] = []
        async for chunk in stream.follow(2):
            out.append(chunk)
            if chunk.startswith(": live"):
                break
        return out

    chunks = asyncio.run(run())
    assert '"kind":"reset"' in chunks[0]
    assert ids(chunks[1:]) == [8, 9, 10, 11, 12]


def test_a_burst_goes_to_a_client_in_one_write_and_close_ends_every_follower() -> None:
    async def run() -> tuple[list[str], list[str]]:
        stream = EventStream()
        follower = stream.follow(0)
        assert await follower.__anext__() == ": live\n\n"
        for n in range(50):
            stream.publish("text_delta", {"n": n})
        burst = await follower.__anext__()
        stream.close()
        rest = [c async for c in follower]
        return [burst], rest

    burst, rest = asyncio.run(run())
    assert ids(burst) == list(range(1, 51))
    assert rest == []
