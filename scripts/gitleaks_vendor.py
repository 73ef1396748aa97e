"""Vendor gitleaks' default rules into ``src/agentkeel/gitleaks_rules.json`` (a developer tool, outside
the package: keel never imports it).

    python scripts/gitleaks_vendor.py path/to/config/gitleaks.toml COMMIT

gitleaks (github.com/gitleaks/gitleaks, MIT licence) keeps the best-maintained open set of secret
patterns, written for Go's RE2. This turns each rule into data keel matches with Python's ``re``:
- the Go syntax Python lacks is translated (a mid-pattern ``(?i)``, POSIX classes, ``\\z``); what cannot
  be translated is skipped with the reason, and so are rules keel's own patterns supersede;
- leading parts that can match nothing (``[\\w.-]{0,50}?``, ``(?:https?://)?``) are dropped: they only
  widen a match to the left and are what stops ``re`` from jumping to a candidate;
- each rule's *anchors* are the literal texts (lower case) that every match of the rule begins with.
  At run time keel finds the anchors in the text and tries a rule only where one of them occurs. A rule
  without anchors runs over the whole text, as in gitleaks, when one of its keywords occurs.

The upstream regex is kept beside the translation, so a reader can check one against the other, and
tests/test_redact_rules.py re-derives every translation and anchor set from it.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RULES_FILE = Path(__file__).resolve().parent.parent / "src" / "agentkeel" / "gitleaks_rules.json"

LICENCE = """MIT License

Copyright (c) 2019 Zachary Rice

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""

# Rules keel leaves out, and why. Each is covered by one of keel's own patterns in redact.py.
SUPERSEDED = {
    "generic-api-key": "keel's assignment rule covers these keys (password, api_key, *_TOKEN and more); "
    "gitleaks' generic rule needs a 1,500-word stop list and still masks ordinary code",
    "private-key": "keel's private_key pattern (which also masks a block whose END line is missing); "
    "this one's lazy scan to the END line is quadratic on BEGIN lines without an END",
    "curl-auth-header": "keel's Authorization-header and bearer patterns (in and out of curl); this one scans "
    "six lines after every 'curl', quadratic on a long line of them",
    "curl-auth-user": "keel's pattern for curl's -u/--user option; same quadratic scan as curl-auth-header",
}
# Local changes to an upstream regex: (old text, new text, why). The vendor step fails if old is gone.
CHANGES = {
    "sourcegraph-access-token": (
        "|[a-fA-F0-9]{40})",
        ")",
        "the bare 40-hex alternative is any git commit id; only the sgp_ forms are kept",
    ),
}
_POSIX = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "xdigit": "0-9A-Fa-f",
    "upper": "A-Z",
    "lower": "a-z",
}
MIN_ANCHOR = 2
_GOOD_ANCHOR = 4  # stop lengthening once every anchor is this long and the next step would multiply them
_MAX_ANCHORS = 16


class Untranslatable(ValueError):
    pass


# --- Go RE2 -> Python re ----------------------------------------------------------------------


def translate(go: str) -> str:
    """The Python form of a Go regex. A mid-pattern ``(?flags)`` applies to the rest of its group in Go,
    alternatives included: it becomes ``(?flags:...)`` around each remaining alternative."""
    out: list[str] = []
    frames: list[list[str]] = [[]]  # per open group: the inline flags opened in it
    i = 0
    while i < len(go):
        ch = go[i]
        if ch == "\\":
            nxt = go[i + 1 : i + 2]
            if nxt in ("p", "P", "Q", "E", "C"):
                raise Untranslatable(f"\\{nxt} has no Python equivalent")
            out.append("\\Z" if nxt == "z" else go[i : i + 2])
            i += 2
        elif ch == "[":
            end = _class_end(go, i)
            out.append(_translate_class(go[i:end]))
            i = end
        elif ch == "(":
            m = re.match(r"\(\?([a-zA-Z-]+)\)", go[i:])
            if m:
                if "U" in m.group(1):
                    raise Untranslatable("ungreedy flag (?U)")
                if i == 0:
                    out.append(m.group(0))
                else:
                    out.append(f"(?{m.group(1)}:")
                    frames[-1].append(m.group(1))
                i += len(m.group(0))
            else:
                frames.append([])
                out.append(ch)
                i += 1
        elif ch == ")":
            out.append(")" * len(frames.pop()) + ")")
            if not frames:
                raise Untranslatable("unbalanced ')'")
            i += 1
        elif ch == "|" and frames[-1]:
            out.append(")" * len(frames[-1]) + "|" + "".join(f"(?{f}:" for f in frames[-1]))
            i += 1
        else:
            out.append(ch)
            i += 1
    if len(frames) != 1:
        raise Untranslatable("unbalanced '('")
    out.append(")" * len(frames[0]))
    return "".join(out)


