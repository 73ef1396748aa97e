"""The ``prompt`` handler: one small model call through the session's provider.

The model sees the handler's prompt (``$ARGUMENTS`` replaced by the event's JSON, or the JSON
appended) and answers ``{"ok": true}`` or ``{"ok": false, "reason": "..."}``; ``ok: false``
blocks as exit 2 does, with the reason. An answer that is not that JSON is a handler error.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentkeel.core.provider import ModelRequest, ModelResponse, Provider
from agentkeel.core.types import Message
from agentkeel.hooks.config import Handler
from agentkeel.hooks.runners import Raw

SYSTEM = (
    "You evaluate one event of a coding agent's session for a hook. Reply with only a JSON object: "
    '{"ok": true} to let it proceed, or {"ok": false, "reason": "why, in one sentence"} to stop it.'
)
_OBJECT = re.compile(r"\{.*\}", re.S)


async def run_prompt(handler: Handler, payload: dict[str, Any], provider: Provider, model: str) -> Raw:
    arguments = json.dumps(payload, ensure_ascii=False, default=str)
    text = handler.prompt
    text = text.replace("$ARGUMENTS", arguments) if "$ARGUMENTS" in text else f"{text}\n\n{arguments}"
    request = ModelRequest(
        model=handler.model or model, system=SYSTEM, messages=[Message.user(text)], tools=[], max_tokens=512
    )
    final: ModelResponse | None = None
    async for chunk in provider.stream(request):
        if isinstance(chunk, ModelResponse):
            final = chunk
    return verdict_from_text(final.message.text() if final is not None else "")


def verdict_from_text(answer: str) -> Raw:
    """``{"ok": true}`` -> exit 0; ``{"ok": false, "reason": ...}`` -> exit 2; anything else an error."""
    found = _OBJECT.search(answer)
    try:
        data = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
        return Raw(None, error=f'answered without {{"ok": true|false}}: {answer.strip()[:80]!r}')
    if data["ok"]:
        return Raw(0, parsed={})
    return Raw(2, stderr=str(data.get("reason") or "the prompt hook said no"))
