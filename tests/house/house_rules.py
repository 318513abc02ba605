#!/usr/bin/env python3
"""house_rules.py - the structural house rules that a compiler cannot see,
checked on the source tree (python3 stdlib only; no build needed).

usage: house_rules.py SOURCE_ROOT CHECK
  names       "shard" names files in core/src/shard only (the checkpoint's
              rank-file code is rankfile_*), "memory" the training-memory
              estimate only (core/src/shard, and its report); `tpx plan`'s
              files are in tools/plan/
  class-names no model class name in core/src (code or comment): what is
              special about a family is a trait its plugin declares
  views       a folder of core/src includes of another folder only headers
              not named *_internal.h / *_impl.h (README "Layout")
  plugin-view plugin/plugin_view.h shows a loaded plugin through accessors
              only (its layout stays in plugin_internal.h), and the call's
              data helpers (string lists, result release, op symbol) live
              in plugin/call_result.c, beside the call (not in host.c)
  file-refs   comments (C, shell, Python, meson) that name a file of the
              project's kinds (.c .h .cu .md .sh .build) name one that
              exists: in the tree (a bare name anywhere, a path from the
              root, the file's folder, core/src/ or an include dir), or
              one the build generates (an output named in a meson.build)
  glue        tpx-train's glue (examples/train/glue_rt.c + glue_tp.c, the
              adapter between the model and the library) stays at most
              GLUE_MAX lines together (issue 30), keeps no unit bookkeeping
              (no unit-index runtime call: the runtime's module hooks do
              it) and no model knowledge (no module or parameter name)
Prints one line per violation and exits 1 when there is any.
"""
import os
import re
import subprocess
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
    for name in sorted(os.listdir(os.path.join(root, "tools"))):
        if re.match(r"(cmd_plan|plan_)\w*\.[ch]$", name):
            bad.append("tools/%s: a file of `tpx plan` outside tools/plan/" %
                       name)
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


# Files of other projects that comments cite by their own names.
OTHER_PROJECTS = {
    "llm.c",  # Karpathy's llm.c, the reference trainer's model
    "driver/others/dynamic.c",  # OpenBLAS's core table
    "transformer.h",  # a checkpoint's module prefix (exaone), not a file
}
FILE_REF = re.compile(
    r"(?<![\w./<-])((?:[\w.-]+/)*[\w-]+\.(?:c|h|cu|md|sh|build))(?![\w>])")
C_COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', re.S)


def tracked(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], check=True,
                         capture_output=True, text=True).stdout
    return [f for f in out.splitlines() if os.path.exists(
        os.path.join(root, f))]


def comment_spans(rel, text):
    """(line, comment text) of every comment of a tracked file."""
    if rel.endswith((".c", ".h", ".cu")):
        for m in C_COMMENT.finditer(text):
            if not m.group(0).startswith('"'):
                yield text.count("\n", 0, m.start()) + 1, m.group(0)
    elif rel.endswith((".sh", ".py")) or os.path.basename(rel) == \
            "meson.build":
        for n, line in enumerate(text.splitlines(), 1):
            for m in re.finditer(r"(^|\s)#", line):
                before = line[:m.start()]
                if before.count("'") % 2 == 0 and before.count('"') % 2 == 0:
                    yield n, line[m.end() - 1:]
                    break


def check_file_refs(root):
    files = tracked(root)
    fset = set(files)
    dirs = {os.path.dirname(f) for f in files}
    bases = {os.path.basename(f) for f in files}
    generated = set()
    for f in files:
        if os.path.basename(f) == "meson.build":
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                generated.update(re.findall(r"'([\w.-]+)'", fh.read()))

    def exists(ref, rel):
        if ref in OTHER_PROJECTS or ref in generated:
            return True
        if "/" not in ref:
            return ref in bases
        for c in (ref, os.path.join(os.path.dirname(rel), ref),
                  "core/src/" + ref, "core/include/" + ref,
                  "sdk/include/" + ref, "core/" + ref):
            c = os.path.normpath(c)
            if c in fset or c in dirs:
                return True
        return False

    bad = []
    for rel in files:
        if not rel.endswith((".c", ".h", ".cu", ".sh", ".py", "meson.build")):
            continue
        with open(os.path.join(root, rel), encoding="utf-8",
                  errors="replace") as fh:
            text = fh.read()
        for line, comment in comment_spans(rel, text):
            for m in FILE_REF.finditer(comment):
                if not exists(m.group(1), rel):
                    at = line + comment.count("\n", 0, m.start())
                    bad.append("%s:%d: names %s, which does not exist" %
                               (rel, at, m.group(1)))
    return bad


