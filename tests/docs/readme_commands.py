#!/usr/bin/env python3
"""readme_commands.py — every command README.md shows runs as written.

Commands run in a scratch directory that links every top-level entry of
the source tree (a fresh clone's view), so files a command writes (an
--html page, say) land there and are removed. Commands are the lines of the README's ```sh blocks and the inline code
spans that start with a path in this repository (`build/...`, `bench/...`,
`tools/...`, `examples/...`) followed by arguments. Each runs from the source root, with the leading `build/` of
every word mapped to the build directory under test (so the ASan build
checks its own binaries). A trailing `# ... exit N` comment gives the
expected exit status (default 0). Parts of a `&&` chain that cannot run
inside the test suite (installing packages, the build itself, the whole
suite, minute-long benchmarks) are checked to exist and be executable, and
listed as such. Standard library only.

usage: readme_commands.py SOURCE_DIR BUILD_DIR"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

NOT_RUN = {
    "tools/install-deps.sh": "installs Debian packages (root, network)",
    "tools/build.sh": "the build this test runs in",
    "tools/test.sh": "runs this whole suite",
    "bench/plan/run.sh": "a benchmark of minutes",
    "bench/coll/compare.sh": "a benchmark under mpirun",
    "bench/ckpt/run.sh": "a benchmark of minutes writing ~4 GB",
    "bench/train/run.sh": "a benchmark of minutes (54M-parameter training steps)",
    "bench/ckpt/fair.sh": "a benchmark of minutes writing ~4 GB",
    "tools/gpu-check.sh": "needs an NVIDIA GPU (the meson test gpu-check runs it)",
    "fuzz/run.sh": "minutes of fuzzing in the clang build",
}


def commands(readme):
    """(line number, command, expected exit) for every command shown."""
    out, in_sh = [], False
    lines = readme.split("\n")
    for no, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_sh = line.strip() == "```sh" if not in_sh else False
            continue
        if in_sh and line.strip() and not line.lstrip().startswith("#"):
            out.append((no, line.strip()))
    # inline code spans (they may wrap) outside fenced blocks
    text, fenced = [], False
    for no, line in enumerate(lines, 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            text.append((no, line))
    joined = "\n".join(l for _, l in text)
    starts = []
    pos = 0
    for no, l in text:
        starts.append((pos, no))
        pos += len(l) + 1
    for m in re.finditer(r"`([^`]+)`", joined):
        span = " ".join(m.group(1).split())
        first = span.split(" ")[0]
        # a command: a path of this repository followed by arguments (a
        # bare path such as `examples/embed.c` is a mention, not a command)
        if not re.match(r"^(build|bench|tools|examples)/\S+$", first) or " " not in span:
            continue
        if not (first.startswith("build/") or os.path.isfile(os.path.join(SRC, first))):
            continue
        no = max(n for p, n in starts if p <= m.start())
        out.append((no, span))
    res = []
    for no, cmd in out:
        want = 0
        if "#" in cmd:
            cmd, comment = cmd.split("#", 1)
            m = re.search(r"exit (\d+)", comment)
            if m:
                want = int(m.group(1))
        res.append((no, cmd.strip(), want))
    return res


def main():
    global SRC
    SRC, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with open(os.path.join(SRC, "README.md")) as f:
        cmds = commands(f.read())
    scratch = tempfile.mkdtemp(prefix="tpx-readme-")
    for name in os.listdir(SRC):
        if name != ".git" and not os.path.samefile(os.path.join(SRC, name), build) \
                and not name.startswith("build"):
            os.symlink(os.path.join(SRC, name), os.path.join(scratch, name))
    try:
        return run_all(cmds, build, scratch)
    finally:
        shutil.rmtree(scratch)


def run_all(cmds, build, scratch):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("TPX_PLUGIN_PATH", None)
    fails = ran = 0
    for no, cmd, want in cmds:
        parts = [p.strip() for p in cmd.split("&&")]
        for k, part in enumerate(parts):
            words = shlex.split(part)
            if not words:
                continue
            if words[0] in NOT_RUN:
                path = os.path.join(SRC, words[0])
                if os.access(path, os.X_OK):
                    print("SKIP README:%d %s (%s; exists)" % (no, part, NOT_RUN[words[0]]))
                else:
                    print("FAIL README:%d %s: not an executable file" % (no, part))
                    fails += 1
                continue
            if not (words[0].startswith("build/") or os.path.isfile(os.path.join(SRC, words[0]))):
                print("SKIP README:%d %s (not a command of this repository)" % (no, part))
                continue
            argv = [build + w[5:] if w.startswith("build/") else w for w in words]
            expect = want if k == len(parts) - 1 else 0
            try:
                r = subprocess.run(argv, cwd=scratch, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=300)
                rc, err = r.returncode, r.stderr.decode(errors="replace")
            except (OSError, subprocess.TimeoutExpired) as e:
                rc, err = -1, str(e)
            ran += 1
            if rc != expect:
                print("FAIL README:%d %s: exit %d, want %d\n    %s"
                      % (no, part, rc, expect, err.strip()[-600:].replace("\n", "\n    ")))
                fails += 1
            else:
                print("PASS README:%d %s (exit %d)" % (no, part, rc))
    if ran < 10:
        print("FAIL only %d commands found in README.md: the extraction broke" % ran)
        fails += 1
    print("%d command(s) run, %d failure(s)" % (ran, fails))
    return 1 if fails else 0


SRC = "."
if __name__ == "__main__":
    sys.exit(main())
