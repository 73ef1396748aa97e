"""gitleaks' secret rules (vendored in gitleaks_rules.json, MIT licence) matched with Python's re.

Loaded on first use, each regex compiled on the first text that could match it. The speed comes from
the anchors: every vendored rule names the literal texts its matches begin with, keel finds those in a
lower-cased copy of the text (``str.find``, a C scan) and tries the rule only there, with ``match``.
Most rules then cost nothing on ordinary text, and none rescans from every position. A rule without
anchors runs over the whole text, as in gitleaks, only when one of its keywords occurs.

What a rule finds is judged as gitleaks judges it: the secret is the rule's secret group (else the first
non-empty group, else the match), its Shannon entropy must exceed the rule's threshold, and gitleaks'
allowlists (global and per rule) are applied; a condition on the file's path is never met, as keel does
not know the path.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("gitleaks_rules.json")
Span = tuple[int, int, str]
_SHORT = 2048  # a text this short is looked at for its words' first two characters before a scan compiles


def ascii_lower(text: str) -> str:
    """text with A-Z lowered and every other character kept, so indexes match the original."""
    low = text.lower()
    if len(low) != len(text):  # U+0130 is the one character that lowers to two
        low = text.replace("\u0130", "I").lower()
    return low


def entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


class _Allowlist:
    __slots__ = ("all_of", "paths", "regexes", "stopwords", "target")

    def __init__(
        self, regexes: tuple[re.Pattern[str], ...], stopwords: tuple[str, ...], target: str, all_of: bool, paths: bool
    ) -> None:
        self.regexes = regexes
        self.stopwords = stopwords
        self.target = target  # "secret", "match" or "line"
        self.all_of = all_of  # condition AND
        self.paths = paths  # has a path condition (never met here)

    @classmethod
    def load(cls, raw: dict[str, Any]) -> _Allowlist:
        return cls(
            tuple(re.compile(r, re.ASCII) for r in raw.get("regexes", ())),
            tuple(raw.get("stopwords", ())),
            raw.get("target", "secret"),
            bool(raw.get("and")),
            bool(raw.get("paths")),
        )

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"match": match, "line": line}.get(self.target, secret)
        by_regex = any(r.search(target) for r in self.regexes)
        lowered = secret.lower()
        by_word = any(w in lowered for w in self.stopwords)
        if not self.all_of:
            return by_regex or by_word
        checks = [*((False,) if self.paths else ()), *((by_regex,) if self.regexes else ())]
        checks += (by_word,) if self.stopwords else ()
        return bool(checks) and all(checks)


class Rule:
    __slots__ = (
        "_allow_raw",
        "_allowlists",
        "_pattern",
        "anchors",
        "entropy",
        "error",
        "group",
        "id",
        "keywords",
        "source",
    )

    def __init__(self, raw: dict[str, Any]) -> None:
        self.id: str = raw["id"]
        self.source: str = raw["python"]
        self.anchors: tuple[str, ...] = tuple(raw["anchors"])
        self.keywords: tuple[str, ...] = tuple(raw["keywords"])
        self.entropy: float = raw.get("entropy", 0.0)
        self.group: int = raw.get("group", 0)
        self._allow_raw: list[dict[str, Any]] = raw.get("allowlists", [])
        self._allowlists: tuple[_Allowlist, ...] | None = None
        self._pattern: re.Pattern[str] | None = None
        self.error = ""

    def pattern(self) -> re.Pattern[str] | None:
        if self._pattern is None and not self.error:
            try:
                self._pattern = re.compile(self.source, re.ASCII)
            except re.error as exc:  # a Python whose re reads the translation differently: counted, not fatal
                self.error = str(exc)
        return self._pattern

    def allowlists(self) -> tuple[_Allowlist, ...]:
        if self._allowlists is None:
            self._allowlists = tuple(_Allowlist.load(a) for a in self._allow_raw)
        return self._allowlists

    def secret_span(self, m: re.Match[str]) -> tuple[int, int]:
        """gitleaks' secret: the secret group, else the first non-empty group, else the match. Where every
        group is named (jwt-base64 names which header field it saw), the names label the match, and a
        mask of one label would leave the token readable: the whole match is the secret."""
        if m.re.groups and len(m.re.groupindex) < m.re.groups:
            if self.group:
                return m.span(self.group) if self.group <= m.re.groups else (m.end(), m.end())
            for g in range(1, m.re.groups + 1):
                if m.start(g) < m.end(g):
                    return m.span(g)
        return m.span()


class RuleSet:
    def __init__(self, data: dict[str, Any]) -> None:
        self.source: str = data["source"]
        self.skipped = [(r["id"], r["skipped"]) for r in data["rules"] if "skipped" in r]
        self.rules = [Rule(r) for r in data["rules"] if "skipped" not in r]
        # A rule whose anchors hold one of its keywords (ghp_ for github-pat) is tried at its anchors.
        # Any other (airtable's pat..., found only where 'airtable' occurs) waits for a keyword first:
        # its keywords are scanned for, and its anchors looked up only when one of them is there.
        self.direct: dict[str, list[Rule]] = {}
        self.gated: dict[str, list[Rule]] = {}
        for rule in self.rules:
            if rule.anchors and all(any(a.startswith(k) for k in rule.keywords) for a in rule.anchors):
                for anchor in rule.anchors:
                    self.direct.setdefault(anchor, []).append(rule)
            else:
                for keyword in rule.keywords:
                    self.gated.setdefault(keyword, []).append(rule)
        # One scan per first character: re jumps between occurrences of a one-character literal at C
        # speed, which one alternation of every word (a candidate at each letter) cannot. Each scan is
        # the words as a trie that stops at the shortest word (quicker to compile than a flat list).
        # A scan is compiled on the first text holding one of its words' first two characters: the
        # 28 of them took 20-35 ms, on the path to the first request when compiled all at once.
        words = sorted({*self.direct, *self.gated})
        self._by_first: dict[str, list[str]] = {}
        for word in words:
            self._by_first.setdefault(word[0], []).append(word[1:])
        self._pairs = {c: sorted({c + rest[:1] for rest in tails}) for c, tails in self._by_first.items()}
        self._scans: dict[str, re.Pattern[str]] = {}
        self._longer: dict[str, list[str]] = {}
        for i, word in enumerate(words):  # the words that extend word follow it in sorted order
            j = i + 1
            while j < len(words) and words[j].startswith(word):
                j += 1
            self._longer[word] = words[i + 1 : j]
        self._global_raw = data.get("allowlist", {})
        self._global: _Allowlist | None = None

    def hits(self, low: str) -> dict[str, list[int]]:
        """Where each anchor and keyword occurs in the lower-cased text (overlaps included)."""
        found: dict[str, list[int]] = {}
        for scan in self._scans_for(low):
            m = scan.search(low)
            while m:
                at, word = m.start(), m.group()  # the shortest word here; any other is a longer one
                found.setdefault(word, []).append(at)
                for longer in self._longer[word]:
                    if low.startswith(longer, at):
                        found.setdefault(longer, []).append(at)
                m = scan.search(low, at + 1)
        return found

    def _scans_for(self, low: str) -> list[re.Pattern[str]]:
        """The scans whose first character low holds. A scan not compiled yet is compiled for a short
        text (a prompt, a command) only when one of its words might begin there, by their first two
        characters (every word has two): looking for each pair costs a pass over the text, cheap on
        a short one, more than the scan itself on a long one, which compiles what it needs."""
        out: list[re.Pattern[str]] = []
        short = len(low) < _SHORT
        for c, tails in self._by_first.items():
            if c not in low:
                continue
            scan = self._scans.get(c)
            if scan is None:
                if short and not any(pair in low for pair in self._pairs[c]):
                    continue
                scan = self._scans[c] = re.compile(re.escape(c) + _trie(tails))
            out.append(scan)
        return out

    def findings(self, text: str) -> list[Span]:
        """(start, end, rule id) of every secret found in text, in no particular order."""
        low = ascii_lower(text)
        found = self.hits(low)
        todo: dict[str, tuple[Rule, list[int]]] = {}
        for anchor, rules in self.direct.items():
            for rule in rules if anchor in found else ():
                todo.setdefault(rule.id, (rule, []))[1].extend(found[anchor])
        for keyword, rules in self.gated.items():
            for rule in rules if keyword in found else ():
                if rule.id not in todo:
                    todo[rule.id] = (rule, [i for a in rule.anchors for i in _find_all(low, a)])
        spans: list[Span] = []
        for rule, at in todo.values():
            pattern = rule.pattern()
            if pattern is None:
                continue
            if not rule.anchors:
                for whole in pattern.finditer(text):
                    self._judge(rule, whole, text, spans)
                continue
            resume = 0
            for start in sorted(set(at)) if len(rule.anchors) > 1 else at:
                if start >= resume and (m := pattern.match(text, start)):
                    resume = m.end()
                    self._judge(rule, m, text, spans)
        return spans

    def _judge(self, rule: Rule, m: re.Match[str], text: str, spans: list[Span]) -> None:
        start, end = rule.secret_span(m)
        secret = text[start:end]
        if not secret or (rule.entropy and entropy(secret) <= rule.entropy):
            return
        if self._global is None:
            self._global = _Allowlist.load(self._global_raw)
        for allowlist in (self._global, *rule.allowlists()):
            line = _line(text, m) if allowlist.target == "line" else ""
            if allowlist.allows(secret, m.group(0), line):
                return
        spans.append((start, end, rule.id))


def _trie(words: list[str]) -> str:
    """A regex for words (an empty word allowed) that matches the shortest of them at a position."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        if "" in node:
            return "(?:|" + "|".join(alts) + ")" if alts else ""
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return emit(root)


def _find_all(low: str, word: str) -> list[int]:
    out, at = [], low.find(word)
    while at >= 0:
        out.append(at)
        at = low.find(word, at + 1)
    return out


def _line(text: str, m: re.Match[str]) -> str:
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start : end if end >= 0 else len(text)]


@cache
def ruleset() -> RuleSet:
    """The vendored rules, read once per process on first use."""
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return RuleSet(data)
