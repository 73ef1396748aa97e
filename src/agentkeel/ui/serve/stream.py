"""One session's event stream for any number of web clients: numbered frames, replay, fan-out.

Each event is encoded once, as a ready SSE frame (``id: N`` / ``data: JSON``), and
kept in a bounded buffer; a client that (re)connects names the last id it saw (``Last-Event-ID``)
and gets everything after it, then the live tail. A client too slow to keep up is cut off (its
queue is bounded) and reconnects with its last id: a slow browser never holds the session or
the other clients back. A client whose last id fell out of the buffer gets a ``reset`` frame and
reloads the transcript from the session log.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from agentkeel.internal import jsonc

BUFFER = 50_000  # frames kept for late clients (text deltas included)
QUEUE = 10_000  # frames a client may fall behind before it is cut off
LAGGED = "\x00lagged"  # the queue's end marker for a cut-off client
PING_S = 15.0
BATCH = 512  # frames joined into one write when a client's queue has several


def frame(seq: int, kind: str, data: dict[str, Any]) -> str:
    """One SSE frame. The kind is inside the data (``{"seq", "kind", ...}``), not an ``event:`` line, so
    a browser's ``onmessage`` sees every kind, including event types registered by other subsystems."""
    payload = jsonc.dumps({"seq": seq, "kind": kind, **data})
    return f"id: {seq}\ndata: {payload}\n\n"


class EventStream:
    def __init__(self, buffer: int = BUFFER, queue: int = QUEUE) -> None:
        self._frames: deque[tuple[int, str]] = deque(maxlen=buffer)
        self._clients: set[asyncio.Queue[str]] = set()
        self._queue_size = queue
        self.seq = 0
        self.closed = False

    @property
    def clients(self) -> int:
        return len(self._clients)

    def publish(self, kind: str, data: dict[str, Any]) -> int:
        """Number, encode once, keep, and hand to every connected client. Returns the id."""
        self.seq += 1
        text = frame(self.seq, kind, data)
        self._frames.append((self.seq, text))
        for queue in tuple(self._clients):
            if queue.qsize() >= self._queue_size:  # too slow: cut off; it reconnects with its last id
                self._clients.discard(queue)
                queue.put_nowait(LAGGED)  # the one place kept free for it: no frame is dropped
            else:
                queue.put_nowait(text)
        return self.seq

    def since(self, after: int) -> list[str] | None:
        """The frames after id ``after``, or None when some of them are no longer kept."""
        if after >= self.seq:
            return []
        if not self._frames or self._frames[0][0] > after + 1:
            return None
        start = after + 1 - self._frames[0][0]
        return [text for _, text in list(self._frames)[start:]]

    def close(self) -> None:
        self.closed = True
        for queue in tuple(self._clients):
            queue.put_nowait(LAGGED)  # there is always room for it (see publish)
        self._clients.clear()

    async def follow(self, after: int, ping_s: float = PING_S) -> AsyncIterator[str]:
        """Replay after ``after``, then the live frames, until the stream closes or the client lags."""
        queue: asyncio.Queue[str] = asyncio.Queue(self._queue_size + 1)  # + the end marker
        backlog = self.since(after)  # taken together with joining: no frame between the two is lost
        self._clients.add(queue)
        try:
            if backlog is None:
                yield frame(self.seq, "reset", {"reason": "the events you missed are no longer buffered"})
                backlog = self.since(max(0, self.seq - len(self._frames)))
            backlog = backlog or []
            for start in range(0, len(backlog), BATCH):
                yield "".join(backlog[start : start + BATCH])
            yield ": live\n\n"
            while not self.closed:
                if queue.empty():
                    try:
                        async with asyncio.timeout(ping_s):
                            first = await queue.get()
                    except TimeoutError:
                        yield ": ping\n\n"
                        continue
                else:
                    first = queue.get_nowait()
                # whatever queued up meanwhile goes out in the same write: a burst costs one send, not N
                batch = [first]
                while not queue.empty() and len(batch) < BATCH:
                    batch.append(queue.get_nowait())
                if LAGGED in batch:
                    if batch.index(LAGGED):
                        yield "".join(batch[: batch.index(LAGGED)])
                    return
                yield "".join(batch)
        finally:
            self._clients.discard(queue)
