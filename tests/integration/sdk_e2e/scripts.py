"""The scripted model for the vendored SDK e2e-tests: one responder per test, as a real model would answer.

A responder gets the request (:class:`Turn`: the latest human prompt, how many assistant replies
followed it, the tools offered, the model asked for) and returns one step of
:mod:`agentkeel.models.fake.script` (text, thinking, tool calls or an HTTP error). It calls a tool
only when the request offers it, as a real model does, and reads paths and commands out of the
prompt (several tests put a random file name in it). Requests no rule answers (a client's side
requests: titles, quota checks) get a short text.

The same responders serve keel and Claude Code 2.1.328 (``SDK_E2E_CLI``, see SOURCES.md): a
script that passes on Claude Code and fails on keel is a keel bug.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Step = dict[str, Any]


@dataclass
class Turn:
    """What the model sees in one request."""

    prompt: str  # the latest human prompt (system reminders and keel's injected context left out)
    k: int  # assistant messages after that prompt: 0 for the first reply
    tools: list[str]
    model: str
    system: str
    called: list[str] = field(default_factory=list)  # the tools called since the prompt
    searched: list[str] = field(default_factory=list)  # the ToolSearch queries since the prompt
    results: list[str] = field(default_factory=list)  # the tool results since the prompt

    def offers(self, name: str) -> bool:
        return name in self.tools


def _text_of(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            out.append(str(block.get("text", "")))
    return out


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


_INJECTED = ("<system-reminder>", "<memory-context>", "<context>", "<environment>", "Caveat:", "<command-")


def _human(text: str) -> str:
    """The human's words of one text block ('' for a block a client injected)."""
    stripped = text.strip()
    if any(stripped.startswith(tag) for tag in _INJECTED):
        return ""
    for tag in ("<memory-context>", "<system-reminder>", "<environment>"):
        stripped = stripped.split(tag, 1)[0].strip()
    return stripped


def turn_of(body: dict[str, Any]) -> Turn:
    messages = body.get("messages") or []
    prompt, start = "", 0
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        content = msg.get("content")
        if msg.get("role") != "user" or (
            isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        ):
            continue  # Claude Code's "system" messages, a tool result (and text a hook added to it): no new prompt
        words = " ".join(w for w in (_human(t) for t in _text_of(msg.get("content"))) if w)
        if words:
            prompt, start = words, i
            break
    after = messages[start + 1 :]
    k = sum(1 for m in after if m.get("role") == "assistant")
    called, searched, results = [], [], []
    for msg in after:
        for b in msg.get("content") if isinstance(msg.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                called.append(str(b.get("name")))
                if b.get("name") == "ToolSearch":
                    searched.append(str((b.get("input") or {}).get("query", "")))
            elif isinstance(b, dict) and b.get("type") == "tool_result":
                results.append(_result_text(b.get("content")))
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    tools = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]
    return Turn(prompt, k, tools, str(body.get("model", "")), str(system), called, searched, results)


# -- building blocks --------------------------------------------------------------------------------


def call(*calls: tuple[str, dict[str, Any]], text: str = "") -> Step:
    step: Step = {"tool_calls": [{"name": n, "input": i} for n, i in calls]}
    if text:
        step["text"] = text
    return step


def steps(*replies: Step | str) -> Callable[[Turn], Step | str]:
    """Replies in turn: the k-th assistant message after the prompt is ``replies[k]`` (the last repeats)."""
    return lambda t: replies[min(t.k, len(replies) - 1)]


def answers(table: dict[str, Step | str | Callable[[Turn], Step | str]]) -> Callable[[Turn], Step | str]:
    """Answer by prompt: the first key the prompt contains picks the reply (or a responder)."""

    def respond(t: Turn) -> Step | str:
        for key, reply in table.items():
            if key in t.prompt:
                return reply(t) if callable(reply) else reply
        return "OK."

    return respond


def structured(value: dict[str, Any]) -> Callable[[Turn], Step | str]:
    """The final answer under a JSON schema: Claude Code offers a ``StructuredOutput`` tool; keel
    asks for the JSON as the answer (its system prompt says so)."""

    def respond(t: Turn) -> Step | str:
        if not t.offers("StructuredOutput"):
            return json.dumps(value)
        return "Done." if "StructuredOutput" in t.called else call(("StructuredOutput", value))

    return respond


def explore_then(
    tool: tuple[str, dict[str, Any]], shell: str, final: Callable[[Turn], dict[str, Any]]
) -> Callable[[Turn], Step | str]:
    """Use a tool first (``tool`` when offered, else Bash running ``shell``: Claude Code 2.1.328
    has no Glob or Grep), then give the structured answer built from its result."""

    def respond(t: Turn) -> Step | str:
        if t.k == 0 and t.offers(tool[0]):
            return call(tool, text="Let me look.")
        if t.k == 0 and t.offers("Bash"):
            return call(("Bash", {"command": shell, "description": "Look at the files"}), text="Let me look.")
        return structured(final(t))(t)

    return respond


