#!/usr/bin/env python3
"""Sum test results of one or more meson test logs into 'N passed, N failed'.

A test whose output holds Check summary lines ("100%: Checks: N, Failures: F,
Errors: E") counts its Check tests; any other test counts as one. A test that
failed without a summary line (crash, timeout) counts as one failure on top.
"""
import json
import re
import sys

CHECK = re.compile(r"\d+%: Checks: (\d+), Failures: (\d+), Errors: (\d+)")

passed = failed = 0
for path in sys.argv[1:]:
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as exc:
        print(f"cannot read {path}: {exc}", file=sys.stderr)
        failed += 1
        continue
    for line in lines:
        if not line.strip():
            continue
        t = json.loads(line)
        ok = t.get("result") in ("OK", "EXPECTEDFAIL", "SKIP")
        sums = CHECK.findall(t.get("stdout") or "") + CHECK.findall(t.get("stderr") or "")
        if sums:
            n = sum(int(a) for a, _, _ in sums)
            bad = sum(int(f) + int(e) for _, f, e in sums)
            passed += n - bad
            failed += bad
            if not ok and bad == 0:
                failed += 1
        elif ok:
            passed += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
