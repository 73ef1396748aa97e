"""What the command-line front ends share: exit codes and the tool-list flag parser.

(A leaf: ``main`` and every front end import it; it imports none of them.)
"""

from __future__ import annotations

EXIT_OK, EXIT_RUN_ERROR, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143

# ``keel -p`` without --max-turns: a bound on a run nobody watches turn by turn (a model that varies
# its calls escapes the loop detector). Claude Code sets none; a real task rarely needs 100 requests.
HEADLESS_MAX_TURNS = 200


def split_tools(values: list[str] | None) -> list[str]:
    """``--allowedTools "Bash(git diff *),Read" Edit`` -> rules; commas inside parentheses kept."""
    out: list[str] = []
    for value in values or []:
        depth, cur = 0, ""
        for ch in value:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth = max(0, depth - 1)
            if ch == "," and depth == 0:
                if cur.strip():
                    out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            out.append(cur.strip())
    return out
