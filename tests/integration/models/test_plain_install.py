"""A plain ``pip install agentkeel`` (no extras, built from this source tree, dependencies from the
package index) reaches both wire formats: ``keel -p`` in a fresh virtualenv against fake-llm."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import wire_env

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    # the tests give HOME a fresh directory; pip may keep its usual cache
    env["PIP_CACHE_DIR"] = str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "pip")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def fresh_keel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``keel`` from a new virtualenv holding only the wheel of this tree and its core dependencies."""
    base = tmp_path_factory.mktemp("install")
    tree = base / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", tree / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    env = _pip_env()
    pip = [sys.executable, "-m", "pip"]

    def run(*args: str | Path) -> None:
        out = subprocess.run([str(a) for a in args], env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]

    run(*pip, "wheel", "--no-deps", "-q", "-w", base / "dist", tree)
    [wheel] = (base / "dist").glob("agentkeel-*.whl")
    venv = base / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    run(*pip, "--python", venv / "bin" / "python", "install", "-q", wheel)
    return venv / "bin" / "keel"


def _keel(exe: Path, cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(exe), *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_fresh_install_has_no_sdk(fresh_keel: Path) -> None:
    python = fresh_keel.parent / "python"
    probe = "import importlib.util as u; print([m for m in ('anthropic', 'openai', 'agentkeel') if u.find_spec(m)])"
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=_pip_env())
    assert out.stdout.strip() == "['agentkeel']", out.stderr
    assert (
        str(fresh_keel.parent.parent)
        in subprocess.run(
            [str(python), "-c", "import agentkeel; print(agentkeel.__file__)"],
            capture_output=True,
            text=True,
            env=_pip_env(),
        ).stdout
    )  # the installed wheel, not this source tree


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_keel_p_over_both_wire_formats_without_extras(
    wire: str, fresh_keel: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {"steps": [{"text": "Looking.", "tool_calls": [{"name": "LS", "input": {"path": "."}}]}, "Done."]}
    )
    env = wire_env(server, wire)
    if wire == "anthropic":
        env["ANTHROPIC_API_KEY"] = "sk-ant-test-not-a-real-key"  # the only variable a user sets, besides the URL
    run = _keel(fresh_keel, project, env, "-p", "list the files")
    assert (run.returncode, run.stdout) == (0, "Done.\n"), run.stderr
    assert len(server.cursor.requests) == 2 and server.cursor.requests[0]["headers"]["user-agent"].startswith(
        "agentkeel/"
    )
    sdk = _keel(fresh_keel, project, {**env, "KEEL_PROVIDER_TRANSPORT": "sdk"}, "-p", "hi")
    assert sdk.returncode == 2
    assert sdk.stderr.strip() == (
        f"keel: the {wire} SDK is not installed: pip install 'agentkeel[{wire}]', "
        'or use keel\'s own client (provider.transport "wire", the default)'
    )