def _class_end(p: str, i: int) -> int:
    """Index just past the character class that starts at p[i] == '['."""
    j = i + 1
    if p[j : j + 1] == "^":
        j += 1
    if p[j : j + 1] == "]":
        j += 1
    while j < len(p):
        if p[j] == "\\":
            j += 2
        elif p.startswith("[:", j):
            close = p.find(":]", j + 2)
            j = close + 2 if close > 0 else j + 1
        elif p[j] == "]":
            return j + 1
        else:
            j += 1
    raise Untranslatable("unterminated character class")


def _translate_class(cls: str) -> str:
    def posix(m: re.Match[str]) -> str:
        if m.group(1) not in _POSIX:
            raise Untranslatable(f"POSIX class [:{m.group(1)}:]")
        return _POSIX[m.group(1)]

    return re.sub(r"\[:(\w+):\]", posix, cls)


# --- a small parser for the start of a pattern -------------------------------------------------
# Enough of Python's regex syntax to find, for a pattern, where each leading atom ends, whether it may
# match nothing, and which literal texts every match begins with.


@dataclass
class _Atom:
    kind: str  # "lit", "zero" (matches no text: \b, ^, lookaround), "group", "other"
    start: int
    end: int
    char: str = ""
    alts: list[list[_Atom]] = field(default_factory=list)
    capture: bool = False
    lo: int = 1
    hi: int | None = 1


def _parse_alts(p: str, i: int) -> tuple[list[list[_Atom]], int]:
    alts: list[list[_Atom]] = [[]]
    while i < len(p) and p[i] != ")":
        if p[i] == "|":
            alts.append([])
            i += 1
            continue
        atom, i = _parse_atom(p, i)
        i = _parse_quantifier(p, i, atom)
        alts[-1].append(atom)
    return alts, i


def _parse_atom(p: str, i: int) -> tuple[_Atom, int]:
    ch = p[i]
    if ch == "\\":
        nxt = p[i + 1]
        if nxt in "bBAZ":
            return _Atom("zero", i, i + 2), i + 2
        if nxt in "wWdDsS":
            return _Atom("other", i, i + 2), i + 2
        if nxt == "x":
            return _Atom("lit", i, i + 4, char=chr(int(p[i + 2 : i + 4], 16))), i + 4
        if nxt in "nrtfv":
            return _Atom("other", i, i + 2), i + 2
        return _Atom("lit", i, i + 2, char=nxt), i + 2
    if ch == "[":
        end = _class_end(p, i)
        chars = _class_chars(p[i + 1 : end - 1])
        if chars is not None and len({c.lower() for c in chars}) == 1:
            return _Atom("lit", i, end, char=chars.pop()), end
        return _Atom("other", i, end), end
    if ch in "^$":
        return _Atom("zero", i, i + 1), i + 1
    if ch == ".":
        return _Atom("other", i, i + 1), i + 1
    if ch == "(":
        head = re.match(r"\((\?P<\w+>|\?[aiLmsux-]*:|\?<?[=!]|\?[aiLmsux]+\)|\?P=\w+\)|\?#[^)]*\))?", p[i:])
        assert head is not None
        prefix = head.group(1) or ""
        j = i + len(head.group(0))
        if prefix.endswith(")"):  # global flags, comment or backreference: no group body
            return _Atom("other" if prefix.startswith("?P=") else "zero", i, j), j
        alts, j = _parse_alts(p, j)
        if j >= len(p):
            raise Untranslatable("unbalanced '('")
        if prefix[1:2] in ("=", "!", "<"):
            return _Atom("zero", i, j + 1), j + 1
        return _Atom("group", i, j + 1, alts=alts, capture=prefix in ("",) or prefix.startswith("?P<")), j + 1
    return _Atom("lit", i, i + 1, char=ch), i + 1


