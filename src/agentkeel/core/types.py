"""Provider-neutral conversation types: content blocks, messages, usage, stop reasons.

These are the shapes every other layer speaks. Providers translate them to and from their
wire formats; the session log stores them as JSON; tools return them.

They are msgspec Structs, not pydantic models: defining them costs microseconds, importing
msgspec about 15 ms (pydantic with its class building was ~120 ms on the path to the first
model request), and ``from_data`` still validates what is read back from a session file,
with errors that name the bad field (``Expected `str`, got `int` - at `$.content[0].text```).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import msgspec

T = TypeVar("T")


class _Block(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    @property
    def type(self) -> str:
        return str(self.__struct_config__.tag)


class TextBlock(_Block, frozen=True, kw_only=True, tag="text"):
    text: str


class ThinkingBlock(_Block, frozen=True, kw_only=True, tag="thinking"):
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(_Block, frozen=True, kw_only=True, tag="redacted_thinking"):
    data: str


class ImageBlock(_Block, frozen=True, kw_only=True, tag="image"):
    media_type: str
    data: str  # base64


class ToolUseBlock(_Block, frozen=True, kw_only=True, tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any] = msgspec.field(default_factory=dict)


ToolResultContent = TextBlock | ImageBlock


class ToolResultBlock(_Block, frozen=True, kw_only=True, tag="tool_result"):
    tool_use_id: str
    content: str | list[ToolResultContent] = ""
    is_error: bool = False

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


ContentBlock = TextBlock | ThinkingBlock | RedactedThinkingBlock | ImageBlock | ToolUseBlock | ToolResultBlock

Role = Literal["user", "assistant"]


class Message(msgspec.Struct, frozen=True, kw_only=True):
    role: Role
    content: list[ContentBlock]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=[TextBlock(text=text)])

    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_wire(self) -> dict[str, int]:
        """The usage object in Claude Code's result shape."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_tokens,
            "cache_creation_input_tokens": self.cache_write_tokens,
        }


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


def to_data(value: Any) -> Any:
    """A Struct (or anything holding Structs) as plain JSON-ready data."""
    return msgspec.to_builtins(value)


def from_data(cls: type[T], data: Any) -> T:
    """Validate plain data into ``cls``; raises ``ValueError`` (msgspec.ValidationError) naming the field."""
    return msgspec.convert(data, cls)


def replace(value: T, **changes: Any) -> T:
    """A copy of a Struct with some fields changed."""
    return msgspec.structs.replace(value, **changes)  # type: ignore[type-var]
