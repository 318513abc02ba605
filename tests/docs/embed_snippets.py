#!/usr/bin/env python3
"""docs/EMBED.md's C blocks against the program they quote.

Every ```c block of docs/EMBED.md must appear verbatim in
examples/embed_trainer.c (which the test embed-trainer builds and runs), so
the page never shows code that does not compile or does not work. Prints
the first line of each block that is not found and exits 1; exits 1 too
when the page has no C block at all.
usage: embed_snippets.py SOURCE_ROOT"""
import re
import sys


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    with open(root + "/docs/EMBED.md", encoding="utf-8") as f:
        page = f.read()
    with open(root + "/examples/embed_trainer.c", encoding="utf-8") as f:
        source = f.read()
    blocks = re.findall(r"^```c\n(.*?)^```$", page, re.S | re.M)
    if not blocks:
        print("docs/EMBED.md: no ```c block found")
        return 1
    bad = 0
    for i, block in enumerate(blocks, 1):
        if block not in source:
            first = block.strip().split("\n")[0]
            print("docs/EMBED.md block %d (%s ...) is not in "
                  "examples/embed_trainer.c" % (i, first))
            bad += 1
    print("%d of %d blocks quoted verbatim" % (len(blocks) - bad, len(blocks)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
