"""One list of credential stores for both paths (issue #30, item 11): with the sandbox on, a
read of the gh token, ~/.npmrc, Claude's or keel's own credentials... is not auto-allowed (it
asks, as without the sandbox) and the sandbox hides the store anyway; without the sandbox, a
read of one asks even when a working directory holds the home; reads outside the working
directories still ask."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.paths import CREDENTIAL_STORES, KEEL_PRIVATE
from agentkeel.policy.sandbox import Sandbox, parse_config
from sandbox_harness import SandboxedBash, bwrap_works

SECRET = "obviously-fake-credential"

# (path under the home, a command reading it)
STORES = [
    (".config/gh/hosts.yml", "cat ~/.config/gh/hosts.yml"),
    (".npmrc", "cat ~/.npmrc"),
    (".claude/.credentials.json", "cat ~/.claude/.credentials.json"),
    (".docker/config.json", "cat ~/.docker/config.json"),
    (".kube/config", "cat ~/.kube/config"),
    (".netrc", "cat ~/.netrc"),
    (".git-credentials", "cat ~/.git-credentials"),
    (".pypirc", "cat ~/.pypirc"),
    (".config/gcloud/credentials.db", "cat ~/.config/gcloud/credentials.db"),
    (
        ".config/gcloud/application_default_credentials.json",
        "head ~/.config/gcloud/application_default_credentials.json",
    ),
    (".azure/msal_token_cache.json", "cat ~/.azure/msal_token_cache.json"),
    (".aws/credentials", "cat ~/.aws/credentials"),
    (".config/git/credentials", "cat ~/.config/git/credentials"),
    (".cargo/credentials.toml", "cat ~/.cargo/credentials.toml"),
    (".keel/settings.json", "cat ~/.keel/settings.json"),  # keel's own: $KEEL_HOME (here ~/.keel)
]
# the same stores, reached in other ways the analysis reads
OTHER_FORMS = [
    "cat $HOME/.npmrc",
    "cat ~/.np*rc",
    "cat < ~/.npmrc",
    "grep -r token ~/.config",
    "base64 ~/.config/gh/hosts.yml",
    "cp ~/.npmrc npmrc.txt",
    "tail -n 1 ~/.keel/projects/x/s.jsonl",
]


@pytest.fixture
def home() -> Path:
    home = Path(os.environ["HOME"])
    for rel, _ in STORES:
        p = home / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"token={SECRET}\n")
    (home / ".keel" / "projects" / "x").mkdir(parents=True)
    (home / ".keel" / "projects" / "x" / "s.jsonl").write_text(f'{{"text": "{SECRET}"}}\n')
    (home / "notes.txt").write_text("notes\n")
    return home


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    p = tmp_path / "p"
    p.mkdir()
    (p / "a.txt").write_text("a\n")
    return p


def _engine(cwd: Path, home: Path, *, sandbox: bool, mode: str = "default") -> PermissionEngine:
    engine = PermissionEngine(cwd=str(cwd), home=str(home), keel_home=str(home / ".keel"), mode=mode)  # type: ignore[arg-type]
    if sandbox:
        box = Sandbox(parse_config({"enabled": True}), cwd=cwd, home=home, keel_home=home / ".keel", engine=engine)
        if not box.active:
            pytest.skip("bubblewrap cannot create namespaces here")
        engine.sandbox_auto_allow = box.auto_allow
    return engine


@pytest.mark.parametrize("command", [c for _, c in STORES] + OTHER_FORMS)
def test_with_the_sandbox_on_a_credential_read_is_not_auto_allowed(home: Path, proj: Path, command: str) -> None:
    decision = _engine(proj, home, sandbox=True).decide("Bash", {"command": command})
    assert decision.decision == "ask", (command, decision.reason)
    assert "credential store" in decision.reason or "protected" in decision.reason  # cp: .npmrc is both
    denied = _engine(proj, home, sandbox=True, mode="dontAsk").decide("Bash", {"command": command})
    assert denied.decision == "deny"


def test_with_the_sandbox_on_other_commands_are_still_auto_allowed(home: Path, proj: Path) -> None:
    engine = _engine(proj, home, sandbox=True)
    for command in ("make", "python3 build.py", "cat a.txt", "cat /etc/hostname", "ls ~"):
        assert engine.decide("Bash", {"command": command}).decision == "allow", command


@pytest.mark.parametrize("command", [c for _, c in STORES] + OTHER_FORMS)
def test_without_the_sandbox_a_credential_read_asks_even_with_the_home_as_working_directory(
    home: Path, command: str
) -> None:
    decision = _engine(home, home, sandbox=False).decide("Bash", {"command": command})
    assert decision.decision == "ask", (command, decision.reason)
    assert "credential store" in decision.reason or "protected" in decision.reason  # cp: .npmrc is both


def test_file_tools_ask_for_a_credential_store_inside_the_working_directories(home: Path) -> None:
    engine = _engine(home, home, sandbox=False)
    for rel, _ in STORES:
        decision = engine.decide("Read", {"file_path": str(home / rel)})
        assert decision.decision == "ask" and "credential store" in decision.reason, rel
    assert engine.decide("Grep", {"pattern": "token", "path": str(home / ".config")}).decision == "ask"
    assert engine.decide("Read", {"file_path": str(home / "notes.txt")}).decision == "allow"
    assert engine.decide("Bash", {"command": "cat notes.txt"}).decision == "allow"


def test_reads_outside_the_working_directories_still_ask(home: Path, proj: Path) -> None:
    engine = _engine(proj, home, sandbox=False)
    for command in ("cat ~/notes.txt", "cat /etc/hostname", "cat ~/.npmrc"):
        assert engine.decide("Bash", {"command": command}).decision == "ask", command
    assert engine.decide("Read", {"file_path": str(home / "notes.txt")}).decision == "ask"
    assert engine.decide("Bash", {"command": "cat a.txt"}).decision == "allow"


def test_an_allow_rule_the_user_wrote_still_decides(home: Path) -> None:
    engine = _engine(home, home, sandbox=False)
    engine.add(["Read(~/.npmrc)", "Bash(cat *)"], "allow", "test")
    assert engine.decide("Read", {"file_path": str(home / ".npmrc")}).decision == "allow"
    assert engine.decide("Bash", {"command": "cat ~/.npmrc"}).decision == "allow"


@pytest.fixture
def bash(proj: Path, home: Path) -> Iterator[SandboxedBash]:
    if not bwrap_works():
        pytest.skip("bubblewrap cannot create namespaces here")
    b = SandboxedBash(proj, home, keel_home=home / ".keel")  # under Bash(*): it runs, sandboxed
    yield b
    b.close()


@pytest.mark.parametrize("command", [c for _, c in STORES] + OTHER_FORMS)
def test_inside_the_sandbox_every_credential_store_is_hidden(bash: SandboxedBash, command: str) -> None:
    out = bash(command)
    assert SECRET not in out.content, command
    assert "[Sandbox denial:" in out.content, out.content


def test_one_list_serves_both_paths() -> None:
    wanted = {".config/gh", ".npmrc", ".pypirc", ".docker/config.json", ".kube", ".config/gcloud", ".azure", ".netrc"}
    wanted |= {".git-credentials", ".claude/.credentials.json", ".ssh", ".aws"}
    assert wanted <= set(CREDENTIAL_STORES)
    assert "settings.json" in KEEL_PRIVATE
    from agentkeel.policy.sandbox.mounts import default_hidden

    home, keel = "/h", "/h/.keel"
    assert default_hidden(home, keel) == [f"/h/{s}" for s in CREDENTIAL_STORES] + [
        f"/h/.keel/{k}" for k in KEEL_PRIVATE
    ]


def test_listing_the_home_and_searching_where_no_store_lies_do_not_ask(home: Path) -> None:
    engine = _engine(home, home, sandbox=False)
    (home / "src").mkdir()
    assert engine.decide("Glob", {"pattern": "**/*.py"}).decision == "allow"  # names only
    assert engine.decide("LS", {"path": str(home)}).decision == "allow"
    assert engine.decide("Grep", {"pattern": "x", "path": str(home / "src")}).decision == "allow"
    assert engine.decide("Bash", {"command": "grep -r x src"}).decision == "allow"
    assert engine.decide("Grep", {"pattern": "x"}).decision == "ask"  # the home's files: ~/.npmrc among them