def _class_chars(body: str) -> set[str] | None:
    """The characters of a simple class body ([Aa], [.]); None for negated classes, ranges or escapes."""
    if not body or body[0] == "^" or "\\" in body or "[:" in body or re.search(r".-.", body):
        return None
    return set(body)


def _parse_quantifier(p: str, i: int, atom: _Atom) -> int:
    m = re.match(r"(\?|\*|\+|\{(\d*)(,?)(\d*)\})([?+]?)", p[i:])
    if not m or (m.group(1).startswith("{") and not (m.group(2) or m.group(4))):
        return i
    q = m.group(1)
    if q == "?":
        atom.lo, atom.hi = 0, 1
    elif q == "*":
        atom.lo, atom.hi = 0, None
    elif q == "+":
        atom.lo, atom.hi = 1, None
    else:
        atom.lo = int(m.group(2) or 0)
        atom.hi = None if m.group(3) and not m.group(4) else int(m.group(4) or m.group(2))
    atom.end = i + len(m.group(0))
    return atom.end


def parse(p: str) -> list[list[_Atom]]:
    alts, i = _parse_alts(p, 0)
    if i != len(p):
        raise Untranslatable("unbalanced ')'")
    return alts


def strip_optional_start(p: str) -> str:
    """Drop leading atoms that may match nothing (``[\\w.-]{0,50}?``), also at the start of a leading
    non-capturing group. They only move a match's start to the left, never decide whether one exists."""
    pieces = _split_alternatives(p)
    if len(pieces) > 1:
        return "|".join(strip_optional_start(piece) for piece in pieces)
    alts = parse(p)
    seq = alts[0]
    k = 0
    while k < len(seq) and seq[k].kind == "zero" and p[seq[k].start] == "(":  # a leading (?i) stays
        k += 1
    if k < len(seq) and seq[k].lo == 0:
        return strip_optional_start(p[: seq[k].start] + p[seq[k].end :])
    atom = seq[k] if k < len(seq) else None
    if atom and atom.kind == "group" and not atom.capture and len(atom.alts) == 1 and atom.lo == atom.hi == 1:
        head = p[atom.start : p.index(":", atom.start) + 1]
        inner = p[atom.start + len(head) : _group_body_end(p, atom)]
        stripped = strip_optional_start(inner)
        if stripped != inner:
            return p[: atom.start] + head + stripped + p[atom.start + len(head) + len(inner) :]
    return p