def bash_from_prompt(t: Turn) -> Step | str:
    """'Run: CMD' / 'Run this bash command: CMD' / 'Run the command: CMD': run CMD, then report."""
    if t.k == 0 and t.offers("Bash"):
        m = re.search(r"Run(?: this bash command| the command)?: (.+)$", t.prompt)
        command = m.group(1).strip() if m else "true"
        return call(("Bash", {"command": command, "description": "Run the requested command"}))
    out = " ".join(t.results).strip()
    return f"The command ran. Output: {out}" if out else "Done."


def write_from_prompt(t: Turn) -> Step | str:
    m = re.search(r"create the file (\S+) containing exactly the text (\w+)", t.prompt)
    if t.k == 0 and m and t.offers("Write"):
        return call(("Write", {"file_path": m.group(1), "content": m.group(2)}))
    return "Created the file."


def agent_tool(t: Turn) -> str:
    return "Agent" if t.offers("Agent") else "Task"


def greeter(t: Turn) -> Step | str:
    """The parent: call the greeter subagent once, then say DONE."""
    if t.k == 0 and (t.offers("Agent") or t.offers("Task")):
        return call(
            (
                agent_tool(t),
                {
                    "subagent_type": "greeter",
                    "description": "Say hi",
                    "prompt": "say hi",
                    "run_in_background": False,
                },
            )
        )
    return "DONE"


MCP_ARGS = {"echo": {"text": "test"}, "greet": {"name": "Alice"}}


def mcp(*names: str, text: str = "") -> Callable[[Turn], Step | str]:
    """Call the named MCP tools one per reply, in order. A tool the request does not offer is
    looked up with ToolSearch first when that is offered (Claude Code defers MCP tools' schemas);
    one still not offered is left out. Then a closing text."""

    def respond(t: Turn) -> Step | str:
        for name in names:
            if name in t.called:
                continue
            if t.offers(name):
                return call((name, MCP_ARGS[name.rsplit("__", 1)[-1]]))
            query = f"select:{name}"
            if t.offers("ToolSearch") and query not in t.searched:
                return call(("ToolSearch", {"query": query}))
        return text or "All done."

    return respond


def mcp_together(*names: str) -> Callable[[Turn], Step | str]:
    """Both tools in one reply (after one ToolSearch for them, when Claude Code defers them)."""
    args = {"echo": {"text": "test"}, "greet": {"name": "Bob"}}

    def respond(t: Turn) -> Step | str:
        if any(n in t.called for n in names):
            return "Both tools ran."
        missing = [n for n in names if not t.offers(n)]
        query = "select:" + ",".join(missing)
        if missing and t.offers("ToolSearch") and query not in t.searched:
            return call(("ToolSearch", {"query": query}))
        offered = [n for n in names if t.offers(n)]
        return call(*[(n, args[n.rsplit("__", 1)[-1]]) for n in offered]) if offered else "The tools are not available."

    return respond


def _count(results: list[str], suffix: str) -> int:
    return sum(1 for line in "\n".join(results).splitlines() if line.strip().endswith(suffix))


# -- the table ---------------------------------------------------------------------------------------

ARITHMETIC = answers({"2 + 2": "4", "2+2": "4", "1+1": "2", "1 + 1": "2", "3+3": "6"})
REPLY_EXACTLY = answers(
    {"Reply with exactly: one": "one", "Reply with exactly: two": "two", "Reply with exactly: three": "three"}
)
SUBAGENT = answers({"Use the Agent tool exactly once": greeter, "say hi": "Hi there, nice to meet you!"})

