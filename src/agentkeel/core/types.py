"""Provider-neutral conversation types: content blocks, messages, usage, stop reasons.

These are the shapes every other layer speaks. Providers translate them to and from
their wire formats; the session log stores them as JSON; tools return them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class TextBlock(_Block):
    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Block):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(_Block):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ImageBlock(_Block):
    type: Literal["image"] = "image"
    media_type: str
    data: str  # base64


class ToolUseBlock(_Block):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


ToolResultContent = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]


class ToolResultBlock(_Block):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str | list[ToolResultContent] = ""
    is_error: bool = False

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


ContentBlock = Annotated[
    TextBlock | ThinkingBlock | RedactedThinkingBlock | ImageBlock | ToolUseBlock | ToolResultBlock,
    Field(discriminator="type"),
]

Role = Literal["user", "assistant"]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

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


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

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


class ToolSpec(BaseModel):
    """What the model is told about a tool."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    description: str
    input_schema: dict[str, Any]
