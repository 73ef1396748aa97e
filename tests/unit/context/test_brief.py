"""keel's brief: the topics the system prompt covers, its size, what stays out of the cached prefix
(the date, the git snapshot), and the environment note on the first message: bounded, taken once,
taken again when the conversation's first message changes."""

from __future__ import annotations

import asyncio
import subprocess
from datetime import date
from pathlib import Path

from agentkeel.context.builder import BRIEF, PromptBuilder, environment_block
from agentkeel.context.instructions import Instructions
from agentkeel.context.styles import BUILTIN, find_style
from agentkeel.context.tokens import Estimator
from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import Message, TextBlock
from agentkeel.tools import builtin_tools

# what the brief must cover (issue #35 item 2), by topic id: the words are free, the topics are not
REQUIRED = {
    "working": {"understand", "scope", "verify", "report", "decisions"},
    "tools": {"dedicated", "no-reread", "parallel"},
    "git": {"commit", "destructive"},
    "care": {"confirm", "faithful", "private", "hooks", "denials", "untrusted"},
}
# The budget for the brief (the system prompt without the project's instruction files). Claude Code
# 2.1.328 sends ~28,300 characters (~8,500 tokens) of system prompt; keel says each rule once, in
# ~3,000 characters. 1,200 tokens leaves room for a few more rules; past it, the brief is growing
# into a manual and the rule belongs in a tool's description or in docs.
BRIEF_BUDGET_TOKENS = 1_200
# the environment note, worst case (20 status lines and 5 commits of 160 characters, long paths)
NOTE_BUDGET_TOKENS = 1_800


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def repo(tmp_path: Path, name: str = "repo") -> Path:
    root = tmp_path / name
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("a\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-q", "-m", "first commit")
    return root


def builder(cwd: Path, home: Path, today: date = date(2026, 1, 2), style: str | None = None) -> PromptBuilder:
    found, _ = find_style(style, cwd, home)
    instructions = Instructions.load(cwd, home, home / ".keel", {})
    return PromptBuilder(cwd, "anthropic:claude-sonnet-4-5", instructions, found, 50_000, today=lambda: today)


def request(*messages: Message) -> ModelRequest:
    return ModelRequest("claude-sonnet-4-5", "", list(messages), [], 1000)


def attach(b: PromptBuilder, req: ModelRequest) -> ModelRequest:
    return asyncio.run(b.attach(req))


def test_the_brief_covers_every_topic_in_its_own_section(tmp_path: Path) -> None:
    b = builder(repo(tmp_path), tmp_path)
    text, sections = b.build()
    ids = [s.id for s in sections]
    assert ids[:5] == ["identity", "working", "tools", "git", "care"], ids
    for part, topics in REQUIRED.items():
        assert topics <= set(BRIEF[part]), (part, topics - set(BRIEF[part]))
        for topic in topics:
            assert BRIEF[part][topic] in text, (part, topic)
    # the tools the guidance sends the model to are keel's real tools
    names = {t.name for t in builtin_tools()}
    for tool in ("Read", "Grep", "Glob", "LS", "Edit", "Write", "Bash", "TodoWrite"):
        assert tool in names and tool in text


def test_an_output_style_that_drops_coding_keeps_tools_git_and_care(tmp_path: Path) -> None:
    styles = tmp_path / "repo" / ".claude" / "output-styles"
    cwd = repo(tmp_path)
    styles.mkdir(parents=True)
    (styles / "plain.md").write_text("---\nname: plain\n---\nAnswer like a librarian.")
    b = builder(cwd, tmp_path, style="plain")
    ids = [s.id for s in b.build()[1]]
    assert "working" not in ids and {"tools", "git", "care", "style:plain"} <= set(ids)
    assert "coding agent" not in b.text()
    explanatory = builder(cwd, tmp_path, style="explanatory")
    assert BUILTIN["explanatory"].keep_coding and "working" in [s.id for s in explanatory.build()[1]]


def test_the_brief_stays_under_its_budget(tmp_path: Path) -> None:
    b = builder(repo(tmp_path), tmp_path)
    tokens = Estimator("claude-sonnet-4-5").tokens(len(b.text()))
    assert tokens <= BRIEF_BUDGET_TOKENS, tokens


def test_the_system_prompt_is_the_same_on_another_day_and_after_git_changes(tmp_path: Path) -> None:
    cwd = repo(tmp_path)
    monday = builder(cwd, tmp_path, today=date(2026, 3, 2))
    first = monday.text()
    (cwd / "b.txt").write_text("new\n")
    git(cwd, "add", "b.txt")
    git(cwd, "commit", "-q", "-m", "second commit")
    git(cwd, "checkout", "-q", "-b", "topic-branch-7")
    tuesday = builder(cwd, tmp_path, today=date(2026, 3, 3))
    assert tuesday.text() == first  # byte for byte: the provider's cached prefix survives midnight
    for volatile in ("2026-03-0", "first commit", "second commit", "topic-branch-7"):
        assert volatile not in first
    # ...and the date and the snapshot are in the note on the first message instead
    note = tuesday.note_for(request(Message.user("hi")))
    assert note is not None and "2026-03-03" in note and "topic-branch-7" in note and "second commit" in note


