"""Structured output (``--json-schema``, ``output_format={"type": "json_schema", ...}``).

The model is told the schema (appended to the system prompt of every request). Its final answer
is parsed as JSON (a fenced ```json block is accepted) and validated with ``jsonschema``; on a
mismatch the loop goes on once with a message that says what is wrong; a second mismatch ends
the run as ``error_max_structured_output_retries``. ``jsonschema`` is imported on first use.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from agentkeel.core.extensions import Extension, StopInfo
from agentkeel.core.provider import ModelRequest
from agentkeel.core.run import RunResult

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n?```", re.DOTALL)
RETRY_SUBTYPE = "error_max_structured_output_retries"


class SchemaError(ValueError):
    """The schema itself is not a valid JSON Schema."""


def check_schema(schema: dict[str, Any]) -> None:
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        raise SchemaError(f"not a valid JSON Schema: {e.message}") from None


def problem(schema: dict[str, Any], text: str) -> tuple[Any, str]:
    """(the parsed value, '') when ``text`` is JSON valid under ``schema``; else (None, why)."""
    import jsonschema

    candidate = text.strip()
    fenced = _FENCE.search(candidate)
    if fenced:
        candidate = fenced.group(1).strip()
    try:
        value = json.loads(candidate)
    except ValueError as e:
        return None, f"the answer is not JSON ({e})"
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "the top level"
        return None, f"at {where}: {errors[0].message}"
    return value, ""


class StructuredOutput:
    """The extension and what it found: ``value`` (the validated answer) or ``error``."""

    def __init__(self, schema: dict[str, Any], retries: int = 1) -> None:
        check_schema(schema)
        self.schema = schema
        self.retries = retries
        self.value: Any = None
        self.error = ""
        self._tries = 0
        self._instruction = (
            "When you have finished, give your final answer as one JSON value (and nothing else) that is "
            "valid under this JSON Schema:\n" + json.dumps(schema, ensure_ascii=False)
        )

    def reset(self) -> None:
        self.value, self.error, self._tries = None, "", 0

    def extension(self) -> Extension:
        return Extension(name="structured-output", before_request=self._before_request, on_stop=self._on_stop)

    async def _before_request(self, request: ModelRequest) -> ModelRequest:
        system = f"{request.system}\n\n{self._instruction}" if request.system else self._instruction
        return msgspec.structs.replace(request, system=system)

    async def _on_stop(self, info: StopInfo) -> str | None:
        value, why = problem(self.schema, info.last_text)
        if not why:
            self.value, self.error = value, ""
            return None
        self._tries += 1
        if self._tries > self.retries:
            self.error = f"the final answer did not match the JSON Schema after {self.retries} retry: {why}"
            return None
        return (
            f"Your final answer does not match the required JSON Schema: {why}. "
            "Answer again with only the JSON value, valid under the schema."
        )


def result_object(session_id: str, result: RunResult, structured: StructuredOutput | None = None) -> dict[str, Any]:
    """Claude Code's result message for a run (with ``structured_output`` under a schema)."""
    subtype: str = result.subtype
    is_error, text = result.is_error, result.result
    if structured is not None and not is_error and structured.error:
        subtype, is_error, text = RETRY_SUBTYPE, True, structured.error
    from agentkeel.protocol import stream_json  # at the run's end, not on the way to its first request

    return stream_json.result_line(
        subtype=subtype,
        is_error=is_error,
        duration_ms=result.duration_ms,
        num_turns=result.num_turns,
        result=text,
        session_id=session_id,
        total_cost_usd=result.total_cost_usd,
        usage=result.usage.to_wire(),
        structured_output=structured.value if structured is not None and not is_error else None,
        stop_reason=result.stop_reason,
    )
