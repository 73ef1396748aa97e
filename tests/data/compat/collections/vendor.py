"""Build the collections fixture from public MIT-licensed Claude Code configurations (run once by hand).

    python tests/data/compat/collections/vendor.py /work/.mirror

Copies the definition files (agents, commands, skills, plugin manifests) of four public
collections, each cut to its frontmatter and the first lines of its body (what the listings are
made of; the MIT licence permits the cut, the notice is kept in LICENSES/). Supporting files,
scripts and hooks are left out: this fixture tests discovery and listing, not running them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
KEEP_BODY_LINES = 3

# (mirror folder, commit-ish, [(path in the repository, where in the fixture)])
SOURCES = {
    "VoltAgent/awesome-claude-code-subagents": "VoltAgent+awesome-claude-code-subagents",
    "wshobson/agents": "wshobson+agents",
    "davila7/claude-code-templates": "davila7+claude-code-templates",
    "obra/superpowers": "obra+superpowers",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def cut(text: str) -> str:
    """The frontmatter (whole) and the first lines of the body."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            close = text.find("\n", end + 4)
            head = text[: close + 1 if close != -1 else len(text)]
            body = text[len(head) :]
            return head + "".join(body.splitlines(keepends=True)[:KEEP_BODY_LINES])
    return "".join(text.splitlines(keepends=True)[:KEEP_BODY_LINES])


def copy(repo: Path, src: str, dst: Path) -> None:
    data = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{src}"], check=True, capture_output=True).stdout
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.endswith(".md"):
        dst.write_text(cut(data.decode("utf-8", "replace")), encoding="utf-8")
    else:
        dst.write_bytes(data)


def main() -> None:
    mirrors = Path(sys.argv[1])
    for sub in ("project", "home", "plugins", "LICENSES"):
        shutil.rmtree(HERE / sub, ignore_errors=True)
    commits = {}
    for name, folder in SOURCES.items():
        repo = mirrors / folder / "repo"
        commits[name] = git(repo, "rev-parse", "HEAD").strip()
        files = git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
        (HERE / "LICENSES").mkdir(parents=True, exist_ok=True)
        copy(repo, "LICENSE", HERE / "LICENSES" / f"{folder}.LICENSE")
        for f in files:
            parts = f.split("/")
            agent_file = f.startswith("categories/") and f.endswith(".md") and parts[-1] != "README.md"
            if folder.startswith("VoltAgent") and agent_file:
                copy(repo, f, HERE / "project/.claude/agents" / parts[-1])
            elif folder.startswith("wshobson") and f.startswith("plugins/") and len(parts) >= 3:
                kind = parts[2]
                if (
                    f.endswith(".claude-plugin/plugin.json")
                    or (kind in ("agents", "commands") and f.endswith(".md") and len(parts) == 4)
                    or (kind == "skills" and parts[-1] == "SKILL.md" and len(parts) == 5)
                ):
                    copy(repo, f, HERE / f)
            elif folder.startswith("davila7"):
                root = "cli-tool/components/"
                if f.startswith(root + "commands/") and f.endswith(".md") and len(parts) == 5:
                    copy(repo, f, HERE / "project/.claude/commands" / parts[3] / parts[4])
                elif f.startswith(root + "skills/productivity/") and parts[-1] == "SKILL.md" and len(parts) == 6:
                    copy(repo, f, HERE / "home/.claude/skills" / parts[4] / "SKILL.md")
            elif folder.startswith("obra") and (
                f.startswith(".claude-plugin/plugin.json")
                or (f.startswith("skills/") and parts[-1] == "SKILL.md" and len(parts) == 3)
            ):
                copy(repo, f, HERE / "plugins/superpowers" / f)
    (HERE / "COMMITS").write_text("".join(f"{k} {v}\n" for k, v in commits.items()), encoding="utf-8")


if __name__ == "__main__":
    main()