def _split_alternatives(p: str) -> list[str]:
    """p cut at its top-level '|' (a leading global ``(?i)`` stays with the first piece)."""
    pieces, depth, start, i = [], 0, 0, 0
    while i < len(p):
        ch = p[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = _class_end(p, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            pieces.append(p[start:i])
            start = i + 1
        i += 1
    return [*pieces, p[start:]]


def _group_body_end(p: str, atom: _Atom) -> int:
    """Index of the ')' that closes atom's group (atom.end may include a quantifier)."""
    j = atom.end - 1
    while p[j] != ")":
        j -= 1
    return j


def anchors(p: str) -> list[str]:
    """Lower-case literal texts one of which begins every match of p; [] when p has no such start."""
    found = _first_alts(parse(p))
    if found is None:
        return []
    texts = {t for t in found[0] if t}
    if len(texts) != len(found[0]) or any(len(t) < MIN_ANCHOR for t in texts) or len(texts) > _MAX_ANCHORS:
        return []
    return sorted(t for t in texts if not any(o != t and t.startswith(o) for o in texts))


def _first_alts(alts: list[list[_Atom]]) -> tuple[set[str], bool] | None:
    texts: set[str] = set()
    complete = True
    for seq in alts:
        got = _first_seq(seq)
        if got is None:
            return None
        texts |= got[0]
        complete = complete and got[1]
    return texts, complete


def _first_seq(seq: list[_Atom]) -> tuple[set[str], bool] | None:
    acc = {""}
    for atom in seq:
        if atom.kind == "zero":
            continue
        if atom.lo == 0:
            return acc, False
        if atom.kind == "lit":
            got: tuple[set[str], bool] | None = ({atom.char.lower()}, True)
        elif atom.kind == "group":
            got = _first_alts(atom.alts)
        else:
            got = None
        if got is None:
            return acc, False
        if len(got[0]) > 1 and all(len(t) >= _GOOD_ANCHOR for t in acc):
            return acc, False
        acc = {a + b for a in acc for b in got[0]}
        if len(acc) > _MAX_ANCHORS:
            return None
        if not got[1] or atom.hi != 1:
            return acc, False
    return acc, True


# --- vendoring -----------------------------------------------------------------------------------


def _allowlist(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "regexes": [translate(r) for r in raw.get("regexes", [])],
        "stopwords": [w.lower() for w in raw.get("stopwords", [])],
    }
    if raw.get("regexTarget"):
        out["target"] = raw["regexTarget"]
    if raw.get("condition", "").upper() == "AND":
        out["and"] = True
    if raw.get("paths"):
        out["paths"] = True  # keel never knows the path: a path condition is never met
    return out


def vendor_rule(raw: dict[str, Any]) -> dict[str, Any]:
    """One rule as keel stores it, or {"id", "skipped": reason}."""
    rid = raw["id"]
    if rid in SUPERSEDED:
        return {"id": rid, "skipped": "superseded: " + SUPERSEDED[rid]}
    if "regex" not in raw:
        return {"id": rid, "skipped": "matches file paths only; keel masks text"}
    regex = raw["regex"]
    rule: dict[str, Any] = {"id": rid, "regex": regex}
    if rid in CHANGES:
        old, new, why = CHANGES[rid]
        if old not in regex:
            raise SystemExit(f"{rid}: the local change no longer applies; review CHANGES")
        regex = regex.replace(old, new)
        rule["changed"] = why
    try:
        py = strip_optional_start(translate(regex))
        re.compile(py, re.ASCII)
        allow = [_allowlist(a) for a in raw.get("allowlists", [])]
        for a in allow:
            for r in a["regexes"]:
                re.compile(r, re.ASCII)
    except (re.error, Untranslatable) as exc:
        return {"id": rid, "skipped": f"regex does not translate: {exc}"}
    rule.update(python=py, anchors=anchors(py), keywords=[k.lower() for k in raw.get("keywords", [])])
    if raw.get("entropy"):
        rule["entropy"] = raw["entropy"]
    if raw.get("secretGroup"):
        rule["group"] = raw["secretGroup"]
    if allow:
        rule["allowlists"] = allow
    return rule


def vendor(config: dict[str, Any], commit: str) -> dict[str, Any]:
    rules = [vendor_rule(r) for r in config["rules"]]
    return {
        "source": f"https://github.com/gitleaks/gitleaks/blob/{commit}/config/gitleaks.toml",
        "commit": commit,
        "licence": LICENCE,
        "allowlist": _allowlist(config.get("allowlist", {})),
        "rules": rules,
    }


def main(argv: list[str]) -> None:
    toml_path, commit = argv
    data = vendor(tomllib.loads(Path(toml_path).read_text()), commit)
    target = RULES_FILE
    target.write_text(json.dumps(data, indent=1) + "\n")
    rules = data["rules"]
    skipped = [r for r in rules if "skipped" in r]
    unanchored = [r["id"] for r in rules if "skipped" not in r and not r["anchors"]]
    print(f"{len(rules)} rules: {len(rules) - len(skipped)} vendored, {len(skipped)} skipped -> {target}")
    for r in skipped:
        print(f"  skipped {r['id']}: {r['skipped']}")
    print(f"  without anchors (run when a keyword occurs): {', '.join(unanchored)}")


if __name__ == "__main__":
    main(sys.argv[1:])