RESPONDERS: dict[str, Callable[[Turn], Step | str]] = {
    # test_agents_and_settings.py
    "test_agent_definition": ARITHMETIC,
    "test_agent_definition_with_query_function": ARITHMETIC,
    "test_large_agents_with_query_function": ARITHMETIC,
    "test_filesystem_agent_loading": answers({"Say hello in exactly 3 words": "Hello there, friend!"}),
    "test_setting_sources_default": ARITHMETIC,
    "test_setting_sources_user_only": ARITHMETIC,
    "test_setting_sources_project_included": ARITHMETIC,
    "test_large_agent_definitions_via_initialize": answers(
        {"List available agents": "The available agents are large-agent-0 to large-agent-19."}
    ),
    # test_conversation_reset.py (/clear is handled by the CLI: no model request)
    "test_clear_emits_conversation_reset": REPLY_EXACTLY,
    # test_dynamic_control.py
    "test_set_permission_mode": ARITHMETIC,
    "test_set_model": ARITHMETIC,
    "test_interrupt": answers(
        {"Count from 1 to 100 slowly": {"text": ", ".join(str(n) for n in range(1, 101)), "delay_s": 3}}
    ),
    # test_error_results.py: the API rejects the model id, as api.anthropic.com does
    "test_query_api_error_raises_result_error_with_payload": lambda t: (
        {"error": {"status": 404, "type": "not_found_error", "message": f"model: {t.model}"}}
        if t.model == "claude-nonexistent-model-for-sdk-e2e"
        else "pong"
    ),
    # test_forward_subagent_text.py, test_subagent_session_reads.py
    "test_forward_subagent_text_delivers_attributed_text": SUBAGENT,
    "test_subagent_text_not_forwarded_by_default": SUBAGENT,
    "test_subagent_messages_carry_parent_tool_use_id": SUBAGENT,
    # test_hook_events.py, test_hooks.py
    "test_pre_tool_use_hook_with_additional_context": bash_from_prompt,
    "test_post_tool_use_hook_with_tool_use_id": bash_from_prompt,
    "test_notification_hook": answers({"Say hello in one word": "Hello"}),
    "test_multiple_hooks_together": bash_from_prompt,
    "test_hook_with_permission_decision_and_reason": bash_from_prompt,
    "test_hook_with_continue_and_stop_reason": bash_from_prompt,
    "test_hook_with_additional_context": bash_from_prompt,
    # test_include_partial_messages.py (thinking is on: MAX_THINKING_TOKENS)
    "test_include_partial_messages_stream_events": answers(
        {
            "Think of three jokes": {
                "thinking": "Three jokes: one about atoms, one about skeletons, one about scarecrows. "
                "The atom one is the best.",
                "text": "Why don't scientists trust atoms? Because they make up everything.",
            }
        }
    ),
    "test_include_partial_messages_thinking_deltas": answers(
        {
            "Think step by step": {
                "thinking": "Step 1: take 2. Step 2: add 2 more. Step 3: 2 + 2 makes 4.",
                "text": "2 + 2 = 4",
            }
        }
    ),
    "test_partial_messages_disabled_by_default": answers({"Say hello": "Hello!"}),
    # test_message_origin.py, test_session_store_resume_settings.py, test_truncating_resume.py
    "test_result_origin_round_trips_host_stamp": REPLY_EXACTLY,
    "test_store_resume_applies_user_settings": REPLY_EXACTLY,
    "test_truncating_resume_with_matching_drops_turn_forks_cleanly": REPLY_EXACTLY,
    "test_truncating_resume_with_wrong_drops_turn_is_refused": REPLY_EXACTLY,
    # test_sdk_mcp_tools.py
    "test_sdk_mcp_tool_execution": mcp("mcp__test__echo", text="Echo: test"),
    "test_sdk_mcp_permission_enforcement": mcp("mcp__test__greet", "mcp__test__echo"),
    "test_sdk_mcp_multiple_tools": mcp_together("mcp__multi__echo", "mcp__multi__greet"),
    "test_sdk_mcp_without_permissions": mcp("mcp__noperm__echo"),
    # test_stderr_callback.py
    "test_stderr_callback_without_debug": ARITHMETIC,
    # test_structured_output.py (the project tree is made by the harness: conftest.PROJECT_FILES)
    "test_simple_structured_output": explore_then(
        ("Glob", {"pattern": "src/claude_agent_sdk/**/*.py"}),
        "find src/claude_agent_sdk -name '*.py'",
        lambda t: {"file_count": _count(t.results, ".py"), "has_tests": False, "test_file_count": 0},
    ),
    "test_nested_structured_output": structured(
        {"analysis": {"word_count": 2, "character_count": 11}, "words": ["Hello", "world"]}
    ),
    "test_structured_output_with_enum": explore_then(
        ("Grep", {"pattern": "import (pytest|unittest|nose)", "path": "tests", "output_mode": "content"}),
        "grep -rE 'import (pytest|unittest|nose)' tests",
        lambda t: {
            "has_tests": "pytest" in " ".join(t.results),
            "test_framework": "pytest" if "pytest" in " ".join(t.results) else "unknown",
            "test_count": max(1, _count(t.results, "import pytest")),
        },
    ),
    "test_structured_output_with_tools": explore_then(
        ("Glob", {"pattern": "*"}),
        "ls -A",
        lambda t: {
            "file_count": len([r for r in "\n".join(t.results).splitlines() if r.strip()]),
            "has_readme": "README" in " ".join(t.results),
        },
    ),
    # test_tool_permissions.py
    "test_permission_callback_gets_called": bash_from_prompt,
    "test_query_async_iterable_prompt_with_only_can_use_tool": write_from_prompt,
    "test_query_string_prompt_with_can_use_tool": write_from_prompt,
}


def responder(test_name: str) -> Callable[[Turn], Step | str]:
    return RESPONDERS.get(test_name.split("[", 1)[0], lambda t: "OK.")
