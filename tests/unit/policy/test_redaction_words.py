"""#34 item 4: redaction must not rewrite the model's own words.

Claude Code 2.1.328 does not redact the model's words: with a scripted model answering
``Counting: 69 70 71 72 73 74 75 76 77`` its assistant messages, result and resent history carry the
digits as written (the command and the run are recorded in
tests/integration/policy/test_redaction_keeps_the_models_words.py).
keel keeps masking secrets in tool results and on disk, but not the model's words the user reads.
"""

from __future__ import annotations

import pytest

from agentkeel.core.events import AssistantMessage, RunFinished, ToolResults, UserMessage
from agentkeel.core.types import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from agentkeel.policy.redact import scan
from agentkeel.policy.redaction import redact_event, session_bus

FAKE_CARD = "4111 1111 1111 1111"  # the test Visa number every processor documents
FAKE_KEY = "sk-ant-fake0000fake0000fake0000"


@pytest.mark.parametrize(
    "text",
    [
        # each was masked as a card number before: the digits pass the Luhn check by chance
        "69 70 71 72 73 74 75 76 77",  # the case
        "61 62 63 64 65 66 67 68",
        "2026 11 28 13 45 03",
        "1004 1005 1006 1007",  # laid out as a card is, but no network issues numbers starting 1
        "1764337500123456702",  # a timestamp in nanoseconds
        "id 9780000000000007",
    ],
)
def test_lists_of_numbers_are_not_card_numbers(text: str) -> None:
    assert scan(text) == text


@pytest.mark.parametrize(
    "card",
    [  # the networks' published test numbers, in the layouts people write them in
        "4111111111111111", "4111 1111 1111 1111", "4111-1111-1111-1111", "4222222222222",
        "5555555555554444", "2223003122003222", "3782 822463 10005", "378282246310005", "6011111111111117",
        "3530111333300000", "30569309025904", "6200000000000005", "٤١١١١١١١١١١١١١١١",
    ],
)  # fmt: skip
def test_card_numbers_as_written_are_still_masked(card: str) -> None:
    assert scan(f"card {card} ok") in ("card [REDACTED:card_number] ok", "card [REDACTED:card_number]ok")


def _assistant(text: str) -> AssistantMessage:
    return AssistantMessage(message=Message(role="assistant", content=[TextBlock(text=text)]), usage=Usage())


def test_the_models_text_reaches_readers_unchanged_and_the_disk_masked() -> None:
    """What the model said (and the result built from it) is what the user sees and what is resent;
    a secret in it is still masked in the transcript."""
    written: list[object] = []
    bus = session_bus(written.append)
    said = f"Your key {FAKE_KEY} is set."
    seen = bus.publish(_assistant(said))
    assert isinstance(seen, AssistantMessage) and seen.message.text() == said
    result = bus.publish(
        RunFinished(
            subtype="success", is_error=False, result=said, num_turns=1, duration_ms=1, usage=Usage(), total_cost_usd=0
        )
    )
    assert isinstance(result, RunFinished) and result.result == said
    on_disk = written[0]
    assert isinstance(on_disk, AssistantMessage) and FAKE_KEY not in on_disk.message.text()
    assert isinstance(written[1], RunFinished) and FAKE_KEY not in written[1].result


def test_tool_results_and_prompts_are_still_masked_for_everyone() -> None:
    """A secret a tool read never reaches the model or any reader; the user's prompt (which carries
    @-mentioned files and hook context) is masked as before."""
    written: list[object] = []
    bus = session_bus(written.append)
    res = ToolResults(
        message=Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content=f"key={FAKE_KEY}")])
    )
    seen = bus.publish(res)
    assert FAKE_KEY not in repr(seen) and FAKE_KEY not in repr(written[0])
    prompt = bus.publish(UserMessage(message=Message.user(f"card {FAKE_CARD}")))
    assert "[REDACTED:card_number]" in repr(prompt)


def test_the_models_tool_call_is_kept_as_written() -> None:
    command = "printf '%s\\n' 69 70 71 72 73 74 75 76 77"
    event = AssistantMessage(
        message=Message(role="assistant", content=[ToolUseBlock(id="t1", name="Bash", input={"command": command})]),
    )
    seen = session_bus(None).publish(event)
    assert isinstance(seen, AssistantMessage) and seen.message.tool_uses()[0].input == {"command": command}
    assert redact_event(event) is event


@pytest.mark.parametrize(
    "line",
    [  # found by bench/redact_bench.py --fp in CPython's shlex.py and anyio's sources
        "            self.token = nextchar",
        "    token: object,",
        "def run_sync(native_token: object) -> None:",
    ],
)
def test_a_name_or_a_type_after_a_token_is_code(line: str) -> None:
    assert scan(line) == line


@pytest.mark.parametrize(
    "line",
    [
        "password = hunter",
        "secret=hunter",
        "client_secret: sesame",
        "API_KEY=FAKEfake0000",
        "auth_token: Fakefake00000",
    ],
)
def test_words_chosen_as_passwords_and_generated_tokens_are_still_masked(line: str) -> None:
    assert "[REDACTED:secret]" in scan(line)


def test_a_compaction_keeps_the_models_messages_and_masks_the_rest() -> None:
    """After a compaction the view starts from its messages: the model's are resent as written, a
    tool result in them stays masked, and the transcript gets them all masked."""
    from agentkeel.core.events import Compaction

    said = Message(role="assistant", content=[TextBlock(text=f"I used {FAKE_KEY}.")])
    read = Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content=f"key={FAKE_KEY}")])
    written: list[object] = []
    seen = session_bus(written.append).publish(Compaction(messages=[read, said], summary="s"))
    assert isinstance(seen, Compaction) and seen.messages[1] == said
    assert FAKE_KEY not in repr(seen.messages[0])
    assert FAKE_KEY not in repr(written[0])
