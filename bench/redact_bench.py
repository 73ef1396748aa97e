"""Benchmark: what one redaction costs, on a source file and on a megabyte of mixed text.

keel redacts every tool result twice (the result guard and the transcript) and memory capture once
more, so this is a per-turn cost. Reports the best of N calls of ``redact`` on
- the 17 kB source file a keel session reads (the largest of keel's own files near that size), and
- 1 MB of mixed text: keel's sources and README, a package-lock.json, log lines, base64 blobs, git log,
with the count of lines masked in keel's own src/ (false positives) and the vendored rules' counts.
``--baseline REV`` also times the redact.py of a git revision (one without the vendored rules), in
the same process, so the two figures share the machine's state.

With ``--fp``, also the rate of false positives on ordinary text (real corpora and generated cases,
see ``false_positive_rates``) and any fake secret of a known format left unmasked.

    python bench/redact_bench.py [--baseline cc43ebc] [--runs 20] [--fp] [--json bench/results/redact.json]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "agentkeel"


def source_17k() -> str:
    files = sorted(SRC.rglob("*.py"), key=lambda p: abs(len(p.read_text()) - 17_000))
    return files[0].read_text()


def mixed_1mb() -> str:
    parts = [p.read_text() for p in sorted(SRC.rglob("*.py"))] + [(ROOT / "README.md").read_text()]
    lock = []
    for i in range(400):
        digest = base64.b64encode(hashlib.sha512(str(i).encode()).digest()).decode()
        lock.append(f'    "node_modules/pkg{i}": {{"version": "1.{i}.0", "integrity": "sha512-{digest}"}},\n')
    parts.append("".join(lock))
    parts.append(
        "".join(
            f"2026-01-01T00:00:{i % 60:02d}Z INFO request id={hashlib.md5(str(i).encode()).hexdigest()} "
            f"path=/api/v1/items/{i} status=200 took={i % 97}ms\n"
            for i in range(3000)
        )
    )
    parts.append("".join(base64.b64encode(hashlib.sha256(str(i).encode()).digest() * 8).decode() for i in range(300)))
    sha1 = (hashlib.sha1(str(i).encode()).hexdigest() for i in range(500))
    commits = (f"commit {sha}\nAuthor: Dev <dev@example.com>\n\n" for sha in sha1)
    parts.append("".join(commits))
    text = "\n".join(parts)
    return (text * (1_000_000 // len(text) + 1))[:1_000_000]


def best(fn: Callable[[str], str], text: str, runs: int) -> float:
    fn(text)  # first use loads and compiles what it needs
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - t)
    return min(times) * 1000


def _module_at(rev: str, rel: str, name: str) -> Any:
    """The module src/agentkeel/policy/<rel> as it was at rev, loaded under name; None if absent there."""
    shown = subprocess.run(
        ["git", "show", f"{rev}:src/agentkeel/policy/{rel}"], cwd=ROOT, capture_output=True, text=True
    )
    if shown.returncode != 0:
        return None
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(shown.stdout)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_baseline(rev: str) -> Callable[[str], str]:
    """redact.py of rev, with the assignment rules of the same rev (redact.py reads them from its
    package, which is the current one)."""
    module = _module_at(rev, "redact.py", "redact_baseline")
    if module is None:
        raise SystemExit(f"{rev} has no src/agentkeel/policy/redact.py")
    assignment = _module_at(rev, "assignment.py", "assignment_baseline")
    if assignment is not None and hasattr(module, "_assignment"):
        module._assignment = assignment
    fn: Callable[[str], str] = getattr(module, "scan", module.redact)  # scan: without the memo
    return fn


def false_positives(fn: Callable[[str], str]) -> int:
    lines = 0
    for path in sorted(SRC.rglob("*")):
        if path.suffix in (".py", ".md", ".json", ".toml") and path.name != "gitleaks_rules.json":
            text = path.read_text()
            lines += sum(a != b for a, b in zip(text.splitlines(), fn(text).splitlines(), strict=False))
    return lines


# --- false positives on ordinary text (#34 item 4) ------------------------------------------------
# Real corpora: the Python standard library (its test/ folders left out: they hold test keys on
# purpose) and the sources of well-known packages installed beside keel. Generated cases: what a
# model or a tool prints every day and holds no secret. A unit (a line of a file, a generated case)
# counts as a false positive when redaction changes it. The real corpora may hold a real secret-
# shaped fixture; the figure is an upper bound there.
_PACKAGES = ("httpx", "anyio", "click", "jsonschema", "hypothesis", "anthropic", "cryptography", "certifi", "idna")


def real_corpora(limit_chars: int = 4_000_000) -> dict[str, list[str]]:
    """name -> lines, each corpus read in a stable order up to ``limit_chars``."""
    stdlib = Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = Path(os.__file__).parent  # fallback, replaced below when site-packages is found
    for entry in sys.path:
        if entry.endswith("site-packages") and Path(entry).is_dir():
            site = Path(entry)
    sources = {
        "cpython_stdlib": [
            f
            for f in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py"))
            if "test" not in f.parts[-2] and "site-packages" not in f.parts
        ],
        "site_packages": [f for pkg in _PACKAGES for f in sorted((site / pkg).rglob("*.py"))],
    }
    corpora: dict[str, list[str]] = {}
    for name, files in sources.items():
        lines: list[str] = []
        size = 0
        for f in files:
            try:
                text = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            lines += text.splitlines()
            size += len(text)
            if size >= limit_chars:
                break
        corpora[name] = lines
    return corpora


def generated_cases(n: int = 2000) -> dict[str, list[str]]:
    """name -> cases, from a fixed seed: ordinary numbers, hashes, ids and test data."""
    rng = random.Random(34)
    rand_bytes = lambda k: bytes(rng.randrange(256) for _ in range(k))  # noqa: E731
    return {
        "number_lists": [" ".join(str(rng.randrange(100)) for _ in range(rng.randrange(7, 14))) for _ in range(n)],
        "counting_runs": [" ".join(str(i) for i in range(s, s + rng.randrange(7, 12))) for s in range(n)],
        "timestamps": [
            f"{rng.randrange(2000, 2030)} {rng.randrange(1, 13):02d} {rng.randrange(1, 29):02d} "
            f"{rng.randrange(24):02d} {rng.randrange(60):02d} {rng.randrange(60):02d}"
            for _ in range(n)
        ],
        "long_integers": [str(rng.randrange(10**12, 10**19)) for _ in range(n)],
        "hex_dumps": [" ".join(f"{b:02x}" for b in rand_bytes(16)) for _ in range(n)],
        "decimal_dumps": [" ".join(str(b) for b in rand_bytes(12)) for _ in range(n)],
        "hashes": [
            getattr(hashlib, algo)(str(i).encode()).hexdigest() for i in range(n) for algo in ("md5", "sha1", "sha256")
        ],
        "uuids": [str(uuid.UUID(bytes=rand_bytes(16), version=4)) for _ in range(n)],
        "base64_test_data": [base64.b64encode(rand_bytes(rng.randrange(12, 200))).decode() for _ in range(n)],
        "base64_text": [base64.b64encode(f"hello world {i} from a fixture".encode()).decode() for i in range(n)],
        "sri_integrity": [
            "sha512-" + base64.b64encode(hashlib.sha512(str(i).encode()).digest()).decode() for i in range(n)
        ],
        "git_log": [f"commit {hashlib.sha1(str(i).encode()).hexdigest()} Merge pull request #{i}" for i in range(n)],
        "phone_numbers": [
            f"+1 {rng.randrange(200, 999)} {rng.randrange(200, 999)} {rng.randrange(1000, 9999)}" for _ in range(n)
        ],
        "code_assignments": [
            rng.choice(
                [
                    f"token_count = {rng.randrange(10**6)}",
                    f"max_tokens={rng.randrange(4096)}",
                    f"password_min_length = {rng.randrange(6, 32)}",
                    f"key = hashlib.sha256(b'{i}').hexdigest()",
                    f"secret_name = 'db-{i}'",
                    "api_key_header = 'X-Api-Key'",
                    f"self.token = tokenizer.next()  # {i}",
                ]
            )
            for i in range(n)
        ],
    }


# One obviously fake secret of each format keel knows: each must still be masked.
FAKE_SECRETS = [
    "sk-ant-api03-FAKEfakeFAKEfakeFAKEfake0000",
    "sk-proj-FAKEfakeFAKEfakeFAKEfake0000",
    "ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000",
    "github_pat_FAKEfakeFAKEfakeFAKEfake_FAKEfakeFAKEfakeFAKEfake0000",
    "xoxb-0000000000-FAKEfakeFAKE",
    "AKIAFAKEFAKEFAKE1234",
    "AIzaFAKEfakeFAKEfakeFAKEfakeFAKEfake000",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlIn0.FAKEfakeFAKEfakeFAKE",
    "Authorization: Bearer FAKEfakeFAKEfake0000",
    "password=FakePassw0rd!",
    "postgres://admin:fakepassword@db.internal/app",
    "card 4111 1111 1111 1111",
    "card 4111111111111111",
    "card 3782 822463 10005",
    "-----BEGIN RSA PRIVATE KEY-----\nFAKE\n-----END RSA PRIVATE KEY-----",
    "aws_secret_access_key = FAKEfake0123FAKEfake0123FAKEfake0123FAKE",
    "echo " + base64.b64encode(b"sk-ant-api03-FAKEfakeFAKEfakeFAKEfake0000").decode() + " | base64 -d",
]


def false_positive_rates(fn: Callable[[str], str]) -> dict[str, object]:
    """corpus -> {units, changed, rate}, and the fake secrets left unmasked (must be none)."""
    out: dict[str, object] = {}
    for name, units in {**real_corpora(), **generated_cases()}.items():
        changed = sum(fn(u) != u for u in units)
        out[name] = {"units": len(units), "changed": changed, "rate": round(changed / max(1, len(units)), 5)}
    out["fake_secrets_missed"] = [s for s in FAKE_SECRETS if fn(s) == s]
    return out


def main() -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from agentkeel.policy.redact import scan
    from agentkeel.policy.secret_rules import ruleset

    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="a git revision whose redact.py to time beside this one")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--fp", action="store_true", help="also measure false positives on ordinary text (slow)")
    ap.add_argument("--json", default="bench/results/redact.json")
    args = ap.parse_args()
    small, large = source_17k(), mixed_1mb()
    t = time.perf_counter()
    rules = ruleset()
    load_ms = (time.perf_counter() - t) * 1000
    report: dict[str, object] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "source_chars": len(small),
        "mixed_chars": len(large),
        "rules": {"vendored": len(rules.rules), "skipped": len(rules.skipped), "source": rules.source},
        "rules_load_ms": round(load_ms, 2),
    }
    # scan, not redact: redact remembers its answers, so every call after the first of the same
    # text would time a dictionary lookup
    candidates: dict[str, Callable[[str], str]] = {"current": scan}
    if args.baseline:
        candidates[f"baseline {args.baseline}"] = load_baseline(args.baseline)
    for name, fn in candidates.items():
        report[name] = {
            "source_17k_ms": round(best(fn, small, args.runs), 3),
            "mixed_1mb_ms": round(best(fn, large, max(3, args.runs // 5)), 1),
            "false_positive_lines_in_src": false_positives(fn),
        }
        if args.fp:
            report[f"{name} false positives"] = false_positive_rates(fn)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
