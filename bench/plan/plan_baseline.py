#!/usr/bin/env python3
"""plan_baseline.py - the Python baseline for tpx-bench-plan: the same plan
keys matched against the same module FQNs with fnmatch, atom by atom, as
torch's parallelize_module resolves them (a key atom never crosses a dot).

Input: the file written by `tpx-bench-plan --dump-fqns PATH` (lines
"key <pattern>" first, then one module FQN per line). Prints the matched
module count and the time of the matching alone (reading the file excluded).
"""
import fnmatch
import sys
import time


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: plan_baseline.py FQN_DUMP", file=sys.stderr)
        return 2
    keys, fqns = [], []
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("key "):
                keys.append(line[4:].split("."))
            else:
                fqns.append(line)
    t0, c0 = time.perf_counter(), time.process_time()
    matched = 0
    for fqn in fqns:
        atoms = fqn.split(".")
        for key in keys:
            if len(key) != len(atoms):
                continue
            if all(fnmatch.fnmatch(a, p) for a, p in zip(atoms, key)):
                matched += 1
                break
    t1, c1 = time.perf_counter(), time.process_time()
    print(f"# python fnmatch baseline: {len(fqns)} modules x {len(keys)} keys")
    print(f"  wall {t1 - t0:.3f} s, cpu {c1 - c0:.3f} s, {matched} matched")
    print(f"RESULT matched={matched} match_s={t1 - t0:.6f} "
          f"match_cpu={c1 - c0:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
