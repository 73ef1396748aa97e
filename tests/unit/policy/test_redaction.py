"""Secret redaction: planted (fake) secrets never survive; ordinary text is left alone."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.policy import assignment as _assignment
from agentkeel.policy.redact import _builtin, _card_layout, _issued, redact, redact_obj, scan
from kit import KeelRun, session_files, wire_env

# obviously fake values, shaped like the real thing
SECRETS = {
    "anthropic": "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKE0000",
    "openai": "sk-proj-FAKEfakeFAKEfakeFAKEfake1234",
    "github": "ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake1234",
    "aws": "AKIAFAKEFAKEFAKE1234",
    "google": "AIzaFAKEfakeFAKEfakeFAKEfakeFAKEfake123",
    "slack": "xoxb-0000-FAKE-fakefake",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlIn0.FAKEsignatureFAKE",
    "card": "4111 1111 1111 1111",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_known_secret_shapes_are_masked(name: str) -> None:
    out = redact(f"here it is: {SECRETS[name]} (done)")
    assert SECRETS[name] not in out and "[REDACTED:" in out and out.endswith("(done)")


@pytest.mark.parametrize(
    "text",
    [
        "password=hunter2-fake",
        'DB_PASSWORD: "fake-pass-123"',
        '{"api_key": "fake0123456789abcdef"}',
        "export GITHUB_TOKEN=fakefakefake123",
        "Authorization: Bearer fakeTokenValue0123456789",
        "postgres://admin:fakepassword@db.internal/app",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKEKEYDATA\n-----END OPENSSH PRIVATE KEY-----",
    ],
)
def test_assignments_headers_urls_and_keys(text: str) -> None:
    out = redact(text)
    for needle in (
        "hunter2",
        "fake-pass-123",
        "fake0123456789",
        "fakefakefake123",
        "fakeTokenValue",
        "fakepassword",
        "FAKEKEYDATA",
    ):
        assert needle not in out


@pytest.mark.parametrize(
    "text",
    [
        "git status && git diff",
        "def tokenize(text):",
        "the password field is required",
        "order 1234 5678",
        "sk-short",
        "version 2.1.328",
        "See https://example.com/path",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact(text) == text


def test_redact_obj_walks_json() -> None:
    obj = {"a": [SECRETS["openai"], {"b": f"key={SECRETS['github']}"}], "n": 3}
    out = json.dumps(redact_obj(obj))
    assert SECRETS["openai"] not in out and SECRETS["github"] not in out and '"n": 3' in out


@given(st.text(max_size=300))
def test_redact_never_crashes_and_is_idempotent(text: str) -> None:
    once = scan(text)  # the work itself: redact() remembers masked text as clean, which relies on this
    assert scan(once) == once and redact(text) == once


@pytest.mark.parametrize(
    "sample", [f"x {v} y" for v in SECRETS.values()] + ["aws AKIAFAKEFAKEFAKE1234 secret_access_key=" + "Fa1e" * 10]
)
def test_masked_text_is_clean_so_remembering_it_is_safe(sample: str) -> None:
    """redact() answers a text it masked before from memory, and masked text as itself: sound only
    because scanning masked text again finds nothing more."""
    masked = scan(sample)
    assert masked != sample and scan(masked) == masked
    assert redact(sample) == masked and redact(masked) == masked


def test_transcript_never_holds_a_planted_secret(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".env").write_text(f"OPENAI_API_KEY={SECRETS['openai']}\n")
    server = fake_llm(
        {
            "steps": [
                {
                    "text": f"I will not echo {SECRETS['anthropic']}",
                    "tool_calls": [{"name": "Read", "input": {"file_path": str(project / ".env")}}],
                },
                "Read it.",
            ]
        }
    )
    run = keel("-p", f"my token is {SECRETS['github']}", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    [log] = session_files(tmp_path / "keelhome")
    text = log.read_text()
    assert all(secret not in text for secret in SECRETS.values())
    assert "[REDACTED:" in text


# --- linear time -----------------------------------------------------------------------------
# Redaction runs over whole files and command outputs on every turn, so keel writes its patterns for
# speed: literal first, possessive, words found with str.find in a lower-cased copy and the rest matched
# there. This is the plain, backtracking form of keel's own stage: the oracle the fast one must agree
# with, character for character. (The vendored gitleaks stage has its own in test_redact_rules.py.)
_OBVIOUS = [
    (r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
     r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)", "private_key"),
    (r"\bsk-ant-[A-Za-z0-9_\-]{16,}", "anthropic_key"),
    (r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", "openai_key"),
    (r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})", "github_token"),
    (r"\bxox[abprs]-[A-Za-z0-9\-]{10,}", "slack_token"),
    (r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", "aws_access_key"),
    (r"\bAIza[0-9A-Za-z_\-]{35}\b", "google_api_key"),
    (r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", "jwt"),
]  # fmt: skip
# masked: the named group v; a value that is one English word is kept
_OBVIOUS_V = [
    (r"(?i)(?<=\bbearer )(?P<v>[A-Za-z0-9_\-.=~+/]{12,})", "bearer_token"),
    (r"""(?i)authorization["']?\]?[ \t]*(?::[ \t]*["']?|=[ \t]*["'])"""
     r"""(?:(?:basic|bearer|token|digest|negotiate|ntlm|hmac|apikey|key)[ \t]+)?+(?P<v>[A-Za-z0-9_\-.=~+/:]{6,})""",
     "authorization"),
    (r"""(?i:mysql)[\w-]*(?:[ \t]+(?!-p)\S+){0,24}[ \t]+-p(?P<v>'[^'\n]*'|"[^"\n]*"|[^\s'"]+)""", "password"),
    (r"""(?i:mariadb)[\w-]*(?:[ \t]+(?!-p)\S+){0,24}[ \t]+-p(?P<v>'[^'\n]*'|"[^"\n]*"|[^\s'"]+)""", "password"),
    (r"""(?i)\bcurl(?:[ \t]+(?!-u\b|--user\b)\S+){0,24}[ \t]+(?:-u|--user)(?:[ \t]+|=)["']?[^\s:'"]*:(?P<v>[^\s'"]+)""",
     "password"),
    *[
        (rf"""(?i)(?<![A-Za-z0-9_]){re.escape(option)}[ \t]+(?P<v>'[^'\n]+'|"[^"\n]+"|[^\s'"$\-][^\s'"]*)""", "secret")
        for option in ("--token", "--auth-token", "--access-token", "--api-key", "--apikey", "--api-token", "--secret",
                       "--client-secret")
    ],
    # an empty user is a credential too (redis://:PASSWORD@host)
    (r"(?<=://)(?P<v>[^/\s:@]*:[^/\s@]+)(?=@)", "url_credentials"),
    # a lone token as the user (https://TOKEN@host): 16+ characters with a digit and a letter
    (r"(?<=://)(?=[A-Za-z0-9_\-.~%+]*[0-9])(?=[A-Za-z0-9_\-.~%+]*[A-Za-z])(?P<v>[A-Za-z0-9_\-.~%+]{16,})(?=@)",
     "url_credentials"),
]  # fmt: skip
_OBVIOUS_AWS_CONTEXT = r"\[redacted:aws_access_key\]|secret[ _\-]?access[ _\-]?key"
_OBVIOUS_AWS_SECRET = r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"


