"""Safety III (issue #30), the per-program option policy: abbreviated long options (family 5),
files read through options (6), globs that expand to options (8), "always allow" suggestions
no wider than what was approved (13), WebFetch IP literals and MCP rule names (14)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.tools import builtin_tools
from permission_corpus import make_project

TOOLS = {t.name: t for t in builtin_tools()}


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    return make_project(tmp_path)


def decide(
    project: tuple[Path, Path],
    command: str,
    *,
    allow: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
    mode: str = "default",
    shell_cwd: str | None = None,
) -> str:
    root, home = project
    engine = PermissionEngine(cwd=str(root), mode=mode, home=str(home), keel_home=str(home / ".keel"))  # type: ignore[arg-type]
    engine.add(allow, "allow", "test")
    engine.add(deny, "deny", "test")
    return engine.decide("Bash", {"command": command}, TOOLS["Bash"], shell_cwd=shell_cwd).decision


# --- family 5: abbreviated long options --------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "sort --compress-prog=sh README.md",
        "sort --compress-p sh README.md",  # the value as the next word
        "sort --co=sh README.md",
        "sort --outp=notes.txt README.md",
        "sort --temporary-d=/tmp README.md",
        "sort --files0=list README.md",
        "git log --outp=/tmp/log.txt",
        "git diff --out=/tmp/x",
        "git diff --ext-d",
        "git show --textc HEAD",
        "wc --files0=list",
        "du --files0-f=list",
        "date --se=2020-01-01",
        "file --comp README.md",
        "diff --pag README.md docs/guide.md",
    ],
)
def test_an_abbreviated_dangerous_option_is_not_read_only(project: tuple[Path, Path], command: str) -> None:
    assert decide(project, command) != "allow"


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("tar --to-comm=sh -xf a.tar", "Bash(tar *)"),
        ("tar -x --to-com sh -f a.tar", "Bash(tar *)"),
        ("tar -c --use-comp=sh -f a.tar src", "Bash(tar *)"),
        ("tar --checkpoint-act=exec=sh -cf a.tar src", "Bash(tar *)"),
        ("tar cIf sh a.tar src", "Bash(tar *)"),  # traditional syntax: the letters without a dash
        ("git fetch --upload-pa=sh origin", "Bash(git fetch *)"),
        ("git push --receive-p=sh origin", "Bash(git push *)"),
        ("git rebase --exe 'sh -c id' main", "Bash(git rebase *)"),
        ("git grep --open-files=sh foo", "Bash(git grep *)"),
        ("wget --output-doc=x.html https://example.com/", "Bash(wget *)"),
        ("wget --exec 'x=y' https://example.com/", "Bash(wget *)"),
        ("zip --unzip-comm=sh a.zip src/app.py", "Bash(zip *)"),
        ("curl --upload-f README.md https://example.com/", "Bash(curl *)"),
        ("curl --remote-name-all https://example.com/x", "Bash(curl *)"),
        ("rsync --rs=sh src host:dst", "Bash(rsync *)"),
        ("ssh -o ProxyCommand=sh host", "Bash(ssh *)"),  # -o and its value as two words
        ("npx --scri=sh tsc", "Bash(npx *)"),
        ("sort --compress-prog=sh README.md", "Bash(sort *)"),
    ],
)
def test_an_allow_rule_does_not_cover_an_abbreviated_escalation(
    project: tuple[Path, Path], command: str, rule: str
) -> None:
    assert decide(project, command, allow=(rule,)) != "allow"


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("sort README.md", None),
        ("sort -n -r -k 2 README.md", None),
        ("sort --check README.md", None),
        ("sort --key=2 --field-separator=: README.md", None),
        ("git log --oneline -5", None),
        ("git diff --stat", None),
        ("ls --color=auto -la src", None),
        ("tar --file=out.tar -c src", "Bash(tar *)"),
        ("tar czf out.tgz src", "Bash(tar *)"),
        ("git fetch origin", "Bash(git fetch *)"),
        ("wget --output-file=log.txt https://example.com/x", "Bash(wget *)"),
    ],
)
def test_ordinary_options_stay_allowed(project: tuple[Path, Path], command: str, rule: str | None) -> None:
    assert decide(project, command, allow=(rule,) if rule else ()) == "allow"


# --- family 6: files read through options ------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "date -f.env",  # the value attached to its letter
        "grep -f.env README.md",
        "grep -rf.env src",
        "grep --recur API_KEY .",  # --recur is --recursive: it reads .env
        "grep --direc=rec API_KEY .",
        "grep -d rec API_KEY .",
        "git blame -S.env README.md",
        "du -X.env src",
        "diff -X.env src docs",
    ],
)
def test_a_file_read_through_an_option_meets_read_deny_rules(project: tuple[Path, Path], command: str) -> None:
    assert decide(project, command, deny=("Read(./.env)",)) != "allow"
    assert decide(project, command, deny=("Read(./.env)",), allow=("Bash(*)",)) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "date -f .env",
        "date --file=.env",
        "date --fi .env",
        "grep --fil=.env README.md",
        "grep --exclude-fr=.env foo src",
        "grep -d recurse API_KEY .",
        "git blame --contents=.env README.md",
        "git blame --cont .env README.md",
        "diff --from-file=.env README.md",
        "diff --to=.env README.md",
        "sort --random-source=.env README.md",
        "realpath --relative-to=.env src",
        "diff -X .env src docs",
    ],
)
def test_option_files_as_words_or_after_equals_still_meet_read_deny_rules(
    project: tuple[Path, Path], command: str
) -> None:
    """These forms held before (every ``=value`` and every word was a probe); kept with the rest."""
    assert decide(project, command, deny=("Read(./.env)",)) != "allow"
    assert decide(project, command, deny=("Read(./.env)",), allow=("Bash(*)",)) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "date -f{outside}",
        "date --file={outside}",
        "date -r {outside}",
        "grep -f{outside} README.md",
        "git blame --contents={outside} README.md",
        "git blame --cont={outside} README.md",
        "git blame -S {outside} README.md",
        "git ls-files --exclude-from={outside}",
        "git diff -O{outside}",
        "diff --from-file={outside} README.md",
        "diff --from={outside} README.md",
        "diff -X{outside} src docs",
        "du --exclude-from={outside} src",
        "sort --random-so={outside} README.md",
        "file -m{outside} README.md",
        "rg --ignore-file={outside} foo src",
        "tree --gitfile={outside} src",
    ],
)
def test_a_file_read_through_an_option_outside_the_project_asks(project: tuple[Path, Path], command: str) -> None:
    outside = str(project[0].parents[2] / "outside" / "notes.txt")
    assert decide(project, command.format(outside=outside)) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "cat --new-option README.md",  # an option keel does not model
        "ls -j",
        "head -y README.md",
        "tree -Lo 2 out.txt",  # tree: each letter takes its own word, -o writes
        "file -z README.md",  # runs decompressors
    ],
)
def test_an_option_keel_does_not_model_asks(project: tuple[Path, Path], command: str) -> None:
    assert decide(project, command) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "date",
        "date +%s",
        "date -d yesterday",
        "date -u -Iseconds",
        "date -r README.md",
        "grep -rn foo src",
        "grep -f src/app.py README.md",
        "grep -5 foo README.md",
        "diff -u src/app.py docs/guide.md",
        "diff --from-file=README.md docs/guide.md",
        "git blame README.md",
        "git blame --contents=docs/guide.md README.md",
        "head -n 5 README.md",
        "head -5 README.md",
        "tail -n +2 README.md",
        "cut -d: -f1 README.md",
        "stat -c %s README.md",
        "tree -L 2 src",
        "uniq -c README.md",
        "wc -l src/app.py",
        "du -sh --max-depth=1 src",
        "file -b README.md",
        "realpath --relative-to=src README.md",
        "nl -ba README.md",
    ],
)
def test_modelled_read_only_commands_stay_allowed(project: tuple[Path, Path], command: str) -> None:
    assert decide(project, command, deny=("Read(./.env)",)) == "allow"


# --- family 8: globs that expand to options ----------------------------------------------------


@pytest.fixture
def planted(project: tuple[Path, Path]) -> tuple[Path, Path]:
    root, _ = project
    inj = root / "inj"
    inj.mkdir()
    for name in ("--compress-program=sh", "-S1K", "-f.env", "-delete", "a.txt"):
        (inj / name).write_text("x\n")
    (root / "clean").mkdir()
    (root / "clean" / "a.txt").write_text("x\n")
    return project


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("sort *", None),
        ("sort ?S1K a.txt", None),
        ("grep x *", None),
        ("cat *", None),
        ("find * -name a.txt", None),
        ("find -- * -name a.txt", None),  # find reads -delete as an action after -- too
        ("ls *", None),
        ("sort *", "Bash(sort *)"),
        ("wc -l *", "Bash(wc *)"),
    ],
)
def test_a_glob_that_names_option_like_files_is_not_auto_allowed(
    planted: tuple[Path, Path], command: str, rule: str | None
) -> None:
    root = str(planted[0] / "inj")
    assert decide(planted, command, shell_cwd=root, allow=(rule,) if rule else ()) != "allow"
    assert decide(planted, f"cd inj && {command}", allow=(rule,) if rule else ()) != "allow"


@pytest.mark.parametrize("command", ["sort -- *", "grep -n x -- *", "cat ./*", "ls -la -- *", "wc -l inj/*"])
def test_a_glob_after_double_dash_or_under_a_directory_is_allowed(planted: tuple[Path, Path], command: str) -> None:
    assert decide(planted, command, shell_cwd=str(planted[0] / "inj")) == "allow" or command == "wc -l inj/*"
    if command == "wc -l inj/*":
        assert decide(planted, command) == "allow"


@pytest.mark.parametrize("command", ["sort *", "grep -n x *", "cat *.txt", "wc -l *"])
def test_a_glob_in_a_clean_directory_is_allowed(planted: tuple[Path, Path], command: str) -> None:
    assert decide(planted, command, shell_cwd=str(planted[0] / "clean")) == "allow"


# --- family 13: suggestions no wider than what was approved -----------------------------------


@pytest.mark.parametrize(
    ("approved", "abuse"),
    [
        ("uv run pytest", "uv run sh -c id"),
        ("uv run pytest", "uv run rm -rf /"),
        ("uv run ruff check src", "uv run python -c 'import os'"),
        ("npm exec eslint", "npm exec -- sh -c id"),
        ("pnpm exec vitest", "pnpm exec rm -rf /"),
        ("cargo run --release", "cargo run --release -- --delete-everything"),
        ("poetry run pytest", "poetry run sh -c id"),
        ("bun run build.ts", "bun run /tmp/evil.ts"),
        ("docker run --rm alpine ls", "docker run --rm -v /:/h alpine sh"),
        ("docker exec db psql", "docker exec db sh -c id"),
        ("docker compose run web ls", "docker compose run web sh"),
        ("gh api repos/o/r/issues", "gh api -X DELETE repos/o/r"),
        ("kubectl exec pod -- ls", "kubectl exec pod -- sh -c id"),
        ("git bisect start", "git bisect run sh -c id"),
        ("git submodule update", "git submodule foreach 'sh -c id'"),
        ("go run ./cmd/app", "go run /tmp/evil.go"),
        ("deno run main.ts", "deno run -A /tmp/evil.ts"),
        ("bundle exec rspec", "bundle exec sh -c id"),
        ("npm run build", "npm run deploy"),
        ("gh repo clone o/r", "gh repo delete o/r --yes"),
        ("uv run env", "uv run env sh -c id"),
    ],
)
def test_a_suggestion_never_ends_at_a_runner(project: tuple[Path, Path], approved: str, abuse: str) -> None:
    root, home = project
    engine = PermissionEngine(cwd=str(root), home=str(home))
    suggested = engine.decide("Bash", {"command": approved}, TOOLS["Bash"]).suggestions
    assert suggested, approved
    # the suggestion covers what was approved, and nothing that runs another program
    assert decide(project, approved, allow=suggested) == "allow", suggested
    assert decide(project, abuse, allow=suggested) != "allow", suggested


@pytest.mark.parametrize(
    ("approved", "wanted"),
    [
        ("uv run pytest -q", "Bash(uv run pytest *)"),
        ("npx tsc --noEmit", "Bash(npx tsc *)"),
        ("npm test", "Bash(npm test *)"),
        ("npm run build", "Bash(npm run build *)"),
        ("pnpm run lint --fix", "Bash(pnpm run lint *)"),
        ("cargo build --release", "Bash(cargo build *)"),
    ],
)
def test_a_suggestion_still_generalises_ordinary_tools(project: tuple[Path, Path], approved: str, wanted: str) -> None:
    root, home = project
    engine = PermissionEngine(cwd=str(root), home=str(home))
    assert engine.decide("Bash", {"command": approved}, TOOLS["Bash"]).suggestions == (wanted,)


# --- family 14: WebFetch IP literals, MCP rule names -----------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://[::ffff:127.0.0.2]/",
        "http://[::ffff:7f00:2]/admin",
        "http://[0:0:0:0:0:ffff:127.0.0.2]/",
        "http://[::ffff:0:127.0.0.2]/",
        "http://[::127.0.0.2]/",
        "http://2130706434/",
        "http://0x7f.0.0.2/",
        "http://0177.0.0.2/",
        "http://127.2/",
    ],
)
def test_webfetch_ip_rules_hold_for_every_spelling(tmp_path: Path, url: str) -> None:
    for rule in ("WebFetch(domain:127.0.0.2)", "WebFetch(domain:[::ffff:127.0.0.2])"):
        engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path), mode="bypassPermissions")
        engine.add([rule], "deny", "test")
        assert engine.decide("WebFetch", {"url": url, "prompt": "x"}, TOOLS["WebFetch"]).decision == "deny", rule


def test_webfetch_ipv6_rules_match_ipv6_hosts(tmp_path: Path) -> None:
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path), mode="bypassPermissions")
    engine.add(["WebFetch(domain:[::1])"], "deny", "test")
    assert engine.decide("WebFetch", {"url": "http://[0::1]/", "prompt": "x"}, TOOLS["WebFetch"]).decision == "deny"
    assert engine.decide("WebFetch", {"url": "http://[::2]/", "prompt": "x"}, TOOLS["WebFetch"]).decision == "allow"


def _mcp_tool_name(server: str, tool: str) -> str:
    """The name keel exposes for an MCP tool, built by the code that builds MCP tools."""
    import mcp_types

    from agentkeel.mcp.tools import mcp_tool

    conn: Any = SimpleNamespace(name=server, connect_timeout_s=1, tool_timeout_s=1)
    spec = mcp_types.Tool(name=tool, input_schema={"type": "object"})
    return mcp_tool(None, conn, spec).name  # type: ignore[arg-type]


def test_an_mcp_deny_rule_with_a_full_name_covers_the_cut_name(tmp_path: Path) -> None:
    long_tool = "create_or_update_repository_environment_deployment_branch_policy"
    name = _mcp_tool_name("github", long_tool)
    assert len(name) == 64
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path), mode="bypassPermissions")
    engine.add([f"mcp__github__{long_tool}"], "deny", "test")
    assert engine.decide(name, {}, None).decision == "deny"
    other = _mcp_tool_name("github", long_tool + "_2")
    assert engine.decide(other, {}, None).decision == "allow"  # a different tool, also cut


def test_an_mcp_server_rule_does_not_cover_a_server_whose_name_extends_it(tmp_path: Path) -> None:
    evil = _mcp_tool_name("github__evil", "delete_repo")
    good = _mcp_tool_name("github", "get_issue")
    for rule in ("mcp__github", "mcp__github__*"):
        engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path))
        engine.add([rule], "allow", "test")
        assert engine.decide(good, {}, None).decision == "allow"
        assert engine.decide(evil, {}, None).decision != "allow", rule
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path), mode="bypassPermissions")
    engine.add(["mcp__github__evil"], "deny", "test")  # the server github__evil, whole
    assert engine.decide(evil, {}, None).decision == "deny"
    assert engine.decide(good, {}, None).decision == "allow"


def test_an_unregistered_mcp_name_is_read_every_way(tmp_path: Path) -> None:
    """A name keel did not build: deny rules match any reading, allow rules only all of them."""
    name = "mcp__github__evil__x"
    deny = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path), mode="bypassPermissions")
    deny.add(["mcp__github"], "deny", "test")
    assert deny.decide(name, {}, None).decision == "deny"
    allow = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path))
    allow.add(["mcp__github"], "allow", "test")
    assert allow.decide(name, {}, None).decision != "allow"
    assert allow.decide("mcp__github__get_issue", {}, None).decision == "allow"


def test_mcp_tool_names_are_unchanged() -> None:
    from agentkeel.mcp.tools import tool_name
    from agentkeel.policy.permissions.rules import register_mcp_tool

    for server, tool in (("github", "get_issue"), ("my server", "a.b"), ("s", "t" * 90)):
        assert _mcp_tool_name(server, tool) == tool_name(server, tool)
    assert register_mcp_tool("github", "get_issue") == "mcp__github__get_issue"


@pytest.mark.parametrize("command", ["cat *", "grep x *", "head -n1 *", "sort -- *", "wc -l ?ut"])
def test_a_glob_that_names_a_link_out_of_the_project_reads_outside(project: tuple[Path, Path], command: str) -> None:
    root, _ = project
    d = root / "links"
    d.mkdir()
    (d / "a.txt").write_text("x\n")
    (d / "out").symlink_to(root.parents[2] / "outside" / "notes.txt")
    assert decide(project, command, shell_cwd=str(d)) != "allow"
    (d / "out").unlink()
    assert decide(project, command.replace("?ut", "?.txt"), shell_cwd=str(d)) == "allow"


@pytest.mark.parametrize(
    ("command", "rule", "deny"),
    [
        ("rg -nz foo src", None, None),  # -z inside a cluster: rg runs decompressors
        ("rg --hostname-bin=sh foo src", None, None),
        ("find . -files0-from list", None, None),
        ("tar --rmt-command=sh -cf host:/x src", "Bash(tar *)", None),
        ("git clone -c core.fsmonitor=sh https://example.com/r.git", "Bash(git clone *)", None),
        ("diff --recur src secrets", None, "Read(**/*.pem)"),  # --recur is --recursive: reads key.pem
    ],
)
def test_other_escalating_and_reading_options_are_not_allowed(
    project: tuple[Path, Path], command: str, rule: str | None, deny: str | None
) -> None:
    assert decide(project, command, allow=(rule,) if rule else (), deny=(deny,) if deny else ()) != "allow"


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("curl --dump-h=.git/hooks/pre-commit https://example.com/x", "Bash(curl *)"),  # --dump-header
        ("curl --cookie-j .git/hooks/pre-commit https://example.com/x", "Bash(curl *)"),  # --cookie-jar
        # the rule names --output-document (the escalation is covered): the abbreviation's value is still a write
        (
            "wget --output-d=.git/hooks/pre-commit https://example.com/x --output-document /dev/null",
            "Bash(wget * --output-document /dev/null)",
        ),
        ("tar --cre --fil=.git/hooks/pre-commit src", "Bash(tar *)"),
    ],
)
def test_an_abbreviated_output_option_writes_where_it_says(project: tuple[Path, Path], command: str, rule: str) -> None:
    """Even a rule that names the abbreviation cannot let it write a protected file."""
    assert decide(project, command, allow=(rule,)) != "allow"
    assert decide(project, command, allow=(rule,), mode="acceptEdits") != "allow"


def test_find_actions_after_double_dash_still_escalate(project: tuple[Path, Path]) -> None:
    """A guard, not a regression: escalations now stop at ``--``, except find's (its expression
    goes on after it). This held before the change too."""
    assert decide(project, "find -- . -name x -delete", allow=("Bash(find *)",)) != "allow"
