"""A resumed session prunes as the live one did (#35 review): a new process (``keel -p ... -c``) takes
the conversation it resumes as cached, so a duplicate far back is not pruned at its first request
(that would rewrite the cached prefix to save a few tokens), and it prunes again what the live
session pruned at the compaction its view starts at."""

from __future__ import annotations

from agentkeel.config.settings import ReliabilitySettings
from agentkeel.context.state import ResumedView
from agentkeel.core.events import EventBus
from agentkeel.core.tools import Services
from agentkeel.core.types import Message
from agentkeel.reliability.pruning import DUPLICATE, context_pruning
from agentkeel.reliability.state import ReliabilityState
from tests.unit.reliability.test_pruning_pays_off import _results, _send, _turn

EARLY = "small early result " * 5


def _state() -> ReliabilityState:
    return ReliabilityState(
        config=ReliabilitySettings(pruneProtectTurns=1), context_window=200_000, last_input_tokens=150_000
    )


def _history() -> list[Message]:
    history = [Message.user("go"), *_turn(0, "/p/a.py", EARLY)]
    for i in range(1, 40):
        history += _turn(i, f"/p/big{i}.py", "x" * 12_000)  # ~470 kB cached after the early read
    return history


def test_a_resumed_session_keeps_the_prefix_the_live_one_kept() -> None:
    history = _history()
    grown = [*history, *_turn(40, "/p/a.py", EARLY), *_turn(41, "/p/c.py", "y")]
    live = context_pruning(EventBus(), _state())
    _send(live, history)
    sent_live = _send(live, grown)
    assert _results(sent_live)["t0"] == EARLY  # far back in the cache: not worth a rewrite

    resumed = context_pruning(EventBus(), _state())  # a new process, the same conversation
    sent = _send(resumed, [*grown, Message.user("more")])
    assert _results(sent)["t0"] == EARLY
    assert sent.messages[: len(grown)] == sent_live.messages


def test_a_resumed_session_prunes_again_what_the_live_one_pruned_at_its_compaction() -> None:
    history = _history()
    grown = [*history, *_turn(40, "/p/a.py", EARLY), *_turn(41, "/p/c.py", "y")]
    compacted = [Message.user("<keel-context-carryover>summary</keel-context-carryover>"), *grown[1:]]
    # after the compaction: a far-back duplicate (big1 read again), then one more turn
    after = [*compacted, *_turn(42, "/p/big1.py", "x" * 12_000), *_turn(43, "/p/d.py", "z")]

    live = context_pruning(EventBus(), _state())
    _send(live, history)
    assert _results(_send(live, compacted))["t0"] == DUPLICATE  # the compaction rewrote all: pruned then
    sent_live = _send(live, after)
    assert _results(sent_live)["t0"] == DUPLICATE
    assert _results(sent_live)["t1"] == "x" * 12_000  # far back in the cache: left until the next compaction

    services = Services()  # the resumed session's context manager found the compaction in the log
    services.put(ResumedView, ResumedView(messages=len(compacted), tokens_before=180_000))
    resumed = context_pruning(EventBus(), _state(), services)
    sent = _send(resumed, [*after, Message.user("more")])
    assert _results(sent)["t0"] == DUPLICATE
    assert _results(sent)["t1"] == "x" * 12_000
    assert sent.messages[: len(after)] == sent_live.messages  # the bytes the live session sent


def test_a_compaction_below_the_pruning_threshold_pruned_nothing_then() -> None:
    history = _history()
    grown = [*history, *_turn(40, "/p/a.py", EARLY), *_turn(41, "/p/c.py", "y")]
    compacted = [Message.user("<keel-context-carryover>summary</keel-context-carryover>"), *grown[1:]]
    services = Services()  # a /compact at 20 % of the window: the live session was not pruning yet
    services.put(ResumedView, ResumedView(messages=len(compacted), tokens_before=40_000))
    state = _state()
    state.last_input_tokens = 40_000
    resumed = context_pruning(EventBus(), state, services)
    assert _results(_send(resumed, [*compacted, Message.user("more")]))["t0"] == EARLY
