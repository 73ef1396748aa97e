"""Secret redaction for anything keel writes down or hands on: transcripts, tool results, memory.

Pure functions over strings. Each finding is replaced by ``[REDACTED:<kind>]`` so a reader
knows something was there without learning what.

Two stages. keel's own patterns come first (keys keel knows best, assignments to a name like password,
headers, command lines, card numbers). Then the rules of gitleaks, a maintained secret scanner
(github.com/gitleaks/gitleaks, MIT licence; vendored in gitleaks_rules.json, matched by _secret_rules.py),
which know some 200 services' key formats; their kind is the gitleaks rule id.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Callable
from typing import Any

from agentkeel.policy import assignment as _assignment
from agentkeel.policy.secret_rules import Span, ascii_lower, ruleset

# Every pattern runs over whole file contents and command output on every turn, so two rules hold:
# - Linear time. A start that fails must not rescan the same run from every later position.
#   Written the obvious way, the assignment pattern takes seconds on one 5 kB base64 line and
#   minutes on a repeated key name (tests/test_redact.py measures the growth).
# - A literal first. re finds a leading literal with a fast scan but tries a leading ``\b`` at
#   every position, 50-80x slower on ordinary text; so ``\bsk-`` is written ``sk-(?<=\bsk-)``,
#   which matches exactly the same spans. Where the literal's case varies (Bearer, Authorization),
#   keel finds it with ``str.find`` in a lower-cased copy and matches the rest there.


def _jwt(match: re.Match[str]) -> str:
    return "[REDACTED:jwt]" if match.group("rest") else match.group(0)


_PATTERNS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (  # PEM and PGP (``PRIVATE KEY BLOCK``); a block without its END line is masked to the end. The body
        # is taken possessively up to the END line (a lazy scan to it measured worse than linear).
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[^-]++|-(?!----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----))*+"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)?"
        ),
        "[REDACTED:private_key]",
    ),
    (re.compile(r"sk-ant-(?<=\bsk-ant-)[A-Za-z0-9_\-]{16,}"), "[REDACTED:anthropic_key]"),
    (re.compile(r"sk-(?<=\bsk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), "[REDACTED:openai_key]"),
    (
        re.compile(r"g(?<=\bg)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{40,})"),
        "[REDACTED:github_token]",
    ),
    (re.compile(r"xox(?<=\bxox)[abprs]-[A-Za-z0-9\-]{10,}"), "[REDACTED:slack_token]"),
    (re.compile(r"A(?<=\bA)(?:KIA|SIA)[A-Z0-9]{16}\b"), "[REDACTED:aws_access_key]"),
    (re.compile(r"AIza(?<=\bAIza)[0-9A-Za-z_\-]{35}\b"), "[REDACTED:google_api_key]"),
    # header.payload.signature. The header's run is consumed whether or not a JWT follows, so a
    # failed start skips the run: a later start inside it ends at the same place and fails alike.
    (
        re.compile(r"eyJ(?<=\beyJ)[A-Za-z0-9_\-]{8,}+(?P<rest>\.eyJ[A-Za-z0-9_\-]{8,}+\.[A-Za-z0-9_\-]{8,}+)?"),
        _jwt,
    ),
]
# Matched where a word found in the lower-cased text ends; group "v" is what is masked.
_BEARER = re.compile(r"(?P<v>[A-Za-z0-9_\-.=~+/]{12,}+)")  # after "bearer "
_AUTHORIZATION = re.compile(  # after "authorization": the credentials of an HTTP Authorization header
    r"""(?i)["']?\]?[ \t]*(?::[ \t]*["']?|=[ \t]*["'])"""
    r"""(?:(?:basic|bearer|token|digest|negotiate|ntlm|hmac|apikey|key)[ \t]+)?+"""
    r"""(?P<v>[A-Za-z0-9_\-.=~+/:]{6,}+)"""
)
# After "mysql"/"mariadb": a password written straight after -p, within the command's line.
_MYSQL = re.compile(r"""[\w-]*+(?:[ \t]++(?!-p)\S++){0,24}+[ \t]++-p(?P<v>'[^'\n]*+'|"[^"\n]*+"|[^\s'"]++)""")
# After "curl": the password in the -u/--user option's value (user, colon, password).
_CURL = re.compile(
    r"""(?:[ \t]++(?!-u\b|--user\b)\S++){0,24}+[ \t]++(?:-u|--user)(?:[ \t]++|=)["']?[^\s:'"]*+:(?P<v>[^\s'"]++)"""
)
# After "sshpass": the password of -p (attached or not).
_SSHPASS = re.compile(r"""(?:[ \t]++(?!-p)\S++){0,8}+[ \t]++-p[ \t]*+(?P<v>'[^'\n]*+'|"[^"\n]*+"|[^\s'"]++)""")
# After "docker"/"podman"/"nerdctl"/"helm": `login ... -p PW`, `--password PW`, `--password=PW`.
_LOGIN = re.compile(  # -p's value may be attached to it, as pflag reads it
    r"""(?:[ \t]++(?!login\b)\S++){0,4}+[ \t]++(?:registry[ \t]++)?login"""
    r"""(?:[ \t]++(?!-p|--password\b)\S++){0,24}+[ \t]++(?:-p(?:[ \t]++|=)?+|--password(?:[ \t]++|=))"""
    r"""(?P<v>'[^'\n]*+'|"[^"\n]*+"|[^\s'"]++)"""
)
# After a long option that names a secret (--token, --api-key), its value as the next word (the
# form with "=" is an assignment). A shell variable or another option is not a value.
_OPTION_VALUE = re.compile(r"""[ \t]++(?P<v>'[^'\n]++'|"[^"\n]++"|[^\s'"$\-][^\s'"]*+)""")
# After the ldap tools' -w option: the bind password (keytool's -storepass: _OPTION_VALUE).
_LDAP = re.compile(r"""[\w-]*+(?:[ \t]++(?!-w\b)\S++){0,24}+[ \t]++-w[ \t]++(?P<v>'[^'\n]*+'|"[^"\n]*+"|[^\s'"]++)""")
# A .netrc entry, "machine NAME login USER [account A] password VALUE" (any whitespace between; the login
# is required, so prose such as "the machine learning password policy" is left alone).
_NETRC = re.compile(r"""[ \t]++\S++(?:\s++(?:login|account)\s++\S++)++\s++password\s++(?P<v>\S++)""")
_NETRC_DEFAULT = re.compile(r"""(?:\s++(?:login|account)\s++\S++)++\s++password\s++(?P<v>\S++)""")  # after "default"
_ANCHORED: list[tuple[str, bool, re.Pattern[str], str]] = [
    # (word, needs a word boundary before it, pattern matched right after it, kind). "bearer " may sit
    # inside the previous token (a lookbehind before); the other words begin after it. A bearer token or
    # header credentials that read as one English word ("bearer authorization grant") are prose and kept.
    ("bearer ", True, _BEARER, "bearer_token"),
    ("authorization", False, _AUTHORIZATION, "authorization"),
    ("mysql", False, _MYSQL, "password"),
    ("mariadb", False, _MYSQL, "password"),
    ("curl", True, _CURL, "password"),
    ("sshpass", True, _SSHPASS, "password"),
    ("docker", True, _LOGIN, "password"),
    ("podman", True, _LOGIN, "password"),
    ("nerdctl", True, _LOGIN, "password"),
    ("helm", True, _LOGIN, "password"),
    ("machine", True, _NETRC, "password"),
    ("--token", True, _OPTION_VALUE, "secret"),
    ("--auth-token", True, _OPTION_VALUE, "secret"),
    ("--access-token", True, _OPTION_VALUE, "secret"),
    ("--api-key", True, _OPTION_VALUE, "secret"),
    ("--apikey", True, _OPTION_VALUE, "secret"),
    ("--api-token", True, _OPTION_VALUE, "secret"),
    ("--secret", True, _OPTION_VALUE, "secret"),
    ("--client-secret", True, _OPTION_VALUE, "secret"),
    ("-storepass", True, _OPTION_VALUE, "password"),
    ("-keypass", True, _OPTION_VALUE, "password"),
    ("-srcstorepass", True, _OPTION_VALUE, "password"),
    ("-deststorepass", True, _OPTION_VALUE, "password"),
    ("ldapsearch", True, _LDAP, "password"),
    ("ldapmodify", True, _LDAP, "password"),
    ("ldapadd", True, _LDAP, "password"),
    ("ldapdelete", True, _LDAP, "password"),
    ("ldapwhoami", True, _LDAP, "password"),
    ("ldappasswd", True, _LDAP, "password"),
    ("default", True, _NETRC_DEFAULT, "password"),
]
_WORD = re.compile(r"[A-Z]?[a-z]+")
# user:password@ (the user may be empty, as in a redis URL), or a lone token as the user
# (https://TOKEN@github.com/...): a run of 16+ characters with a letter and a digit, which no user name
# such as git@, me@ or anonymous@ is.
_URL_CREDENTIALS = re.compile(r"://(?P<v>[^/\s:@]*+:[^/\s@]++)(?=@)")
_URL_TOKEN = re.compile(r"://(?P<v>[A-Za-z0-9_\-.~%+]{16,}+)(?=@)")
# An XML element whose name names a secret (password, ApiToken, client_secret) holding a value; a value
# in capitals only (the docs' VALUE, CHANGEME) is a placeholder.
_XML = re.compile(r"<(?P<tag>[A-Za-z_][\w.\-]{0,63}+)>(?P<v>[^<>\s][^<>\n]{0,511}+)</(?P=tag)>")
# Base64 that decodes to text holding a secret (`echo c2stYW50... | base64 -d`): runs of 20+ characters.
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{20,4096}+={0,2}+(?![A-Za-z0-9+/_\-=])")
_PRINTABLE = re.compile(r"[\x20-\x7e\t\n\r]*")

