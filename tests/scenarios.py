"""Ready-made scripts: the 20-step coding session used by the end-to-end tests and the benchmark.
Test data: the scripted model names the tools it calls, as a real model does."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def twenty_step_session(project: Path, fetch_url: str) -> dict[str, Any]:
    """A realistic session: plan, write, read, edit, run, search, background job, fetch, finish.

    Twenty model requests; nineteen of them call tools (some in parallel), the last ends the turn.
    """
    src = project / "calc.py"
    test = project / "test_calc.py"
    notes = project / "NOTES.md"

    def call(name: str, **tool_input: Any) -> dict[str, Any]:
        return {"name": name, "input": tool_input}

    def step(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
        return {"text": text, "tool_calls": list(calls)}

    todos = [
        {"content": "Write calc.py", "status": "in_progress", "activeForm": "Writing calc.py"},
        {"content": "Test it", "status": "pending", "activeForm": "Testing"},
    ]
    steps = [
        step("Planning.", call("TodoWrite", todos=todos)),
        step("Looking around.", call("LS", path=str(project)), call("Glob", pattern="**/*.py")),
        step("Writing the module.", call("Write", file_path=str(src), content="def add(a, b):\n    return a - b\n")),
        step("Reading it back.", call("Read", file_path=str(src))),
        step("Fixing the bug.", call("Edit", file_path=str(src), old_string="a - b", new_string="a + b")),
        step(
            "Adding a test.",
            call("Write", file_path=str(test), content="from calc import add\n\nassert add(2, 3) == 5\nprint('ok')\n"),
        ),
        step("Running it.", call("Bash", command="python3 test_calc.py", description="run the test")),
        step("Searching.", call("Grep", pattern="def add", output_mode="content", **{"-n": True})),
        step("Notes.", call("Write", file_path=str(notes), content="# Notes\n\n- add works\n- todo: sub\n")),
        step("Reading notes and code together.", call("Read", file_path=str(notes)), call("Read", file_path=str(src))),
        step(
            "Two edits at once.",
            call(
                "MultiEdit",
                file_path=str(notes),
                edits=[
                    {"old_string": "- add works", "new_string": "- add works (tested)"},
                    {"old_string": "- todo: sub", "new_string": "- sub: next"},
                ],
            ),
        ),
        step(
            "Adding sub.",
            call(
                "Edit",
                file_path=str(src),
                old_string="    return a + b\n",
                new_string="    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
            ),
        ),
        step(
            "A background job.",
            call(
                "Bash",
                command="for i in 1 2 3; do echo tick $i; done; : > .ticked; sleep 30",
                run_in_background=True,
            ),
        ),
        # waits for the job's ticks, so that BashOutput has them however slowly the job started
        step(
            "Checking the tree.", call("Bash", command="until [ -e .ticked ]; do sleep 0.05; done; ls && cd .. && pwd")
        ),
        step("Back where I was.", call("Bash", command="echo still in $(pwd); cd " + str(project))),
        step("Reading its output.", call("BashOutput", bash_id="bash_1")),
        step("Stopping it.", call("KillShell", shell_id="bash_1")),
        step("Checking the docs.", call("WebFetch", url=fetch_url, prompt="is the server healthy?")),
        step(
            "Counting matches.",
            call("Grep", pattern="return", output_mode="count"),
            call("TodoWrite", todos=[dict(t, status="completed") for t in todos]),
        ),
        {"text": "Done: calc.py has add and sub, the test passes, and the notes are up to date."},
    ]
    return {"steps": steps}


def _call(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


def wire_scenarios() -> dict[str, dict[str, Any]]:
    """Short scripts for what a wire client must get right: every content kind, usage with cache
    figures, parallel tool calls, and each fault a real server produces. Each is a few model
    requests; a client that retries as keel does ends every one with a normal reply."""
    return {
        "text_and_usage": {
            "steps": [
                "a plain answer",
                {
                    "text": "with cache figures",
                    "usage": {
                        "input_tokens": 12,
                        "output_tokens": 5,
                        "cache_read_input_tokens": 4000,
                        "cache_creation_input_tokens": 300,
                    },
                },
                {"text": "cut short by max_tokens", "stop_reason": "max_tokens"},
                {"text": 'ünïcödé ✓ and "quotes"\nnew line'},
            ]
        },
        "thinking": {
            "steps": [
                {"thinking": "Let me think about it.", "signature": "EqQBCkYIBxgCKkBfake-signature==", "text": "42."},
                {"thinking": "More thought.", "redacted_thinking": ["ErcBCkgIAhABGAIiQOpaque=="], "text": "Still 42."},
                {"thinking": "OpenRouter-style reasoning.", "reasoning_key": "reasoning", "text": "Same answer."},
                {
                    "thinking": "I should read the file.",
                    "text": "Reading.",
                    "tool_calls": [_call("Read", file_path="src/a.py")],
                },
            ]
        },
        "parallel_tool_calls": {
            "steps": [
                {
                    "text": "Three at once.",
                    "tool_calls": [
                        _call("Read", file_path="src/a.py"),
                        _call("Grep", pattern="def \\w+", output_mode="content", **{"-n": True}),
                        _call("Glob", pattern="**/*.py"),
                    ],
                },
                {
                    "tool_calls": [_call("LS", path="src"), _call("Read", file_path="src/b.py", offset=10, limit=5)],
                    "interleave_tool_calls": True,
                },
                {"tool_calls": [_call("TodoWrite", todos=[]), _call("Bash", command="echo 'quoted \"x\"'")]},
                "All done.",
            ]
        },
        "midstream_error": {
            "steps": [
                {
                    "text": "this answer is overloaded half-way",
                    "stream_error": {"type": "overloaded_error", "after": 4},
                },
                {"text": "and this one has a server error", "stream_error": {"type": "api_error", "after": 2}},
                "the retry went through",
            ]
        },
        "rate_limited": {
            "steps": [
                {"error": {"status": 429, "retry_after": 0.05}},
                {"error": {"status": 429, "retry_after_ms": 20}},
                "after waiting as told",
            ]
        },
        "overloaded_then_ok": {"steps": [{"error": {"status": 529}}, {"error": {"status": 503}}, "fine now"]},
        "broken_streams": {
            "steps": [
                {"text": "a reply whose connection closes mid-way", "break_after": 4},
                {"text": "a reply whose connection is reset mid-way", "reset_after": 3},
                {"empty_body": True},
                "the whole reply",
            ]
        },
        "stalled_stream": {"steps": [{"text": "never finishes", "stall_after": 2, "stall_s": 5}, "on time"]},
        "refused": {
            "steps": [
                {"error": {"status": 401, "message": "invalid x-api-key"}},
                {"error": {"status": 400, "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
                {"error": {"status": 404, "message": "model: nosuch"}},
                "still serving",
            ]
        },
    }