def _obvious_redact(text: str) -> str:
    for pattern, kind in _OBVIOUS:
        text = re.sub(pattern, f"[REDACTED:{kind}]", text)

    def keep_words(kind: str) -> Callable[[re.Match[str]], str]:
        def sub(m: re.Match[str]) -> str:
            if re.fullmatch(r"[A-Z]?[a-z]+", m.group("v").rstrip(".")) and kind in (
                "bearer_token",
                "authorization",
                "secret",
            ):
                return m.group(0)
            v0, v1 = m.start("v") - m.start(), m.end("v") - m.start()
            return f"{m.group(0)[:v0]}[REDACTED:{kind}]{m.group(0)[v1:]}"

        return sub

    for pattern, kind in _OBVIOUS_V:
        text = re.sub(pattern, keep_words(kind), text)
    contexts = [m.span() for m in re.finditer(_OBVIOUS_AWS_CONTEXT, text.lower())]
    text = re.sub(
        _OBVIOUS_AWS_SECRET,
        lambda m: (
            "[REDACTED:aws_secret_key]"
            if any(a - 200 <= m.start() <= b + 200 for a, b in contexts)
            and re.search("[A-Z]", m.group())
            and re.search("[a-z]", m.group())
            and re.search("[0-9]", m.group())
            else m.group()
        ),
        text,
    )
    # every key (a run of key characters, at most 128) that names a secret, from left to right
    out, copied, resume = [], 0, 0
    for key in re.finditer(r"(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]+", text):
        if key.start() < resume or len(key.group()) > 128 or not _assignment.names_secret(key.group()):
            continue
        m = _assignment.ASSIGNMENT.match(text, key.start())
        if m:
            resume = m.end()
            if _assignment.value_is_secret(m, text):
                out += (text[copied : m.end("sep")], "[REDACTED:secret]")
                copied = m.end()
    text = "".join(out) + text[copied:]

    def card(m: re.Match[str]) -> str:
        digits = re.sub(r"\D", "", m.group(0))
        luhn = sum(sum(divmod(2 * int(c), 10)) if i % 2 == len(digits) % 2 else int(c) for i, c in enumerate(digits))
        card = luhn % 10 == 0 and len(set(digits)) >= 2 and _card_layout(m.group(0)) and _issued(digits)
        return "[REDACTED:card_number]" if card else m.group(0)

    return re.sub(r"\b(?:\d[ -]?){13,19}\b", card, text)