# A bare 40-character AWS secret access key has no prefix of its own, and 40 base64 characters are
# common (hashes, fixtures). keel masks one only near AWS context: within 200 characters of an access
# key id (masked by then) or of the words "secret access key" (any case, _ or - or space between).
_AWS_CONTEXT = re.compile(r"\[redacted:aws_access_key\]|secret[ _\-]?access[ _\-]?key")  # in lower case
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_REACH = 200

# 13-19 digits in groups; the first iteration unrolled so the scan can start from a digit.
_CARD = re.compile(r"\d(?<=\b\d)[ -]?(?:\d[ -]?){12,18}\b")


class _DigitRuns(dict[int, "str | None"]):
    """A ``str.translate`` table: a digit (as ``\\d`` reads it) -> "0", space and hyphen -> deleted,
    anything else -> "x". A card number's match holds only those three and at least 13 digits, so
    in the translation it is a run of 13 "0"s: without one, no card can match, and the pattern (which
    starts at every digit, a third of a numbered file's scan) is not run. Filled on first sight of
    each character."""

    def __missing__(self, code: int) -> str | None:
        ch = chr(code)
        value = None if ch in " -" else "0" if re.match(r"\d", ch) else "x"
        self[code] = value
        return value


_DIGIT_RUNS = _DigitRuns()
_THIRTEEN = "0" * 13


