"""Settings layering and errors; the one-way layer rule; model resolution; fake-llm scripts."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agentkeel.config.settings import SettingsError, load_settings
from agentkeel.models.catalog import ModelConfigError, resolve_model
from agentkeel.models.fake.script import Script, ScriptError

SRC = Path(__file__).resolve().parents[3] / "src" / "agentkeel"


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_layers_merge_in_order(tmp_path: Path) -> None:
    home, proj, kh = tmp_path / "home", tmp_path / "proj", tmp_path / "kh"
    write(home / ".claude" / "settings.json", {"model": "haiku", "permissions": {"allow": ["Read"]}})
    write(kh / "settings.json", {"env": {"A": "user"}})
    write(proj / ".claude" / "settings.json", {"permissions": {"allow": ["Bash(npm test)"]}})
    write(proj / ".keel" / "settings.json", {"model": "sonnet", "env": {"B": "project"}})
    write(proj / ".keel" / "settings.local.json", {"permissions": {"deny": ["WebFetch"]}, "env": {"A": "local"}})
    extra = write(tmp_path / "cli.json", {"permissions": {"defaultMode": "acceptEdits"}})
    loaded = load_settings(proj, home=home, keel_home=kh, extra_files=[extra])
    s = loaded.settings
    assert s.model == "sonnet"
    assert s.permissions.allow == ["Read", "Bash(npm test)"]
    assert s.permissions.deny == ["WebFetch"] and s.permissions.defaultMode == "acceptEdits"
    assert s.env == {"A": "local", "B": "project"}
    assert [layer.scope for layer in loaded.layers] == ["user", "user", "project", "project", "local", "cli"]


def test_managed_settings_win(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    write(proj / ".keel" / "settings.json", {"model": "sonnet"})
    managed = write(tmp_path / "managed.json", {"model": "haiku"})
    loaded = load_settings(proj, home=tmp_path, keel_home=tmp_path / "kh", managed=managed)
    assert loaded.settings.model == "haiku"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"permissions": {"allow": "Bash"}}', "key 'permissions.allow': Expected `array`, got `str`"),
        ('{"permissions": {"defaultMode": "yolo"}}', "key 'permissions.defaultMode'"),
        ('{"env": {"A": 1}}', "key 'env': Expected `str`, got `int`"),
        ("[1, 2]", "top level must be a JSON object"),
        ('{"model": "x",}', "invalid JSON at line 1"),
    ],
)
def test_invalid_settings_name_file_and_key(tmp_path: Path, content: str, needle: str) -> None:
    bad = write(tmp_path / "p" / ".keel" / "settings.json", content)
    with pytest.raises(SettingsError) as err:
        load_settings(tmp_path / "p", home=tmp_path, keel_home=tmp_path / "kh")
    assert str(bad) in str(err.value) and needle in str(err.value)


def test_unknown_keys_warn_known_claude_keys_do_not(tmp_path: Path) -> None:
    write(tmp_path / "p" / ".claude" / "settings.json", {"includeCoAuthoredBy": False, "frobnicate": 1})
    loaded = load_settings(tmp_path / "p", home=tmp_path, keel_home=tmp_path / "kh")
    assert len(loaded.warnings) == 1 and "unknown key 'frobnicate'" in loaded.warnings[0]


def test_model_resolution() -> None:
    assert resolve_model(None, {"ANTHROPIC_API_KEY": "k"}).qualified == "anthropic:claude-sonnet-4-5"
    assert resolve_model(None, {"OPENAI_BASE_URL": "http://x/v1"}).provider == "openai"
    assert resolve_model("opus", {}).qualified == "anthropic:claude-opus-4-5"
    info = resolve_model("ollama:qwen3", {})
    assert info.context_window == 40960 and info.prices.cost(__import__("agentkeel").core.types.Usage()) == 0
    assert resolve_model("gpt-4.1", {}).prices.input == 2.0
    unknown = resolve_model("openai:brand-new", {})
    assert unknown.context_window == 32768  # fallback data, still usable
    with pytest.raises(ModelConfigError, match="no model provider configured"):
        resolve_model(None, {})
    with pytest.raises(ModelConfigError, match="unknown provider 'acme'"):
        resolve_model("acme:x", {})


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"nope": []}, "'steps' list"),
        ({"steps": [3]}, "step 0: expected a string or an object"),
        ({"steps": [{"error": {"status": "bad"}}]}, "integer 'status'"),
        ({"steps": [{"tool_calls": [{"input": {}}]}]}, "needs a 'name'"),
    ],
)
def test_script_errors(data: object, needle: str) -> None:
    with pytest.raises(ScriptError, match=needle):
        Script.from_data(data)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_depends_on_nothing_outside_core() -> None:
    for f in (SRC / "core").glob("*.py"):
        for name in _imports(f):
            if name.startswith("agentkeel"):
                assert name.startswith("agentkeel.core"), f"{f.name} imports {name}"
            assert name.split(".")[0] not in {"anthropic", "openai", "prompt_toolkit", "sqlite3", "httpx"}, name


def test_tools_and_providers_do_not_reach_into_the_cli() -> None:
    for pkg in ("tools", "models", "session", "config", "policy"):
        for f in (SRC / pkg).rglob("*.py"):
            for name in _imports(f):
                assert not name.startswith(("agentkeel.ui", "agentkeel.app")), f"{pkg}/{f.name} imports {name}"
