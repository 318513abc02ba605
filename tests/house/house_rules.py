#!/usr/bin/env python3
"""house_rules.py - the structural house rules that a compiler cannot see,
checked on the source tree (python3 stdlib only; no build needed).

usage: house_rules.py SOURCE_ROOT CHECK
  names       "shard" names files in core/src/shard only (the checkpoint's
              rank-file code is rankfile_*), "memory" the training-memory
              estimate only (core/src/shard, and its report)
  views       a folder of core/src includes of another folder only headers
              not named *_internal.h / *_impl.h (README "Layout")
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


INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z0-9_]+)/([A-Za-z0-9_.]+)"',
                     re.M)


def check_views(root):
    bad = []
    for rel in core_files(root):
        if not rel.endswith((".c", ".h", ".cu")):
            continue
        folder = rel.split("/")[2]
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            area, header = m.group(1), m.group(2)
            if area in (folder, "tpx"):
                continue
            if re.search(r"_(internal|impl)\.h$", header):
                bad.append("%s: includes %s/%s, another folder's private "
                           "header (read its *_view.h)" % (rel, area, header))
    return bad


CHECKS = {"names": check_names, "views": check_views}


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