_PIECES = [
    "password", "token", "api_key", "Secret", "get_token()", "eyJ", "eyJhbGciOi", "abcdefgh", "ABCDEFGH",
    "sk-", "sk-ant-", "ghp_", "github_pat_", "xoxb-", "AKIA", "ASIA", "AIza", "Bearer ", "bearer ",
    "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", SECRETS["jwt"], SECRETS["card"],
    "=", ":", '"', "'", " ", ".", "-", "_", "x", "7", "4111", "1111", "\n", "://", "@", "/",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----", " BLOCK-----", "DB_PASS", "_pass", "pwd", "max_tokens",
    "Authorization", "Basic ", "authorization: ", "mysql", " -p", " -u ", "curl", "--user=", "mariadb",
    "secret_access_key", "AKIAFAKEFAKEFAKE1234", "FAKEfake0123FAKEfake0123FAKEfake0123FAKE", "AccountKey",
    "self.", "(", ")", "[", "]", "`", "\t", "Ab", "type", "_env", "=>", ":=", "==", "\\",
]  # fmt: skip


@settings(max_examples=800)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_fast_patterns_agree_with_the_obvious_ones(text: str) -> None:
    assert _builtin(text) == _obvious_redact(text)


@pytest.mark.parametrize(
    "unit",
    [
        "a", "password", "eyJ-", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0123456789+/", "token.", "a=", "1 ", "://a:b@",
        # the words keel finds first, and runs of what follows them
        "bearer ", "authorization: ", "mysql ", "mysql -x ", "curl ", "curl -x ", "pass=", 'token: "', "key",
        "secret access key ", "[REDACTED:aws_access_key]", "key=", "password=x ", 'password="x" ',
        "AKIAFAKEFAKEFAKE1234 ", "Ab1/", "-----BEGIN PRIVATE KEY-----",
    ],
)  # fmt: skip
def test_redaction_time_grows_linearly(unit: str) -> None:
    """One 128 kB text may cost about what 32 texts of 4 kB cost, not 32 times as much (quadratic).
    A ratio within one run, not a wall-clock limit: a 20 kB line of one of these used to take 28 s."""

    small, large = unit * (4_000 // len(unit)), unit * (128_000 // len(unit))
    redact(unit)  # load the vendored rules outside the timing
    batches: list[float] = []
    singles: list[float] = []
    for _ in range(5):  # each sample covers 128 kB, so a busy machine preempts both kinds alike
        t = time.perf_counter()
        for _ in range(32):
            redact(small)
        batches.append(time.perf_counter() - t)
        t = time.perf_counter()
        redact(large)
        singles.append(time.perf_counter() - t)
    ratio = min(singles) / min(batches)  # 1 to 3 when linear (caches favour the small text), 32 when quadratic
    assert ratio < 8, (unit, min(batches), min(singles))


@settings(max_examples=400)
@given(
    st.lists(
        st.sampled_from(["4111", "1111", "1", "0", "5", " ", "-", "  ", "\n", "x", "\t", "٤", "١", "４", "_", "a1"]),
        max_size=40,
    ).map("".join)
)
def test_the_card_prefilter_skips_only_text_where_the_card_pattern_cannot_match(text: str) -> None:
    """``_cards`` runs the card pattern only where a run of 13 digits (spaces and hyphens between
    them ignored) exists; elsewhere it returns the text as the pattern would have."""
    from agentkeel.policy.redact import _CARD, _card, _cards

    assert _cards(text) == _CARD.sub(_card, text)


def test_cards_are_still_masked_in_every_layout_the_pattern_knows() -> None:
    for card in ("4111111111111111", "4111 1111 1111 1111", "4111-1111-1111-1111", "3782 822463 10005"):
        assert scan(f"paid with {card} today") == "paid with [REDACTED:card_number]today", (
            card
        )  # the pattern takes one separator after
    assert scan("     1\tdef f1(x):\n     2\t    return x + 1") == "     1\tdef f1(x):\n     2\t    return x + 1"
