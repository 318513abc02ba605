#!/usr/bin/env python3
"""house_rules.py - the structural house rules that a compiler cannot see,
checked on the source tree (python3 stdlib only; no build needed).

usage: house_rules.py SOURCE_ROOT CHECK
  names       "shard" names files in core/src/shard only (the checkpoint's
              rank-file code is rankfile_*), "memory" the training-memory
              estimate only (core/src/shard, and its report)
Prints one line per violation and exits 1 when there is any.
"""
import os
import re
import sys


def core_files(root):
    base = os.path.join(root, "core", "src")
    for d, _, files in os.walk(base):
        for f in sorted(files):
            yield os.path.relpath(os.path.join(d, f), root)


def check_names(root):
    bad = []
    homes = {"shard": {"core/src/shard"},
             "memory": {"core/src/shard", "core/src/report"}}
    for rel in core_files(root):
        folder, name = os.path.split(rel)
        stem = os.path.splitext(name)[0]
        for word, ok in homes.items():
            if re.search(r"(^|_)%s(_|$)" % word, stem) and folder not in ok:
                bad.append("%s: '%s' names a file outside %s" %
                           (rel, word, " / ".join(sorted(ok))))
    return bad


CHECKS = {"names": check_names}


def main(argv):
    if len(argv) != 3 or argv[2] not in CHECKS:
        sys.stderr.write(__doc__)
        return 2
    bad = CHECKS[argv[2]](argv[1])
    for line in bad:
        print(line)
    print("%s: %s" % (argv[2], "%d violation(s)" % len(bad) if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
