"""Benchmark: what one redaction costs, on a source file and on a megabyte of mixed text.

keel redacts every tool result twice (the result guard and the transcript) and memory capture once
more, so this is a per-turn cost. Reports the best of N calls of ``redact`` on
- the 17 kB source file a keel session reads (the largest of keel's own files near that size), and
- 1 MB of mixed text: keel's sources and README, a package-lock.json, log lines, base64 blobs, git log,
with the count of lines masked in keel's own src/ (false positives) and the vendored rules' counts.
``--baseline REV`` also times the redact.py of a git revision (one without the vendored rules), in
the same process, so the two figures share the machine's state.

    python bench/redact_bench.py [--baseline cc43ebc] [--runs 20] [--json bench/results/redact.json]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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


def load_baseline(rev: str) -> Callable[[str], str]:
    source = subprocess.run(
        ["git", "show", f"{rev}:src/agentkeel/policy/redact.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "redact_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("redact_baseline", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn: Callable[[str], str] = module.redact
    return fn


def false_positives(fn: Callable[[str], str]) -> int:
    lines = 0
    for path in sorted(SRC.rglob("*")):
        if path.suffix in (".py", ".md", ".json", ".toml") and path.name != "gitleaks_rules.json":
            text = path.read_text()
            lines += sum(a != b for a, b in zip(text.splitlines(), fn(text).splitlines(), strict=False))
    return lines


def main() -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from agentkeel.policy.redact import redact
    from agentkeel.policy.secret_rules import ruleset

    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="a git revision whose redact.py to time beside this one")
    ap.add_argument("--runs", type=int, default=20)
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
    candidates: dict[str, Callable[[str], str]] = {"current": redact}
    if args.baseline:
        candidates[f"baseline {args.baseline}"] = load_baseline(args.baseline)
    for name, fn in candidates.items():
        report[name] = {
            "source_17k_ms": round(best(fn, small, args.runs), 3),
            "mixed_1mb_ms": round(best(fn, large, max(3, args.runs // 5)), 1),
            "false_positive_lines_in_src": false_positives(fn),
        }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
