"""Action normalisation (permissions/actions.py): a deny rule names an action, and holds against
every spelling of it the program accepts; a look-alike that is not the action still runs under
an allow rule. Each family is tested in both directions through the engine the loop uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.actions import actions, canonical

# (allow rules, deny rules, spellings of the denied action, look-alikes that are not it)
FAMILIES: dict[str, tuple[list[str], list[str], list[str], list[str]]] = {
    "program path": (
        ["Bash(/usr/bin/*)", "Bash(./*)"],
        ["Bash(rm *)", "Bash(sudo *)"],
        ["/usr/bin/rm -rf x", "./rm x", "/usr/bin/sudo ls", "/bin/rm x"],
        ["/usr/bin/ls", "./rmdir-tool x", "/usr/bin/sudoku"],
    ),
    "git globals": (
        ["Bash(git *)"],
        ["Bash(git reset --hard*)"],
        [
            "git -C . reset --hard",
            "git --no-pager reset --hard HEAD",
            "git -P reset --hard",
            "git --git-dir=.git --work-tree=. reset --hard",
            "git --namespace x reset --hard",
            "git --bare reset --hard",
            "git -Csub reset --hard",
        ],
        ["git reset --soft HEAD~1", "git -C . reset HEAD file", "git --no-pager log --hard"],
    ),
    "force push": (
        ["Bash(git *)"],
        ["Bash(git push -f*)"],
        [
            "git push -uf origin main",
            "git push origin +main",
            "git push --force",
            "git push --force-with-lease",
            "git push --force-with-lease=main:abc origin main",
            "git push --force-if-includes",
            "git push --mirror",
            "git -C . push origin +HEAD:main",
        ],
        ["git push origin main", "git push -u origin main", "git push origin main:main", "git fetch -f"],
    ),
    "force push, rule with operands": (
        ["Bash(git *)"],
        ["Bash(git push --force origin main)"],
        ["git push origin +main", "git push -f origin main", "git push --force-with-lease origin main"],
        ["git push origin main", "git push origin +dev"],
    ),
    "ref deletion": (
        ["Bash(git *)"],
        ["Bash(git push --delete *)", "Bash(git branch -D *)", "Bash(git tag -d *)"],
        [
            "git push origin :old",
            "git push -d origin x",
            "git push origin --delete x",
            "git branch -d x",
            "git branch --delete --force x",
            "git tag --delete v1",
        ],
        ["git push origin main:main", "git branch -a", "git branch new", "git tag v2", "git tag -l"],
    ),
    "discarding changes": (
        ["Bash(git *)"],
        ["Bash(git checkout -- .)"],
        [
            "git checkout -- .",
            "git --no-pager checkout -- .",
            "git checkout .",
            "git checkout -f main",
            "git reset --hard",
            "git restore src",
            "git restore --worktree --staged .",
            "git clean -fdx",
            "git clean --force",
            "git switch --discard-changes main",
        ],
        ["git checkout main", "git checkout -b x", "git restore --staged x", "git clean -n", "git reset --soft"],
    ),
    "rm recursive": (
        ["Bash(rm *)"],
        ["Bash(rm -rf*)"],
        ["rm -Rf x", "rm --recursive --force x", "rm -r -f x", "rm -fr x", "rm -f -R x"],
        ["rm x", "rm -f x", "rm -- -rf"],
    ),
    "rm recursive, rule without force": (
        ["Bash(rm *)"],
        ["Bash(rm -r *)"],
        ["rm -R x", "rm --recursive x", "rm -vr x"],
        ["rm -v x", "rm -i x"],
    ),
    "docker, podman globals": (
        ["Bash(docker *)", "Bash(podman *)"],
        ["Bash(docker rm *)", "Bash(podman rm *)"],
        ["docker -H tcp://x rm c", "docker --context p rm c", "docker --config d rm c", "podman --remote rm c"],
        ["docker ps", "docker -H tcp://x ps", "podman images"],
    ),
    "kubectl globals": (
        ["Bash(kubectl *)"],
        ["Bash(kubectl delete *)"],
        ["kubectl -n prod delete pod x", "kubectl --context=p delete pod x", "kubectl --kubeconfig k delete ns a"],
        ["kubectl get pods", "kubectl -n prod get pods", "kubectl describe pod delete"],
    ),
    "npm, pnpm, yarn globals": (
        ["Bash(npm *)", "Bash(pnpm *)", "Bash(yarn *)"],
        ["Bash(npm publish*)", "Bash(pnpm publish*)", "Bash(yarn publish*)"],
        [
            "npm --prefix x publish",
            "npm -C x publish",
            "pnpm --dir x publish",
            "yarn --cwd x publish",
            "npm -w a publish",
        ],
        ["npm test", "npm run publish-docs", "pnpm install", "yarn build"],
    ),
    "cargo toolchain and -Z": (
        ["Bash(cargo *)"],
        ["Bash(cargo publish*)"],
        ["cargo +nightly publish", "cargo -Z unstable-options publish", "cargo --locked publish"],
        ["cargo build", "cargo +nightly build", "cargo test publish"],
    ),
    "make -C and -f": (
        ["Bash(make *)"],
        ["Bash(make deploy*)"],
        ["make -C sub deploy", "make -f x.mk deploy", "make -j4 deploy", "make CC=gcc deploy"],
        ["make test", "make build", "make -n test"],
    ),
    "python -m": (
        ["Bash(python *)", "Bash(python3 *)"],
        ["Bash(pip install *)"],
        [
            "python -m pip install x",
            "python3 -u -m pip install x",
            "python3 -m pip3 install x",
            "python3 -Im pip install x",
        ],
        ["python -m pytest", "python -m pip list", "python3 script.py pip install"],
    ),
}


def _engine(tmp: Path, allow: list[str], deny: list[str]) -> PermissionEngine:
    engine = PermissionEngine(cwd=str(tmp), mode="default", home=str(tmp), keel_home=str(tmp / ".keel"))
    engine.add(allow, "allow", "test")
    engine.add(deny, "deny", "test")
    return engine


_DENIED = [(family, cmd) for family, (_, _, bad, _) in FAMILIES.items() for cmd in bad]
_ALLOWED = [(family, cmd) for family, (_, _, _, good) in FAMILIES.items() for cmd in good]


@pytest.mark.parametrize(("family", "command"), _DENIED)
def test_every_spelling_of_a_denied_action_is_denied(tmp_path: Path, family: str, command: str) -> None:
    allow, deny, _, _ = FAMILIES[family]
    decision = _engine(tmp_path, allow, deny).decide("Bash", {"command": command})
    assert decision.decision == "deny", (command, decision.reason)


@pytest.mark.parametrize(("family", "command"), _ALLOWED)
def test_a_look_alike_still_runs_under_its_allow_rule(tmp_path: Path, family: str, command: str) -> None:
    allow, deny, _, _ = FAMILIES[family]
    decision = _engine(tmp_path, allow, deny).decide("Bash", {"command": command})
    assert decision.decision == "allow", (command, decision.reason)


@pytest.mark.parametrize("command", ["$(which rm) -rf x", "`which rm` x", '"$RM" -rf x', "${X}rm x"])
def test_a_program_known_only_at_run_time_asks_under_a_deny_rule_even_in_bypass(tmp_path: Path, command: str) -> None:
    # issue #30 family 7: a program name that is not a static word is any program, so the deny rule holds
    for mode in ("default", "bypassPermissions"):
        engine = _engine(tmp_path, ["Bash(*)"], ["Bash(rm *)"])
        engine.mode = mode
        decision = engine.decide("Bash", {"command": command})
        assert decision.decision == "deny", (mode, command, decision.reason)
        assert "known only at run time" in decision.reason


def test_without_bash_deny_or_ask_rules_a_dynamic_program_is_not_singled_out(tmp_path: Path) -> None:
    engine = _engine(tmp_path, [], [])
    engine.mode = "bypassPermissions"
    assert engine.decide("Bash", {"command": "$(which ls) x"}).decision == "allow"


def test_canonical_forms_read_as_the_table_says() -> None:
    assert canonical(["/usr/bin/git", "-C", "d", "-c", "a=b", "--no-pager", "push"]) == ["git", "push"]
    assert canonical(["python3.12", "-X", "dev", "-m", "pip", "install", "x"]) == ["pip", "install", "x"]
    assert canonical(["python3", "script.py", "-m", "pip"]) == ["python3", "script.py", "-m", "pip"]
    assert canonical(["kubectl", "get", "-n", "x", "pods"]) == ["kubectl", "get", "pods"]
    assert canonical(["git", "commit", "-C", "HEAD"]) == ["git", "commit", "-C", "HEAD"]  # after the subcommand
    assert [a.name for a in actions(["git", "push", "origin", "+main", ":old"])] == ["git force-push", "git delete-ref"]
    assert actions(["git", "push", "+main"]) == []  # "+main" as the remote is a remote's name, not a refspec


@pytest.mark.parametrize("command", ["git $(echo push) --force", "git push $FLAGS", "git -C . push ${F}"])
def test_run_time_arguments_of_a_program_a_deny_rule_names_ask_even_in_bypass(tmp_path: Path, command: str) -> None:
    engine = _engine(tmp_path, ["Bash(git *)"], ["Bash(git push --force*)"])
    engine.mode = "bypassPermissions"
    decision = engine.decide("Bash", {"command": command})
    assert decision.decision == "ask", decision.reason
    assert "known only at run time" in decision.reason
    # another program's run-time arguments are not the deny rule's business
    assert engine.decide("Bash", {"command": "echo $HOME $X"}).decision == "allow"