def _cards(text: str) -> str:
    if _THIRTEEN not in text.translate(_DIGIT_RUNS):
        return text
    return _CARD.sub(_card, text)


def _luhn(digits: str) -> bool:
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# How card numbers are written: one run, or groups of four (the last may be shorter: a 13-, 17- or
# 19-digit card), or American Express's and Diners Club's 4-6-5 and 4-6-4. Digits grouped any other
# way are a list of numbers ("69 70 71 72 73 74 75 77", a byte dump, a table row): one in ten such
# runs passes the Luhn check by chance, and masking them rewrote ordinary text.
_CARD_GROUPS = re.compile(r"\d{13,19}|\d{4}(?:[ -]\d{4}){2,3}(?:[ -]\d{1,4})?|\d{4}[ -]\d{6}[ -]\d{4,5}")


def _card_layout(candidate: str) -> bool:
    """Whether candidate (a match of _CARD, perhaps with one separator after) is laid out as a card
    number is written, with one kind of separator throughout."""
    body = candidate.rstrip(" -")
    return _CARD_GROUPS.fullmatch(body) is not None and not ("-" in body and " " in body)


# The networks' number ranges (issuer prefix, lengths), as the card networks publish them: Visa,
# Mastercard, American Express, Discover, Diners Club, JCB, UnionPay, Maestro. One long integer in
# ten passes the Luhn check by chance (an id, a timestamp in nanoseconds, a counter); one that no
# network issues is not a card number.
_CARD_BRANDS = re.compile(
    r"4\d{12}(?:\d{3}|\d{6})?"  # Visa: 13, 16, 19
    r"|(?:5[1-5]\d{2}|222[1-9]|22[3-9]\d|2[3-6]\d{2}|27[01]\d|2720)\d{12}"  # Mastercard: 16
    r"|3[47]\d{13}"  # American Express: 15
    r"|(?:6011|64[4-9]\d|65\d{2})\d{12,15}"  # Discover: 16-19
    r"|3(?:0[0-5]|[689]\d)\d{11,16}"  # Diners Club: 14-19
    r"|35(?:2[89]|[3-8]\d)\d{12,15}"  # JCB: 16-19
    r"|62\d{14,17}"  # UnionPay: 16-19
    r"|(?:5[06-9]|6\d)\d{10,17}"  # Maestro: 12-19
)