# A model class as transformers / NeMo Automodel / Diffusers name them:
# <Name>For<Task>, <Name>Model, <Name>LMHeadModel (a '*' before the suffix,
# as in "*ForCausalLM", is a pattern, not a name).
CLASS_NAME = re.compile(
    r"(?<![\w*])[A-Z][A-Za-z0-9_]*?(For(CausalLM|ConditionalGeneration|"
    r"SequenceClassification|TokenClassification|QuestionAnswering|"
    r"UnifiedMultimodal|MaskedLM)|[A-Za-z0-9]Model|LMHeadModel)\b")
# Data the core embeds from transformers, generated (not written by hand).
GENERATED = ("core/src/model/hf_conversion/", "core/src/select/hf_tp_plans/")


def check_class_names(root):
    bad = []
    for rel in core_files(root):
        if rel.startswith(GENERATED) or not rel.endswith((".c", ".h", ".cu")):
            continue
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in CLASS_NAME.finditer(line):
                    bad.append("%s:%d: names the model class %s" %
                               (rel, n, m.group(0)))
    return bad


def check_plugin_view(root):
    bad = []
    base = os.path.join(root, "core", "src", "plugin")
    with open(os.path.join(base, "plugin_view.h"), encoding="utf-8") as f:
        view = f.read()
    if re.search(r"struct\s+tpx__plugin\s*\{", view):
        bad.append("core/src/plugin/plugin_view.h: defines struct tpx__plugin "
                   "(its layout belongs in plugin_internal.h)")
    helpers = ("tpx__strvec_push", "tpx__strvec_free", "tpx__call_release",
               "tpx__plugin_op_symbol")
    for name in sorted(os.listdir(base)):
        if not name.endswith(".c") or name == "call_result.c":
            continue
        with open(os.path.join(base, name), encoding="utf-8") as f:
            text = f.read()
        for h in helpers:
            if re.search(r"^[a-z].*\b%s\(" % h, text, re.M):
                bad.append("core/src/plugin/%s: defines %s, a helper of the "
                           "call (call_result.c)" % (name, h))
    return bad


GLUE = ("examples/train/glue_rt.c", "examples/train/glue_tp.c")
GLUE_MAX = 250
UNIT_CALL = re.compile(r"\btpx_runtime_(unshard|reshard|reduce_grads|"
                       r"module_unit|unit_\w+|num_units|param_unit)\b")
MODEL_NAME = re.compile(r'"(model\.|lm_head)[^"]*"')


def check_glue(root):
    bad, total = [], 0
    for rel in GLUE:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            lines = f.read().split("\n")[:-1]
        total += len(lines)
        for n, line in enumerate(lines, 1):
            for rx, why in ((UNIT_CALL, "tracks units (%s): name the module "
                             "to the runtime's hooks instead"),
                            (MODEL_NAME, "names the model's %s: the model "
                             "code (params.c) knows its modules")):
                m = rx.search(line)
                if m:
                    bad.append("%s:%d: %s" % (rel, n, why % m.group(0)))
    if total > GLUE_MAX:
        bad.append("%s: %d lines together, over %d: move what is not glue "
                   "into the library or the model" %
                   (" + ".join(GLUE), total, GLUE_MAX))
    return bad


CHECKS = {"class-names": check_class_names, "plugin-view": check_plugin_view, "names": check_names, "views": check_views,
          "file-refs": check_file_refs, "glue": check_glue}


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
