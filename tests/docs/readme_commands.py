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
listed as such.

Quoted output is checked too: a plain ``` block right after a ```sh block
(with at most one "(...:)" caption line between them) is the output of
that block's commands (their stdout, in order, with the build directory
written back as `build/`). Every line it quotes must appear in that output
in the same order; a caption saying "lines A-B" or "the last N" (or "last
two") pins those lines to that place in the output, and "first lines"
pins the block to the output's start. Standard library only.

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


def sh_block_of(readme):
    """{line number of a ```sh block's command: the block's opening line}."""
    out, opening = {}, None
    for no, line in enumerate(readme.split("\n"), 1):
        if line.startswith("```"):
            opening = no if opening is None and line.strip() == "```sh" else None
            continue
        if opening is not None:
            out[no] = opening
    return out


def output_blocks(readme):
    """(opening line of the ```sh block, caption or "", quoted lines,
    line number) for every plain block quoting a ```sh block's output."""
    lines = readme.split("\n")
    fences = [i for i, l in enumerate(lines) if l.startswith("```")]
    res = []
    # fences pair up: (open, close), (open, close), ...
    pairs = list(zip(fences[0::2], fences[1::2]))
    for (o1, c1), (o2, c2) in zip(pairs, pairs[1:]):
        if lines[o1].strip() != "```sh" or lines[o2].strip() != "```":
            continue
        between = [l for l in lines[c1 + 1:o2] if l.strip()]
        if o2 - c1 - 1 > 1 or (between and not re.match(r"^\(.*:\)$", between[0])):
            continue
        res.append((o1 + 1, between[0] if between else "",
                    [l.rstrip() for l in lines[o2 + 1:c2]], o2 + 1))
    return res


WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def check_output(caption, quoted, output):
    """None when `quoted` is true of `output` as `caption` says, else why."""
    out = [l.rstrip() for l in output.split("\n")]
    while out and not out[-1]:
        out.pop()
    k = 0
    for q in quoted:
        while k < len(out) and out[k] != q:
            k += 1
        if k == len(out):
            return "quoted line not in the output (in order): %r" % q
        k += 1
    head = 0
    m = re.search(r"lines (\d+)-(\d+)", caption)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        head = b - a + 1
        if quoted[:head] != out[a - 1:b]:
            return "lines %d-%d of the output are %r" % (a, b, out[a - 1:b])
    elif "first lines" in caption:
        head = len(quoted)
        if quoted != out[:head]:
            return "the output starts %r" % out[:head]
    m = re.search(r"last (\d+|%s)" % "|".join(WORDS), caption)
    if m:
        n = WORDS.get(m.group(1)) or int(m.group(1))
        if quoted[-n:] != out[-n:]:
            return "the last %d lines of the output are %r" % (n, out[-n:])
        if head and head + n != len(quoted):
            return "the caption names %d lines, the block quotes %d" % (
                head + n, len(quoted))
    return None


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
        readme = f.read()
    cmds = commands(readme)
    scratch = tempfile.mkdtemp(prefix="tpx-readme-")
    for name in os.listdir(SRC):
        if name != ".git" and not os.path.samefile(os.path.join(SRC, name), build) \
                and not name.startswith("build"):
            os.symlink(os.path.join(SRC, name), os.path.join(scratch, name))
    try:
        return run_all(cmds, build, scratch, readme)
    finally:
        shutil.rmtree(scratch)


def run_all(cmds, build, scratch, readme):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("TPX_PLUGIN_PATH", None)
    fails = ran = 0
    stdout = {}  # line number -> the command's stdout
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
                stdout[no] = stdout.get(no, "") + r.stdout.decode(
                    errors="replace").replace(build + "/", "build/")
            except (OSError, subprocess.TimeoutExpired) as e:
                rc, err = -1, str(e)
            ran += 1
            if rc != expect:
                print("FAIL README:%d %s: exit %d, want %d\n    %s"
                      % (no, part, rc, expect, err.strip()[-600:].replace("\n", "\n    ")))
                fails += 1
            else:
                print("PASS README:%d %s (exit %d)" % (no, part, rc))
    fails += check_outputs(readme, stdout)
    if ran < 10:
        print("FAIL only %d commands found in README.md: the extraction broke" % ran)
        fails += 1
    print("%d command(s) run, %d failure(s)" % (ran, fails))
    return 1 if fails else 0


def check_outputs(readme, stdout):
    """The quoted outputs against what their commands printed; failures."""
    block = sh_block_of(readme)
    fails = checked = 0
    for opening, caption, quoted, no in output_blocks(readme):
        cmd_lines = sorted(n for n, o in block.items() if o == opening)
        if not any(n in stdout for n in cmd_lines):
            print("FAIL README:%d quoted output of commands that did not run" % no)
            fails += 1
            continue
        why = check_output(caption, quoted,
                           "".join(stdout.get(n, "") for n in cmd_lines))
        checked += 1
        if why:
            print("FAIL README:%d quoted output %s: %s" % (no, caption, why))
            fails += 1
        else:
            print("PASS README:%d quoted output %s" % (no, caption))
    if checked < 3:
        print("FAIL only %d quoted outputs found in README.md" % checked)
        fails += 1
    return fails


SRC = "."
if __name__ == "__main__":
    sys.exit(main())