def _issued(digits: str) -> bool:
    """Whether digits (any script's, as ``\\d`` reads them) fall in a card network's range."""
    return _CARD_BRANDS.fullmatch("".join(str(int(d)) for d in digits)) is not None


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    if (
        13 <= len(digits) <= 19
        and _luhn(digits)
        and len(set(digits)) >= 2
        and _card_layout(match.group(0))
        and _issued(digits)
    ):
        return "[REDACTED:card_number]"
    return match.group(0)


def redact(text: str) -> str:
    """Mask every secret found in text.

    The same text passes here several times: a tool result at the result guard, then inside the
    events the bus persists, then in memory capture; a model's message in each event that carries
    it. So answers are remembered (``_Memo``), and each answer is remembered as its own answer: masked
    text is clean, and masking it again costs a dictionary lookup. ``scan`` is the work itself.
    """
    if not text:
        return text
    known = _MEMO.get(text)
    if known is not None:
        return known
    masked = scan(text)
    _MEMO.put(text, masked)
    return masked


def scan(text: str) -> str:
    """Mask every secret found in text, remembering nothing (``redact`` remembers)."""
    if not text:
        return text
    return _base64_secrets(_vendored(_builtin(text)))


class _Memo:
    """text -> masked text for the most recent texts, bounded in count and in characters (oldest
    go first). Masked text maps to itself: redaction is idempotent (tests/test_redact.py checks
    ``scan(scan(x)) == scan(x)``), so a text the result guard masked is clean for every later reader."""

    def __init__(self, max_items: int = 2048, max_chars: int = 8_000_000) -> None:
        self._map: dict[str, str] = {}
        self._chars = 0
        self._max_items, self._max_chars = max_items, max_chars
        self._lock = threading.Lock()

    def get(self, text: str) -> str | None:
        return self._map.get(text)

    def put(self, text: str, masked: str) -> None:
        if len(text) + len(masked) > self._max_chars // 4:
            return  # one huge text would push everything else out
        with self._lock:
            for key in (text, masked) if masked != text else (text,):
                if key not in self._map:
                    self._map[key] = masked
                    self._chars += len(key)
            while len(self._map) > self._max_items or self._chars > self._max_chars:
                oldest = next(iter(self._map))
                del self._map[oldest]
                self._chars -= len(oldest)


_MEMO = _Memo()


