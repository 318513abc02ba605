#!/usr/bin/env python3
"""plugins_install.py — docs/PLUGINS.md's install step installs where it says.

`meson setup build -Dprefix=P` on the tree's existing `build/` (the one
tools/build.sh and the README make) only prints "Directory already
configured", exits 0 and keeps the old prefix, so the `meson install`
after it went to /usr/local. Every `meson setup DIR` in PLUGINS.md's
shell blocks that sets a prefix must therefore name a directory other than
`build`, its `meson install -C` the same one; and the staged alternative
(`meson install --destdir` with `PKG_CONFIG_SYSROOT_DIR`) must be shown.

usage: plugins_install.py SOURCE_DIR"""
import os
import re
import shlex
import sys


def sh_lines(text):
    out, in_sh = [], False
    for no, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            in_sh = line.strip() == "```sh" if not in_sh else False
            continue
        if in_sh:
            out.append((no, line.split("#", 1)[0].strip()))
    return out


def main():
    path = os.path.join(sys.argv[1], "docs", "PLUGINS.md")
    with open(path) as f:
        lines = sh_lines(f.read())
    fails, prefixed = [], 0
    for no, line in lines:
        for part in (p.strip() for p in line.split("&&")):
            words = shlex.split(part) if part else []
            if words[:2] != ["meson", "setup"]:
                continue
            if not any(re.match(r"^(-Dprefix=|--prefix)", w) for w in words):
                continue
            prefixed += 1
            d = next((w for w in words[2:] if not w.startswith("-")), None)
            if d in (None, "build", "./build"):
                fails.append("PLUGINS.md:%d: %r sets a prefix on the tree's "
                             "existing build/ (meson keeps its old prefix)"
                             % (no, part))
            elif "meson install -C %s" % d not in line:
                fails.append("PLUGINS.md:%d: %r is not installed from the "
                             "same directory" % (no, line))
    if prefixed == 0:
        fails.append("PLUGINS.md: no `meson setup DIR -Dprefix=...` found")
    text = "\n".join(l for _, l in lines)
    if "--destdir" not in text or "PKG_CONFIG_SYSROOT_DIR" not in text:
        fails.append("PLUGINS.md: the staged install (meson install --destdir "
                     "with PKG_CONFIG_SYSROOT_DIR) is not shown")
    for f in fails:
        print("FAIL " + f)
    print("%d problem(s)" % len(fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
