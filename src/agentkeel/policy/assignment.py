"""``key = value`` where the key names a secret (password=, "api_key": "...", DB_PASS=, MYSQL_PWD=).

keel reads source code all day, where ``max_tokens=args.budget`` and ``api_key=api_key`` are code, not
secrets. So the key must name a secret as a whole (``token`` as one of its words, not ``tokens`` or
``tokenizer``; a trailing word like ``_name``, ``_file`` or ``_env`` makes it a name *about* a secret),
and an unquoted value that reads as code is left alone. A quoted value is a literal: it is masked up to
its closing quote, spaces included, whatever its length.

Speed: the text is searched (lower-cased, with ``str.find``) for the few words every secret name
holds; only keys around those are examined. Each key is read once and never beyond 128 characters.
"""

from __future__ import annotations

import re
import string

KEY_MAX = 128
WORD_CHARS = string.ascii_letters + string.digits + "_.-"
HINTS = ("pass", "pwd", "secret", "token", "key")  # every secret name holds one of these
# A word of the key that names a secret; "key" does after api, access, private, account or secret.
_SECRET_WORD = re.compile(r"token|pwd|pass|passwd|apikey|authtoken|.*(?:password|passphrase|secret(?!s$)).*")
_KEY_AFTER = frozenset({"api", "access", "private", "account", "secret"})
# What may follow the secret word: DB_PASSWORD_PROD and SECRET_KEY_BASE are secrets, TOKEN_TYPE and
# API_KEY_ENV are names about one.
_TRAILING = frozenset(
    "key value val str string b64 base64 hex raw plain plaintext encoded encrypted enc hash hashed digest salt "
    "bytes data base confirm confirmation prod production dev development test testing live staging old new "
    "current next prev previous primary secondary backup override literal".split()
)
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

# key, separator (with an opening quote, if any), value: quoted (escapes kept; no closing quote on the
# line masks to its end) or a bare run.
ASSIGNMENT = re.compile(
    r"""(?P<key>[A-Za-z0-9_.\-]{1,128}+)(?P<sep>(?:["']\]?)?[ \t]*(?::=|=>|[:=])(?!=)[ \t]*(?P<q>["'])?)"""
    r"""(?(q)(?P<quoted>(?:[^"'\\\n]|\\.|(?!(?P=q))["'])*+)|(?P<bare>[^\s"'`,;}{\]\[]++))"""
)
_CODE_VALUE = re.compile(
    r"^(?:\[REDACTED|self\.|this\.|os\.|process\.|env\.|config\.|settings\.|\$)|[()<>]|\$[{(]"
    r"|(?i:^(?:true|false|none|null|nil|undefined|yes|no|on|off)$)"
    r"|^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$"  # attribute access: args.budget
    r"|^(?:~?/|\.\.?/)[\w./\-]*$"  # a path (PWD=/home/me)
    r"|^[A-Z][a-z]+(?:[A-Z][a-z]*)+$"  # a type: SecretStr, AccessTokenT
    r"|^[a-z]+(?:_[a-z0-9]+)+$"  # a snake_case variable: auth_info
)
_PLACEHOLDER = re.compile(
    r"^(?:|\$\{?[\w.]+\}?|\{\{.*\}\}|\{[\w.]*\}|<[^<>]*>|%\(?[\w.]*\)?[sd]|%[A-Za-z_]+%|\*+|\[REDACTED.*|\.\.\.)$"
)
_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,129}+")
_RUN = re.compile(r"[A-Za-z0-9_.\-]++")
_PROSE = re.compile(r"[()]|[,.:;?!] |\w'\w|.{101}")  # a quoted sentence, not a passphrase
_SHORT_END = frozenset(" \t\r\n&;#")