def _builtin(text: str) -> str:
    """keel's own patterns, in order (tests/test_redact.py checks them against plain backtracking forms)."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    low = ascii_lower(text)
    for word, boundary, pattern, kind in _ANCHORED:
        if word in low:
            text, low = _relower(text, low, _after(word, boundary, pattern, kind, text, low))
    if "://" in text:
        spans = [(*m.span("v"), "url_credentials") for m in _URL_CREDENTIALS.finditer(text)]
        spans += [(*m.span("v"), "url_credentials") for m in _URL_TOKEN.finditer(text) if _tokenish(m.group("v"))]
        text, low = _relower(text, low, spans)
    if "</" in text:
        text, low = _relower(text, low, _xml_secrets(text))
    if "access" in low:
        text, low = _relower(text, low, _aws_secrets(text, low))
    return _cards(_assignment.mask(text, low, "[REDACTED:secret]"))


def _tokenish(run: str) -> bool:
    return any(c.isdigit() for c in run) and any(c.isalpha() for c in run)


def _xml_secrets(text: str) -> list[Span]:
    spans: list[Span] = []
    for m in _XML.finditer(text):
        value = m.group("v")
        placeholder = value.startswith(("[REDACTED", "${", "{{", "%", "...")) or value.isupper()
        if _assignment.names_secret(m.group("tag")) and not placeholder:
            spans.append((*m.span("v"), "secret"))
    return spans


def _base64_secrets(text: str) -> str:
    """A base64 run (standard or URL-safe) whose decoded text is printable and holds a secret keel
    knows is masked whole: encoding a key must not be a way past redaction."""
    if len(text) < 20:
        return text
    spans: list[Span] = []
    for m in _BASE64.finditer(text):
        run = m.group().rstrip("=")
        try:
            raw = base64.b64decode(run.replace("-", "+").replace("_", "/") + "=" * (-len(run) % 4), validate=True)
            decoded = raw.decode("ascii")
        except (ValueError, UnicodeDecodeError):
            continue
        if _PRINTABLE.fullmatch(decoded) and _vendored(_builtin(decoded)) != decoded:
            spans.append((*m.span(), "base64_secret"))
    return _apply(text, spans)


def _relower(text: str, low: str, spans: list[Span]) -> tuple[str, str]:
    if not spans:
        return text, low
    text = _apply(text, spans)
    return text, ascii_lower(text)


def _after(word: str, boundary: bool, pattern: re.Pattern[str], kind: str, text: str, low: str) -> list[Span]:
    """pattern matched right after each occurrence of word (in low), group "v" masked."""
    spans: list[Span] = []
    resume = 0
    at = low.find(word)
    while at >= 0:
        glued = boundary and at > 0 and (low[at - 1].isalnum() or low[at - 1] == "_")
        if at + (len(word) if word == "bearer " else 0) >= resume and not glued:
            m = pattern.match(text, at + len(word))
            if m:
                resume = m.end()
                if kind == "password" or not _WORD.fullmatch(m.group("v").rstrip(".")):
                    spans.append((*m.span("v"), kind))
        at = low.find(word, at + 1)
    return spans


def _aws_contexts(low: str) -> list[tuple[int, int]]:
    """Where _AWS_CONTEXT matches in low, found from each "access" (a str.find) rather than by a scan."""
    found: list[tuple[int, int]] = []
    at = low.find("access")
    while at >= 0:
        for start in (at - 7, at - 6, at - 14):  # "secret access", "secretaccess", "[redacted:aws_access"
            m = _AWS_CONTEXT.match(low, max(start, 0)) if start >= 0 else None
            if m and m.start() <= at < m.end():
                found.append(m.span())
                break
        at = low.find("access", at + 1)
    return found


def _aws_secrets(text: str, low: str) -> list[Span]:
    spans: list[Span] = []
    done = 0
    for ctx_start, ctx_end in _aws_contexts(low):
        lo, hi = max(done, ctx_start - _AWS_REACH), min(len(text), ctx_end + _AWS_REACH)
        for m in _AWS_SECRET.finditer(text, lo, min(len(text), hi + 41)):
            if m.start() > hi:
                break
            key = m.group()
            if any(c.isupper() for c in key) and any(c.islower() for c in key) and any(c.isdigit() for c in key):
                spans.append((m.start(), m.end(), "aws_secret_key"))
        done = max(done, hi)
    return spans


def _apply(text: str, spans: list[Span]) -> str:
    """text with each span replaced by its [REDACTED:kind]; overlapping spans become one (the first's kind)."""
    if not spans:
        return text
    merged: list[list[Any]] = []
    for start, end, kind in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    out: list[str] = []
    copied = 0
    for start, end, kind in merged:
        out += (text[copied:start], f"[REDACTED:{kind}]")
        copied = end
    return "".join(out) + text[copied:]


def _vendored(text: str) -> str:
    return _apply(text, ruleset().findings(text))


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like value (dict keys are kept)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_obj(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_obj(v) for v in value)
    return value
