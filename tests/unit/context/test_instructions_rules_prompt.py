"""The context package's parts on real files: instruction layers, imports, rules, the prompt
builder, output styles, the compaction event in the view, the estimator and the working state."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from agentkeel.context.builder import PromptBuilder, Section, fit
from agentkeel.context.compaction import CLEARED, Plan, clear_tool_results, compact, split_point
from agentkeel.context.instructions import ImportPolicy, Instructions
from agentkeel.context.state import WorkingState
from agentkeel.context.styles import find_style
from agentkeel.context.tokens import Estimator, Window
from agentkeel.core.events import AssistantMessage, TodosUpdated, ToolFinished, ToolResults, UserMessage
from agentkeel.core.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from agentkeel.core.view import Compaction, ViewBuilder, messages_from_events


def layout(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    home, keel_home, repo = tmp_path / "home", tmp_path / "keel", tmp_path / "repo"
    cwd = repo / "pkg"
    for d in (home / ".claude", keel_home, repo / ".git", cwd):
        d.mkdir(parents=True, exist_ok=True)
    return home, keel_home, repo, cwd


def load(
    tmp_path: Path, home: Path, keel_home: Path, cwd: Path, managed: Path | None = None, trusted: bool = False
) -> Instructions:
    env = {"KEEL_MANAGED_INSTRUCTIONS": str(managed or tmp_path / "no-managed.md")}
    return Instructions.load(cwd, home, keel_home, env, ImportPolicy(trusted=trusted))


def test_layers_load_lowest_first_with_local_files(tmp_path: Path) -> None:
    home, keel_home, repo, cwd = layout(tmp_path)
    managed = tmp_path / "managed.md"
    managed.write_text("managed")
    (keel_home / "KEEL.md").write_text("user keel")
    (home / ".claude" / "CLAUDE.md").write_text("user claude")
    (repo / "AGENTS.md").write_text("root agents")
    (repo / ".claude").mkdir()
    (repo / ".claude" / "CLAUDE.md").write_text("root dot-claude")
    (cwd / "KEEL.md").write_text("pkg keel")
    (cwd / "CLAUDE.local.md").write_text("pkg local")
    got = load(tmp_path, home, keel_home, cwd, managed)
    assert [(f.scope, f.text) for f in got.files] == [
        ("managed", "managed"),
        ("user", "user keel"),
        ("user", "user claude"),
        ("project", "root agents"),
        ("project", "root dot-claude"),
        ("project", "pkg keel"),
        ("local", "pkg local"),
    ]


def test_imports_relative_home_absolute_depth_cycles_missing(tmp_path: Path) -> None:
    home, keel_home, repo, cwd = layout(tmp_path)
    (home / "notes.md").write_text("home import")
    absolute = tmp_path / "abs.md"
    absolute.write_text("absolute import")
    (repo / "docs").mkdir()
    (repo / "docs" / "a.md").write_text("A imports @b.md")
    (repo / "docs" / "b.md").write_text("B imports @a.md (a cycle)")
    chain = [repo / "docs" / f"d{i}.md" for i in range(7)]
    for i, p in enumerate(chain):
        p.write_text(f"depth {i} @d{i + 1}.md")
    (repo / "AGENTS.md").write_text(
        f"see @docs/a.md and @~/notes.md and @{absolute} and @docs/d0.md and @nope/missing.md;"
        " mail me@example.com, ask @alice; `@docs/skipped.md` in code is not an import"
    )
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        got = load(tmp_path, home, keel_home, cwd, trusted=True)  # imports from outside: a trusted folder
    finally:
        if old_home is not None:
            os.environ["HOME"] = old_home
    texts = [f.text for f in got.files]
    assert "A imports @b.md" in texts and "B imports @a.md (a cycle)" in texts
    assert "home import" in texts and "absolute import" in texts
    assert "depth 4 @d5.md" in texts and "depth 5 @d6.md" not in texts  # five levels below AGENTS.md
    notes = "\n".join(got.notes)
    assert "import cycle" in notes and "missing.md not found" in notes and "at most 5 deep" in notes
    assert "skipped.md" not in notes and "alice" not in notes and "example.com" not in notes
    assert all(f.reason == "import" for f in got.files if f.text != texts[0])


def test_size_warning(tmp_path: Path) -> None:
    home, keel_home, repo, cwd = layout(tmp_path)
    (repo / "CLAUDE.md").write_text("x" * 40_001)
    got = load(tmp_path, home, keel_home, cwd)
    assert any("over 40,000" in n for n in got.notes)


def test_nested_dirs_and_path_rules_load_when_a_file_is_touched(tmp_path: Path) -> None:
    home, keel_home, repo, cwd = layout(tmp_path)
    (repo / "lib" / "deep").mkdir(parents=True)
    (repo / "lib" / "AGENTS.md").write_text("lib rules")
    (repo / "lib" / "deep" / "CLAUDE.md").write_text("deep rules")
    rules = repo / ".keel" / "rules" / "lang"
    rules.mkdir(parents=True)
    (rules / "always.md").write_text("always on")
    (rules / "py.md").write_text("---\npaths: lib/**/*.py, tools/*.py\n---\npython only")
    (repo / ".claude" / "rules").mkdir(parents=True)
    (repo / ".claude" / "rules" / "ts.md").write_text('---\npaths: ["**/*.{ts,tsx}"]\n---\nts only')
    got = load(tmp_path, home, keel_home, cwd)
    assert [f.text for f in got.startup()] == ["always on"]
    assert got.touched(repo / "README.md") == []
    added = got.touched(repo / "lib" / "deep" / "x.py")
    assert [f.text for f in added] == ["lib rules", "deep rules", "python only"]
    assert [f.reason for f in added] == ["nested_traversal", "nested_traversal", "path_glob_match"]
    assert got.touched(repo / "lib" / "deep" / "y.py") == []  # each once
    assert [f.text for f in got.touched(repo / "web" / "a.tsx")] == ["ts only"]
    assert got.touched(tmp_path / "elsewhere.py") == []  # outside the project
    assert "python only" in [f.text for f in got.for_files([str(repo / "lib" / "z.py")])]


def test_builder_fits_by_priority_keeps_order_and_memoises(tmp_path: Path) -> None:
    sections = [
        Section("identity", 100, True, "i" * 300),
        Section("user", 60, False, "u" * 300),
        Section("project", 80, False, "p" * 300),
        Section("rules", 50, False, "r" * 300),
    ]
    dropped: list[str] = []
    assert [s.id for s in fit(sections, 210, dropped)] == ["identity", "project"]
    assert len(dropped) == 2 and "rules" in dropped[0]

    home, keel_home, repo, cwd = layout(tmp_path)
    agents = repo / "AGENTS.md"
    agents.write_text("first version")
    style, _ = find_style(None, cwd, home)
    builder = PromptBuilder(cwd, "anthropic:m", load(tmp_path, home, keel_home, cwd), style, 10_000)
    builder.check_interval_s = 0  # check the sources on every call
    first = builder.text()
    assert builder.text() == first and builder.builds == 1  # memoised
    assert first.index("You are keel") < first.index("# Care") < first.index("first version")
    time.sleep(0.01)
    agents.write_text("second version, longer")
    assert "second version" in builder.text() and builder.builds == 2  # a source changed


def test_output_styles(tmp_path: Path) -> None:
    home, keel_home, _repo, cwd = layout(tmp_path)
    styles = cwd / ".claude" / "output-styles"
    styles.mkdir(parents=True)
    (styles / "pirate.md").write_text("---\nname: Pirate\ndescription: arr\n---\nTalk like a pirate.")
    style, warning = find_style("pirate", cwd, home)
    assert style.name == "Pirate" and not style.keep_coding and not warning
    text = PromptBuilder(cwd, "m", load(tmp_path, home, keel_home, cwd), style, 10_000).text()
    assert "Talk like a pirate." in text and "Read before you edit" not in text
    explanatory, _ = find_style("Explanatory", cwd, home)
    assert "Insight" in PromptBuilder(cwd, "m", load(tmp_path, home, keel_home, cwd), explanatory, 10_000).text()
    _, warning = find_style("nosuch", cwd, home)
    assert "not found" in warning


def _turn(i: int, size: int = 2000) -> list[Message]:
    use = ToolUseBlock(id=f"t{i}", name="Read", input={"file_path": f"/f{i}"})
    return [
        Message(role="assistant", content=[TextBlock(text=f"reading {i}"), use]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=f"t{i}", content=f"content {i} " + "z" * size)]),
    ]


def test_compaction_event_rebases_the_view_live_and_resumed() -> None:
    events: list[object] = [UserMessage(message=Message.user("task"))]
    for i in range(3):
        a, r = _turn(i)
        events += [AssistantMessage(message=a), ToolResults(message=r)]
    kept = [Message.user("summary"), *_turn(2)]
    events.append(Compaction(messages=kept))
    a, r = _turn(3)
    events += [AssistantMessage(message=a), ToolResults(message=r)]
    live = ViewBuilder()
    for e in events:
        live.add_event(e)  # type: ignore[arg-type]
    resumed = messages_from_events(events)  # type: ignore[arg-type]
    assert live.messages() == resumed.messages and not resumed.repairs
    assert resumed.messages[0] == Message.user("summary") and len(resumed.messages) == 5


def test_cut_never_splits_a_tool_pair_and_stubs_name_the_call() -> None:
    est = Estimator("claude-x")
    msgs = [Message.user("task")] + [m for i in range(6) for m in _turn(i)]
    cut = split_point(msgs, est, keep=1500)
    assert msgs[cut].role == "assistant" and cut > 1
    cleared = clear_tool_results(msgs, keep_last=2)
    stub = cleared[2].content[0]
    assert (
        isinstance(stub, ToolResultBlock) and stub.text().startswith(CLEARED) and "Read(file_path=/f0)" in stub.text()
    )
    last = cleared[-1].content[0]
    assert isinstance(last, ToolResultBlock) and "z" * 100 in last.text()

    async def summarise(text: str, max_tokens: int) -> str:
        return "short"

    plan = Plan(target=2000, keep=1500, summary_max=300, summariser_input=50_000)
    out = asyncio.run(compact(msgs, plan, est, strategy="summarize", summarise=summarise, extra=["STATE"]))
    assert out is not None and out.stage == "summary"
    assert out.messages[0].role == "user" and out.messages[1].role == "assistant"
    uses = {b.id for m in out.messages for b in m.content if isinstance(b, ToolUseBlock)}
    results = {b.tool_use_id for m in out.messages for b in m.content if isinstance(b, ToolResultBlock)}
    assert uses == results and "STATE" in str(out.messages[0])


def test_estimator_calibrates_towards_reported_usage() -> None:
    est = Estimator("claude-sonnet-4-5")
    before = est.tokens(40_000)
    for _ in range(6):
        est.calibrate(40_000, 10_000)  # the provider says 4 characters a token
    assert before > est.tokens(40_000) >= 10_000  # closer, still on the safe side
    assert Window(1000, 200).state(400) == "safe" and Window(1000, 200).state(700) == "critical"
    assert Window(1000, 200).state(500 * 2) == "exceeded" and Window(1000, 200).state(490) == "warning"


def test_working_state_from_events() -> None:
    state = WorkingState()
    state.on_event(UserMessage(message=Message.user("fix the parser")))
    text = "Looked.\nDecision: keep the old API because callers depend on it\nFact: tests live in t/"
    state.on_event(AssistantMessage(message=Message(role="assistant", content=[TextBlock(text=text)])))
    state.on_event(
        ToolFinished(tool_use_id="1", name="Edit", is_error=False, duration_ms=1, input={"file_path": "/p.py"})
    )
    todos = [{"content": "write tests", "status": "pending"}, {"content": "finished-item", "status": "completed"}]
    state.on_event(TodosUpdated(todos=todos))
    shown = state.render()
    assert "fix the parser" in shown and "keep the old API because callers depend on it" in shown
    assert (
        "tests live in t/" in shown
        and "/p.py (changed)" in shown
        and "write tests" in shown
        and "finished-item" not in shown
    )