def test_the_note_goes_on_the_first_user_message_and_is_taken_once(tmp_path: Path) -> None:
    cwd = repo(tmp_path)
    b = builder(cwd, tmp_path)
    first = Message.user("fix the bug")
    sent = attach(b, request(first))
    assert sent.messages[0].content[:-1] == first.content  # the user's words, then the note
    note = sent.messages[0].content[-1]
    assert isinstance(note, TextBlock) and note.text.startswith("<environment>") and str(cwd) in note.text
    assert "main" in note.text and "first commit" in note.text
    # later turns of the session send the same bytes, though the repository changed meanwhile
    (cwd / "a.txt").write_text("changed\n")
    later = attach(b, request(first, Message(role="assistant", content=[TextBlock(text="ok")]), Message.user("go")))
    assert later.messages[0] == sent.messages[0] and len(later.messages) == 3
    assert later.messages[2] == Message.user("go")  # only the first message carries it
    # a compaction (a new first message) takes it again, with the change
    compacted = attach(b, request(Message.user("<summary of the session>")))
    assert "M a.txt" in compacted.messages[0].text() and "M a.txt" not in note.text
    # refresh() takes it again for the same conversation
    (cwd / "c.txt").write_text("untracked\n")
    b.refresh()
    assert "?? c.txt" in attach(b, request(first)).messages[0].text()


def test_a_large_change_set_gives_a_small_snapshot(tmp_path: Path) -> None:
    cwd = repo(tmp_path)
    for i in range(1200):
        (cwd / f"file_{i:04d}_{'x' * 40}.txt").write_text(f"{i}\n")
    git(cwd, "add", ".")
    git(cwd, "commit", "-q", "-m", "many files " + "y" * 400)
    for i in range(1200):
        (cwd / f"file_{i:04d}_{'x' * 40}.txt").write_text("changed\n")
    note = environment_block(cwd, "claude-sonnet-4-5", today=date(2026, 1, 2))
    assert "1200 paths" in note and "... and 1180 more" in note
    assert note.count("file_") == 20
    assert len(note) < 4_000, len(note)
    assert Estimator("claude-sonnet-4-5").tokens(len(note)) <= NOTE_BUDGET_TOKENS


def test_outside_a_repository_the_note_says_so(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    note = environment_block(plain, "m", (tmp_path / "other",), date(2026, 1, 2))
    assert "Git repository: no" in note and "Git branch" not in note
    assert f"Working directory: {plain}" in note and str(tmp_path / "other") in note
    assert "Today's date: 2026-01-02" in note and "Shell: bash" in note


def test_a_conversation_that_does_not_start_with_a_user_message_is_left_alone(tmp_path: Path) -> None:
    b = builder(repo(tmp_path), tmp_path)
    req = request(Message(role="assistant", content=[TextBlock(text="hello")]))
    assert attach(b, req) is req
    empty = request()
    assert attach(b, empty) is empty


def test_a_secret_in_a_commit_subject_is_masked_in_the_note(tmp_path: Path) -> None:
    cwd = repo(tmp_path)
    fake_token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # an obviously fake GitHub token
    (cwd / "a.txt").write_text("b\n")
    git(cwd, "commit", "-qam", f"oops {fake_token}")
    note = environment_block(cwd, "m", today=date(2026, 1, 2))
    assert fake_token not in note and "oops [REDACTED" in note


def test_a_subagent_gets_the_same_environment_note_without_the_snapshot(tmp_path: Path) -> None:
    from agentkeel.agents.defs import AgentDef
    from agentkeel.agents.spawner import child_system

    cwd = repo(tmp_path)
    system = child_system(AgentDef("reviewer", "reviews", "You review code."), cwd, "claude-haiku-4-5", "EXTRA")
    assert system.startswith("You review code.\n\n<environment>\n") and system.endswith("EXTRA")
    assert f"Working directory: {cwd}" in system and "Shell: bash" in system and "Model: claude-haiku-4-5" in system
    assert "Git repository: yes" in system and "first commit" not in system  # the parent has the snapshot


def test_the_snapshot_taken_ahead_serves_the_first_note_only(tmp_path: Path) -> None:
    cwd = repo(tmp_path)
    b = builder(cwd, tmp_path)
    b.prefetch()  # as a session does while it starts
    first = attach(b, request(Message.user("go"))).messages[0].text()
    assert "first commit" in first and "Working tree clean" in first
    (cwd / "new.txt").write_text("n\n")
    again = attach(b, request(Message.user("<a compaction's summary>"))).messages[0].text()
    assert "?? new.txt" in again  # a new conversation takes a new snapshot, not the early one
    plain = tmp_path / "plain"
    plain.mkdir()
    outside = builder(plain, tmp_path)
    outside.prefetch()  # nothing to take outside a repository
    assert "Git repository: no" in attach(outside, request(Message.user("go"))).messages[0].text()