def names_secret(key: str) -> bool:
    words = [w.lower() for w in _WORDS.findall(key)]
    last = -1
    for i, w in enumerate(words):
        if _SECRET_WORD.fullmatch(w) or (w == "key" and i and words[i - 1] in _KEY_AFTER):
            last = i
    return last >= 0 and all(w in _TRAILING or w.isdigit() for w in words[last + 1 :])


_PASSWORD_KEY = re.compile(r"(?i)pass|pwd")
# A secret a person chooses (a password, a secret) may be a word; a token or a key is generated and holds
# a digit or a capital, so a bare lower-case word of at most 15 letters after one is code, not a secret.
_CHOSEN_KEY = re.compile(r"(?i)pass|pwd|secret")
_CODE_WORD = re.compile(r"[a-z]{1,15}+(?:_[a-z]{1,15}+){0,3}+")


def value_is_secret(m: re.Match[str], text: str) -> bool:
    """The value of an ASSIGNMENT match is a literal secret, not code or a placeholder."""
    quoted = m.group("quoted")
    if quoted is not None:
        if _PLACEHOLDER.match(quoted) or (" " in quoted and _PROSE.search(quoted)):
            return False
        if len(quoted) < 6 and not _PASSWORD_KEY.search(m.group("key")):
            return False  # "invalid_api_key": "auth" maps a name to a kind; no key or token is 5 characters
        # "key": "v" and key: "v" at the start of a line (YAML, JS objects) are assignments; in prose
        # ("...the token: "$2>a"") a key after other words on the line is not.
        key_quoted = text[m.start() - 1 : m.start()] in ("'", '"')
        return ":" not in m.group("sep") or key_quoted or _begins_line(text, m.start())
    value = m.group("bare")
    if _CODE_VALUE.search(value) or text[m.end() : m.end() + 1] == "[":
        return False
    if re.fullmatch(r"[A-Za-z_]\w*", value):  # a variable: api_key=api_key, token = next_token
        a, b = m.group("key").lower().rsplit(".", 1)[-1].lstrip("_"), value.lower().lstrip("_")
        if a.endswith(b) or b.endswith(a):
            return False
    if _CODE_WORD.fullmatch(value) and not _CHOSEN_KEY.search(m.group("key")):
        return False  # an annotation or a variable (a type, a name): tokens and keys are generated
    if len(value) >= 6:
        return True
    # a short bare value only in KEY=value form (.env, --password=pw, ?pass=pw&...)
    return m.group("sep") == "=" and (m.end() == len(text) or text[m.end()] in _SHORT_END)


def _begins_line(text: str, start: int) -> bool:
    before = text[max(0, start - KEY_MAX) : start].rstrip(" \t")
    return not before or before[-1] in "\n-{[(,"


def mask(text: str, low: str, label: str) -> str:
    """Replace the value of every secret assignment in text (low: text lower-cased, same length)."""
    hits: list[int] = []
    for hint in HINTS:
        at = low.find(hint)
        while at >= 0:
            hits.append(at)
            at = low.find(hint, at + 1)
    if not hits:
        return text
    out: list[str] = []
    copied = scanned = 0  # text[:copied] is in out; no key may start before scanned
    for at in sorted(hits):
        if at < scanned:
            continue
        window = text[max(0, at - KEY_MAX) : at]
        start = at - (len(window) - len(window.rstrip(WORD_CHARS)))
        if start < scanned or (start > 0 and text[start - 1] in WORD_CHARS):
            run = _RUN.match(text, at)  # inside a key already read, or one longer than KEY_MAX: skip the run
            scanned = max(scanned, run.end() if run else at + 1)
            continue
        key = _KEY.match(text, start)
        m = ASSIGNMENT.match(text, start) if key and names_secret(key.group()) else None
        if m is None:  # the name is checked first: a value is read only after a secret's name
            scanned = key.end() if key else at + 1
            continue
        scanned = m.end()
        if value_is_secret(m, text):
            value_start = m.end("sep")
            out += (text[copied:value_start], label)
            copied = m.end()
    return "".join(out) + text[copied:] if out else text
