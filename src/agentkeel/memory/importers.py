"""Importers: Claude Code and Codex session histories, and generic JSONL, into memory records.

Each importer yields records with stable ids (``cc:<uuid>``, ``codex:<file>:<line>``), so
importing twice adds nothing. Unreadable lines are counted and skipped, never fatal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkeel.memory.model import Record, RecordError, now_iso
from agentkeel.tools.views import SHELL_TOOL, observe


@dataclass
class ImportReport:
    files: int = 0
    records: int = 0
    skipped_lines: int = 0
    problems: list[str] = field(default_factory=list)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") in ("text", "input_text", "output_text"):
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "tool_result":
                    parts.append(_text_of(block.get("content")))
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(p for p in parts if p)
    return ""


def _lines(path: Path, report: ImportReport) -> Iterator[tuple[int, dict[str, Any]]]:
    report.files += 1
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        report.problems.append(f"{path}: {exc.strerror}")
        return
    with handle:
        for number, raw in enumerate(handle, start=1):
            raw = raw.strip().replace("\x00", "")
            if not raw:
                continue
            try:
                item = json.loads(raw)
            except ValueError:
                report.skipped_lines += 1
                continue
            if isinstance(item, dict):
                yield number, item
            else:
                report.skipped_lines += 1


def claude_code(paths: list[Path], project: str, report: ImportReport) -> Iterator[dict[str, Any]]:
    """``~/.claude/projects/<project>/<session>.jsonl``: prompts, answers and tool observations."""
    for path in paths:
        pending: dict[str, tuple[str, dict[str, Any]]] = {}
        for _, item in _lines(path, report):
            kind = item.get("type")
            raw_message = item.get("message")
            message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
            session = str(item.get("sessionId") or path.stem)
            stamp = str(item.get("timestamp") or now_iso())
            uid = str(item.get("uuid") or "")
            if kind == "assistant":
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        pending[str(block.get("id"))] = (str(block.get("name")), dict(block.get("input") or {}))
                text = _text_of(content)
                if text and uid:
                    yield _rec(
                        f"cc:{uid}", "assistant_response", text, project, session, stamp, {"source": "claude-code"}
                    )
            elif kind == "user":
                content = message.get("content")
                if isinstance(content, list) and any(
                    isinstance(b, dict) and b.get("type") == "tool_result" for b in content
                ):
                    for n, block in enumerate(content):
                        if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                            continue
                        name, tool_input = pending.pop(str(block.get("tool_use_id")), ("tool", {}))
                        text, meta = observe(
                            name, tool_input, _text_of(block.get("content")), bool(block.get("is_error"))
                        )
                        meta["source"] = "claude-code"
                        yield _rec(f"cc:{uid}:{n}", "tool_observation", text, project, session, stamp, meta)
                    continue
                text = _text_of(content)
                if text and uid and not item.get("isMeta") and not text.startswith("<command-"):
                    yield _rec(f"cc:{uid}", "user_prompt", text, project, session, stamp, {"source": "claude-code"})
            elif kind == "summary" and item.get("summary"):
                leaf = str(item.get("leafUuid") or path.stem)
                yield _rec(
                    f"cc:summary:{leaf}",
                    "session_summary",
                    str(item["summary"]),
                    project,
                    path.stem,
                    now_iso(),
                    {"source": "claude-code"},
                )


def codex(paths: list[Path], project: str, report: ImportReport) -> Iterator[dict[str, Any]]:
    """``~/.codex/sessions/**/rollout-*.jsonl``: response items (messages, function calls and outputs)."""
    for path in paths:
        session = path.stem
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        for number, item in _lines(path, report):
            stamp = str(item.get("timestamp") or now_iso())
            raw_payload = item.get("payload")
            payload: dict[str, Any] = raw_payload if isinstance(raw_payload, dict) else item
            if item.get("type") == "session_meta":
                session = str(payload.get("id") or session)
                continue
            kind = payload.get("type")
            rid = f"codex:{path.name}:{number}"
            if kind == "message":
                text = _text_of(payload.get("content"))
                role = payload.get("role")
                if text and role in ("user", "assistant") and not text.startswith("<environment_context>"):
                    record_type = "user_prompt" if role == "user" else "assistant_response"
                    yield _rec(rid, record_type, text, project, session, stamp, {"source": "codex"})
            elif kind in ("function_call", "local_shell_call", "custom_tool_call"):
                try:
                    arguments = json.loads(payload.get("arguments") or "{}")
                except (TypeError, ValueError):
                    arguments = {"arguments": payload.get("arguments")}
                if isinstance(arguments.get("command"), list):
                    arguments["command"] = " ".join(str(c) for c in arguments["command"])
                name = SHELL_TOOL if payload.get("name") in ("shell", "exec_command") else str(payload.get("name"))
                calls[str(payload.get("call_id"))] = (name, arguments if isinstance(arguments, dict) else {})
            elif kind in ("function_call_output", "custom_tool_call_output"):
                output = payload.get("output")
                if isinstance(output, dict):
                    output = output.get("content") or json.dumps(output)
                name, arguments = calls.pop(str(payload.get("call_id")), ("tool", {}))
                text, meta = observe(name, arguments, str(output or ""), False)
                meta["source"] = "codex"
                yield _rec(rid, "tool_observation", text, project, session, stamp, meta)


def generic(paths: list[Path], project: str, report: ImportReport) -> Iterator[dict[str, Any]]:
    """One record object per line (the ``add_many`` shape); missing project filled in."""
    for path in paths:
        for number, item in _lines(path, report):
            item.setdefault("project", project)
            try:
                yield Record.from_dict(item).to_dict()
            except RecordError as exc:
                report.skipped_lines += 1
                if len(report.problems) < 10:
                    report.problems.append(f"{path}:{number}: {exc}")


def _rec(
    rid: str, kind: str, text: str, project: str, session: str, stamp: str, meta: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": rid,
        "type": kind,
        "project": project,
        "session": session,
        "timestamp": stamp,
        "text": text,
        "metadata": meta,
    }


def find_files(source: str, path: Path | None, home: Path) -> list[Path]:
    if path is not None and path.is_file():
        return [path]
    if source == "claude-code":
        root = path or home / ".claude" / "projects"
        return sorted(root.glob("*.jsonl")) + sorted(root.glob("*/*.jsonl"))
    if source == "codex":
        root = path or home / ".codex" / "sessions"
        return sorted(root.rglob("*.jsonl"))
    return sorted(path.rglob("*.jsonl")) if path is not None else []
