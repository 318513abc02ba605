#!/usr/bin/env python3
"""run_matrix.py — robustness driver for `tpx plan`.

Runs the CLI over bundled configs x mesh shapes x sp x format and checks each
run: no crash and no sanitizer report, exit 0 iff the report has no error
diagnostic (1 otherwise), valid JSON that check_report.py accepts, and the
text form exiting like the JSON form. Then runs the bad-input cases
(bad_cli.json): each must exit with the given code and name the offending
argument / file on stderr, never crash. The mesh advisor (--gpus N) runs on
the bundled configs (every config with --full): its tpx-advice/1 is checked
(check_report.check_advice) and its first and last costed meshes against a
plain `tpx plan` of that mesh. --rank R on every rank of small odd meshes:
slices inside the tensor, summing to per_rank param_bytes, covering every
element.

usage: run_matrix.py TPX SOURCE_DIR [--full] [-j N] [--only SUBSTR]
  default: a representative subset (well under a minute in a normal build);
  --full: every config x tp {1,2,3,4,8,16} x dp_shard {1,2,3} x
          dp_replicate {1,2} x sp {off,on} x format {text,json}."""
import argparse
import concurrent.futures as cf
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_report  # noqa: E402

SAN_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
               "UndefinedBehaviorSanitizer", "Segmentation fault",
               "Assertion", "stack-overflow")


def find_configs(src):
    out = sorted(glob.glob(os.path.join(src, "tests/data/configs/*/config.json")))
    for p in sorted(glob.glob(os.path.join(src, "tests/data/families/*/*.json"))):
        if p.endswith(".index.json"):
            continue
        try:
            with open(p) as f:
                j = json.loads(f.read().replace("-Infinity", "null")
                               .replace("Infinity", "null").replace("NaN", "null"))
        except (ValueError, OSError):
            continue
        if isinstance(j, dict) and ("architectures" in j or "model_type" in j
                                    or "_class_name" in j) \
                and "entries" not in j:
            out.append(p)
    return out


def env():
    e = dict(os.environ)
    # a sanitizer finding must not look like exit status 1 ("has errors")
    e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "") + \
        ":exitcode=86:detect_leaks=1:abort_on_error=0"
    e["UBSAN_OPTIONS"] = e.get("UBSAN_OPTIONS", "") + \
        ":print_stacktrace=1:halt_on_error=1:exitcode=87"
    e["LSAN_OPTIONS"] = e.get("LSAN_OPTIONS", "") + ":exitcode=88"
    return e


ENV = env()


def run(tpx, args, timeout=120):
    p = subprocess.run([tpx, "plan"] + args, capture_output=True, env=ENV,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), \
        p.stderr.decode("utf-8", "replace")


def sanitizer_trouble(rc, err):
    if rc < 0 or rc >= 86:
        return "killed by signal %d" % -rc if rc < 0 else "sanitizer exit %d" % rc
    for m in SAN_MARKERS:
        if m in err:
            return "stderr mentions %r" % m
    return None


def tied_check(cfg, rep):
    """A config saying tie_word_embeddings: true must give a tied lm_head
    (counted once in total_params)."""
    try:
        with open(cfg) as f:
            c = json.loads(f.read().replace("-Infinity", "null")
                           .replace("Infinity", "null").replace("NaN", "null"))
    except (OSError, ValueError):
        return []
    tied = c.get("tie_word_embeddings")
    if tied is None and isinstance(c.get("text_config"), dict):
        tied = c["text_config"].get("tie_word_embeddings")
    if tied is not True:
        return []
    heads = [p for p in rep.get("parameters", [])
             if p.get("name", "").endswith("lm_head.weight")]
    return ["%s: tie_word_embeddings is true but it is not tied" % p["name"]
            for p in heads if p.get("tied_to") is None]


def one_case(tpx, src, cfg, tp, dps, dpr, sp, extra=(), json_extra=()):
    """Problems for one mesh shape: the JSON run and the text run
    (json_extra: arguments of the JSON run only, e.g. --rank R)."""
    rel = os.path.relpath(cfg, src)
    args = ["--config", cfg, "--tp", str(tp), "--dp-shard", str(dps),
            "--dp-replicate", str(dpr)] + (["--sp"] if sp else []) + list(extra)
    tag = "%s tp=%d dps=%d dpr=%d sp=%d %s" % (rel, tp, dps, dpr, sp,
                                               " ".join(os.path.basename(e) for e in extra))
    probs = []
    rc, out, err = run(tpx, args + list(json_extra) + ["--format", "json"])
    t = sanitizer_trouble(rc, err)
    if t:
        return ["%s json: %s\n%s" % (tag, t, err[-3000:])]
    if rc not in (0, 1, 2):
        return ["%s json: exit %d\n%s" % (tag, rc, err[-2000:])]
    if rc == 2 and out.strip():
        probs.append("%s json: exit 2 (unusable input) after a report" % tag)
    if not out.strip():
        # planning failed before a report: allowed only with a message;
        # 2 when an input cannot be used (docs/tpx.1 "EXIT STATUS")
        if rc not in (1, 2) or "tpx plan:" not in err:
            probs.append("%s json: no report, exit %d, stderr %r" % (tag, rc, err[-500:]))
        jrep = None
    else:
        try:
            jrep = json.loads(out)
        except ValueError as e:
            return ["%s json: invalid JSON: %s" % (tag, e)]
        ps = check_report.check(jrep, {"tp": tp, "dp_shard": dps,
                                       "dp_replicate": dpr, "sp": sp,
                                       "fsdp": "--no-fsdp" not in extra})
        probs += ["%s json: %s" % (tag, p) for p in ps]
        probs += ["%s json: %s" % (tag, p) for p in tied_check(cfg, jrep)
                  if "--weights" not in extra]
        if isinstance(jrep.get("ok"), bool) and (rc == 0) != jrep["ok"]:
            probs.append("%s json: exit %d but ok=%r" % (tag, rc, jrep["ok"]))
    rc2, out2, err2 = run(tpx, args + ["--format", "text"])
    t = sanitizer_trouble(rc2, err2)
    if t:
        return probs + ["%s text: %s\n%s" % (tag, t, err2[-3000:])]
    if rc2 != rc:
        probs.append("%s text: exit %d, json run exited %d" % (tag, rc2, rc))
    if jrep is not None and not out2.strip():
        probs.append("%s text: empty report" % tag)
    return probs


def matrix(full):
    if full:
        return [(tp, dps, dpr, sp) for tp in (1, 2, 3, 4, 8, 16)
                for dps in (1, 2, 3) for dpr in (1, 2) for sp in (0, 1)]
    # representative: tp=1, even, odd (uneven/head-indivisible), large;
    # FSDP, odd FSDP, HSDP; sp on and off.
    return [(1, 1, 1, 0), (2, 2, 1, 1), (3, 1, 2, 0), (4, 3, 2, 1),
            (8, 2, 2, 0), (16, 1, 1, 1)]


def safetensors(path, tensors):
    """A header-only safetensors file: {name: (DTYPE, shape, nbytes)}."""
    import struct
    off, h = 0, {}
    for n, (dt, shape, nbytes) in tensors.items():
        h[n] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    b = json.dumps(h).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(b)) + b + b"\0" * off)


def write_inputs(tmp):
    """Inputs shared by the bad-input and the custom cases."""
    os.mkdir(os.path.join(tmp, "adir"))
    safetensors(os.path.join(tmp, "overflow.safetensors"),
                {"model.embed_tokens.weight": ("BF16", [1 << 31, 1 << 31], 0)})
    # zero-size, 0-d and odd-sized tensors, a tied lm_head absent
    safetensors(os.path.join(tmp, "odd.safetensors"), {
        "model.embed_tokens.weight": ("BF16", [0, 64], 0),
        "model.norm.weight": ("BF16", [], 2),
        "model.layers.0.self_attn.q_proj.weight": ("F32", [5, 3], 60),
        "model.layers.0.self_attn.o_proj.weight": ("F32", [3, 5], 60),
        "model.layers.0.mlp.up_proj.weight": ("BF16", [7, 1, 2], 28),
        "model.layers.1.self_attn.q_proj.weight": ("I8", [1, 1], 1),
    })
    # a small Mixtral-shaped model (smaller than the Mixtral config, so the
    # moe plugin's skeleton disagrees and the tree comes from the headers):
    # 2 layers x 4 experts, odd sizes
    moe = {"model.embed_tokens.weight": ("BF16", [1001, 96], 1001 * 96 * 2),
           "model.norm.weight": ("BF16", [96], 192),
           "lm_head.weight": ("BF16", [1001, 96], 1001 * 96 * 2)}
    for l in range(2):
        pre = "model.layers.%d." % l
        for n, shp in (("self_attn.q_proj", [96, 96]), ("self_attn.k_proj", [24, 96]),
                       ("self_attn.v_proj", [24, 96]), ("self_attn.o_proj", [96, 96]),
                       ("block_sparse_moe.gate", [4, 96])):
            moe[pre + n + ".weight"] = ("BF16", shp, shp[0] * shp[1] * 2)
        for n in ("input_layernorm", "post_attention_layernorm"):
            moe[pre + n + ".weight"] = ("BF16", [96], 192)
        for e in range(4):
            for w, shp in (("w1", [200, 96]), ("w2", [96, 200]), ("w3", [200, 96])):
                moe[pre + "block_sparse_moe.experts.%d.%s.weight" % (e, w)] = \
                    ("BF16", shp, shp[0] * shp[1] * 2)
    safetensors(os.path.join(tmp, "moe.safetensors"), moe)
    plans = {
        # colwise embedding (Shard(1)), a container styled colwise (torch
        # raises: error), SP norms, nested styles, prepare_module_input
        "plan_colemb.json": [
            {"module": "model.embed_tokens", "style": "colwise"},
            {"module": "model.layers.*.self_attn.q_proj", "style": "colwise"},
            {"module": "model.layers.*.self_attn.o_proj", "style": "rowwise"},
            {"module": "model.layers.*.mlp", "style": "colwise"},
            {"module": "model.norm", "style": "sequence_parallel"},
            {"module": "lm_head", "style": "colwise"}],
        "plan_nested.json": [
            {"module": "model.layers.*", "style": "sequence_parallel"},
            {"module": "model.layers.*.self_attn.q_proj", "style": "colwise"},
            {"module": "model.layers.*.input_layernorm",
             "style": "prepare_module_input", "input_layouts": ["shard(1)"],
             "desired_input_layouts": ["replicate"]}],
        "plan_rowwise_all.json": [
            {"module": "model.embed_tokens", "style": "rowwise"},
            {"module": "model.layers.*.*.*", "style": "rowwise"},
            {"module": "lm_head", "style": "rowwise"}],
        "plan_empty.json": [],
    }
    for name, entries in plans.items():
        with open(os.path.join(tmp, name), "w") as f:
            json.dump({"format": "tpx-plan/1", "entries": entries}, f)


def custom_cases(tpx, src, full):
    """Custom plans and odd safetensors through the full check."""
    probs = []
    tmp = tempfile.mkdtemp(prefix="tpx-robust-")
    try:
        write_inputs(tmp)
        llama = os.path.join(src, "tests/data/configs/Llama-3.2-1B/config.json")
        qwen = os.path.join(src, "tests/data/configs/Qwen2.5-0.5B/config.json")
        runs = []
        meshes = matrix(full)
        for plan in ("plan_colemb.json", "plan_nested.json",
                     "plan_rowwise_all.json", "plan_empty.json"):
            for cfg in (llama, qwen):
                runs += [(cfg, ["--plan", os.path.join(tmp, plan)]) + m
                         for m in meshes]
        runs += [(llama, ["--weights", os.path.join(tmp, "odd.safetensors")]) + m
                 for m in meshes]
        runs += [(llama, ["--no-fsdp"]) + m for m in meshes]
        mixtral = os.path.join(src, "tests/data/configs/Mixtral-8x7B-v0.1/config.json")
        runs += [(mixtral, ["--weights", os.path.join(tmp, "moe.safetensors")]) + m
                 for m in meshes]
        # training memory options (per_rank memory is checked for every
        # run; these vary its inputs) and, JSON only, the last rank's slices
        mem = ["--seq", "64", "--batch", "2", "--optimizer", "sgd",
               "--activation-checkpointing"]
        nruns = len(runs)
        with cf.ThreadPoolExecutor(max_workers=2) as ex:
            futs = [ex.submit(one_case, tpx, src, cfg, *m, extra=extra)
                    for cfg, extra, *m in runs]
            futs += [ex.submit(one_case, tpx, src, cfg, *m, extra=mem,
                               json_extra=["--rank", str(m[0] * m[1] * m[2] - 1)])
                     for cfg in (llama, qwen) for m in meshes]
            for f in futs:
                probs += f.result()
        runs += [None] * (len(futs) - nruns)
    finally:
        shutil.rmtree(tmp)
    return probs, len(runs)


def gemma3_1b_headers(path, q_rows=1024, dtype="BF16"):
    """Safetensors headers laid out as the real gemma-3-1b-it checkpoint
    (Gemma3ForCausalLM, bf16, tied lm_head absent), written from the
    config's sizes, not from tpx. q_rows != 1024 makes it disagree with
    any correct skeleton (a checkpoint of another model); dtype="F32" makes
    only the dtypes disagree (an f32 export of the same model)."""
    H, I, V, L, D, NH, NKV = 1152, 6912, 262144, 26, 256, 4, 1
    t = {"model.embed_tokens.weight": (dtype, [V, H], 0),
         "model.norm.weight": (dtype, [H], 0)}
    for l in range(L):
        pre = "model.layers.%d." % l
        for n, shp in (("self_attn.q_proj", [q_rows, H]),
                       ("self_attn.k_proj", [NKV * D, H]),
                       ("self_attn.v_proj", [NKV * D, H]),
                       ("self_attn.o_proj", [H, NH * D]),
                       ("self_attn.q_norm", [D]), ("self_attn.k_norm", [D]),
                       ("mlp.gate_proj", [I, H]), ("mlp.up_proj", [I, H]),
                       ("mlp.down_proj", [H, I]),
                       ("input_layernorm", [H]),
                       ("post_attention_layernorm", [H]),
                       ("pre_feedforward_layernorm", [H]),
                       ("post_feedforward_layernorm", [H])):
            t[pre + n + ".weight"] = (dtype, shp, 0)
    # real data offsets (2 bytes per element); the data region is a hole
    # (truncate), so the ~2 GB file costs no disk
    import struct
    off, h = 0, {}
    for n, (dt, shp, _) in t.items():
        nbytes = 4 if dt == "F32" else 2
        for d in shp:
            nbytes *= d
        h[n] = {"dtype": dt, "shape": shp, "data_offsets": [off, off + nbytes]}
        off += nbytes
    b = json.dumps(h).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(b)) + b)
        f.truncate(8 + len(b) + off)


def weights_with_skeleton(tpx, src):
    """--weights with a plugin skeleton: the skeleton gives the modules
    without parameters (gemma3's model.rotary_emb, planned under sp) and the
    headers are checked against it; a header whose dtype disagrees drops
    the skeleton with a skeleton-fallback warning; a header whose shape
    disagrees means the config and the weights are different models: an
    error (exit 1) naming the tensor."""
    probs = []
    tmp = tempfile.mkdtemp(prefix="tpx-robust-")
    cfg = os.path.join(src, "tests/data/configs/gemma-3-1b-it/config.json")
    try:
        good = os.path.join(tmp, "gemma.safetensors")
        bad = os.path.join(tmp, "gemma_bad.safetensors")
        other = os.path.join(tmp, "gemma_other_model.safetensors")
        gemma3_1b_headers(good)
        gemma3_1b_headers(bad, dtype="F32")
        gemma3_1b_headers(other, q_rows=1000)
        for path, want_fallback in ((good, False), (bad, True), (other, None)):
            tag = "weights+skeleton %s" % os.path.basename(path)
            rc, out, err = run(tpx, ["--config", cfg, "--weights", path,
                                     "--sp", "--dp-shard", "2",
                                     "--format", "json"])
            t = sanitizer_trouble(rc, err)
            if t:
                probs.append("%s: %s\n%s" % (tag, t, err[-3000:]))
                continue
            if want_fallback is None:
                # config and weights of different models: unusable input
                if rc != 2 or out.strip() or "different models" not in err \
                        or "model.layers.0.self_attn.q_proj.weight" not in err \
                        or "[1000, 1152]" not in err:
                    probs.append("%s: want exit 2 naming the tensor whose "
                                 "shape disagrees, got exit %d: %r"
                                 % (tag, rc, err[-500:]))
                continue
            try:
                rep = json.loads(out)
            except ValueError as e:
                probs.append("%s: exit %d, no JSON report (%s): %r"
                             % (tag, rc, e, err[-500:]))
                continue
            probs += ["%s: %s" % (tag, p) for p in check_report.check(
                rep, {"tp": 1, "dp_shard": 2, "dp_replicate": 1, "sp": 1,
                      "fsdp": True})]
            diags = rep.get("diagnostics", [])
            codes = [(d.get("level"), d.get("code")) for d in diags]
            trace = " | ".join(rep.get("selection", {}).get("trace", []))
            rotary = [d for d in diags if d.get("code") == "unmatched-key"
                      and "'model.rotary_emb'" in d.get("message", "")]
            if want_fallback:
                if ("warning", "skeleton-fallback") not in codes:
                    probs.append("%s: no skeleton-fallback warning: %r"
                                 % (tag, codes))
                if "headers only" not in trace:
                    probs.append("%s: trace lacks the fallback: %r"
                                 % (tag, trace))
                if not any("F32" in d.get("message", "") for d in diags
                           if d.get("code") == "skeleton-fallback"):
                    probs.append("%s: fallback does not name the mismatch"
                                 % tag)
                continue
            if rc != 0 or rep.get("ok") is not True:
                probs.append("%s: exit %d ok=%r diagnostics %r"
                             % (tag, rc, rep.get("ok"), codes))
            if rotary:
                probs.append("%s: rotary_emb unmatched: %s"
                             % (tag, rotary[0].get("message")))
            if ("warning", "skeleton-fallback") in codes:
                probs.append("%s: unexpected skeleton fallback" % tag)
            if "skeleton, checked against the safetensors headers" not in trace:
                probs.append("%s: trace does not say the skeleton was used: %r"
                             % (tag, trace))
            names = {p["name"] for p in rep.get("parameters", [])}
            if len(names) != 26 * 13 + 3 or "lm_head.weight" not in names:
                probs.append("%s: %d parameters, want %d with a tied lm_head"
                             % (tag, len(names), 26 * 13 + 3))
    finally:
        shutil.rmtree(tmp)
    return probs, 3


def slices_cover(tpx, src):
    """--rank R for every rank of small odd meshes: each rank's slices lie
    inside the tensor, sum (tied aliases once) to its per_rank param_bytes,
    and all ranks together cover every element of every parameter (their
    local_bytes sum to at least the parameter's bytes)."""
    probs, runs = [], 0
    for rel, mesh in (("tests/data/configs/Llama-3.2-1B/config.json", (1, 2, 3)),
                      ("tests/data/configs/Qwen3-30B-A3B/config.json", (2, 3, 2)),
                      ("tests/data/families/moe/mixtral-tiny.config.json", (1, 3, 2))):
        cfg = os.path.join(src, rel)
        dpr, dps, tp = mesh
        world = dpr * dps * tp
        cover, held = {}, {}
        for r in range(world):
            runs += 1
            tag = "%s --rank %d (%d x %d x %d)" % (rel, r, dpr, dps, tp)
            rc, out, err = run(tpx, ["--config", cfg, "--dp-replicate", str(dpr),
                                     "--dp-shard", str(dps), "--tp", str(tp),
                                     "--rank", str(r), "--format", "json"])
            t = sanitizer_trouble(rc, err)
            if t:
                probs.append("%s: %s\n%s" % (tag, t, err[-3000:]))
                break
            try:
                rep = json.loads(out)
            except ValueError:
                probs.append("%s: exit %d, no JSON: %r" % (tag, rc, err[-300:]))
                break
            mine = 0
            for p in rep["parameters"]:
                ls, go = p.get("local_shape"), p.get("global_offset")
                if not isinstance(ls, list) or len(ls) != len(p["shape"]) or \
                        any(o < 0 or o + l > d and l > 0
                            for o, l, d in zip(go, ls, p["shape"])):
                    probs.append("%s: %s slice %r @ %r outside %r"
                                 % (tag, p["name"], ls, go, p["shape"]))
                    continue
                if p.get("tied_to") is None:
                    mine += p["local_bytes"]
                    n = check_report.numel(ls)
                    cover[p["name"]] = cover.get(p["name"], 0) + n
                    held[p["name"]] = check_report.numel(p["shape"])
            if mine != rep["per_rank"][r]["param_bytes"]:
                probs.append("%s: local_bytes sum to %d, per_rank param_bytes "
                             "%d" % (tag, mine, rep["per_rank"][r]["param_bytes"]))
        for name, n in cover.items():
            if n < held[name]:
                probs.append("%s %r: %s: the ranks' slices hold %d of its %d "
                             "elements" % (rel, mesh, name, n, held[name]))
    return probs, runs


def advisor_case(tpx, src, cfg, n):
    """`--gpus N` (JSON and text): no crash, a consistent tpx-advice/1
    (check_report.check_advice), exit 0 iff the first mesh fits, and the
    worst rank's memory of the first and last costed meshes equal to what a
    plain `tpx plan` on that mesh reports for its largest-peak rank."""
    tag = "%s --gpus %d" % (os.path.relpath(cfg, src), n)
    rc, out, err = run(tpx, ["--config", cfg, "--gpus", str(n), "--format",
                             "json"])
    t = sanitizer_trouble(rc, err)
    if t:
        return ["%s json: %s\n%s" % (tag, t, err[-3000:])]
    if rc not in (0, 1):
        return ["%s json: exit %d\n%s" % (tag, rc, err[-2000:])]
    if not out.strip():
        if rc != 1 or "tpx plan:" not in err:
            return ["%s: no advice, exit %d, stderr %r" % (tag, rc, err[-500:])]
        return []
    try:
        adv = json.loads(out)
    except ValueError as e:
        return ["%s: invalid JSON: %s" % (tag, e)]
    probs = ["%s: %s" % (tag, p) for p in check_report.check_advice(adv, n)]
    a = adv.get("advice") or []
    want_rc = 0 if a and a[0].get("fits") else 1
    if rc != want_rc:
        probs.append("%s: exit %d, first mesh fits=%r" % (tag, rc,
                                                         a and a[0].get("fits")))
    costed = [x for x in a if x.get("rejected_because") is None]
    for x in {id(c): c for c in costed[:1] + costed[-1:]}.values():
        mesh = ["--dp-replicate", str(x["dp_replicate"]), "--dp-shard",
                str(x["dp_shard"]), "--tp", str(x["tp"])]
        prc, pout, perr = run(tpx, ["--config", cfg, "--seq", str(adv["seq"]),
                                    "--batch", str(adv["batch"]), "--format",
                                    "json"] + mesh)
        try:
            pr = json.loads(pout)["per_rank"]
            worst = max((e["memory"] for e in pr), key=lambda m: m["peak"])
        except (ValueError, KeyError, TypeError):
            probs.append("%s: plain plan on %s gave no per_rank memory (exit "
                         "%d)" % (tag, " ".join(mesh), prc))
            continue
        if worst != x.get("memory"):
            probs.append("%s: advice memory %r, plain plan's worst rank %r"
                         % (tag, x.get("memory"), worst))
    # "best" is a runnable command that plans the first mesh as costed
    best = adv.get("best")
    if best is not None:
        words = shlex.split(best)
        # the program as run (argv[0]), then "plan"
        if words[:2] != [tpx, "plan"]:
            probs.append("%s: best %r is not a %s plan command"
                         % (tag, best, tpx))
        else:
            prc, pout, perr = run(tpx, words[2:] + ["--format", "json"])
            try:
                pr = json.loads(pout)["per_rank"]
                worst = max((e["memory"] for e in pr), key=lambda m: m["peak"])
                if worst != a[0].get("memory"):
                    probs.append("%s: best command's worst rank %r, advice %r"
                                 % (tag, worst, a[0].get("memory")))
            except (ValueError, KeyError, TypeError):
                probs.append("%s: best command %r gave no report (exit %d) %s"
                             % (tag, best, prc, perr[-300:]))
    elif a and a[0].get("fits"):
        probs.append("%s: the first mesh fits but best is null" % tag)
    rc2, _, err2 = run(tpx, ["--config", cfg, "--gpus", str(n)])
    t = sanitizer_trouble(rc2, err2)
    if t:
        probs.append("%s text: %s\n%s" % (tag, t, err2[-3000:]))
    elif rc2 != rc:
        probs.append("%s text: exit %d, json exited %d" % (tag, rc2, rc))
    return probs


def advisor_cases(tpx, src, cfgs, full, jobs):
    ns = (1, 4, 6, 8, 12) if full else (1, 6)
    probs = []
    with cf.ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = [ex.submit(advisor_case, tpx, src, c, n) for c in cfgs
                for n in ns]
        for f in futs:
            probs += f.result()
    return probs, len(cfgs) * len(ns)


def bad_cli(tpx, src):
    with open(os.path.join(HERE, "bad_cli.json")) as f:
        cases = json.load(f)
    probs = []
    tmp = tempfile.mkdtemp(prefix="tpx-robust-")
    subst = {"@SRC@": src, "@TMP@": tmp, "@CFG@": os.path.join(
        src, "tests/data/configs/Llama-3.2-1B/config.json")}
    write_inputs(tmp)
    for name, body in (("garbage.safetensors", b"\xff" * 64),
                       ("short.safetensors", b"\x10\x00"),
                       ("huge_len.safetensors",
                        (10 ** 12).to_bytes(8, "little") + b"{}"),
                       ("bad_plan.json", b'{"format": "tpx-plan/1", "entries": [{'),
                       ("plan_not_obj.json", b"[1,2,3]"),
                       ("plan_bad_style.json",
                        b'{"format":"tpx-plan/1","entries":[{"module":"a..b",'
                        b'"style":"colwise"}]}'),
                       ("config_trunc.json", b'{"architectures": ["Llama'),
                       ("config_array.json", b"[]"),
                       ("empty.json", b"")):
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(body)
    try:
        for c in cases:
            args = []
            for a in c["args"]:
                for k, v in subst.items():
                    a = a.replace(k, v)
                args.append(a)
            rc, out, err = run(tpx, args)
            t = sanitizer_trouble(rc, err)
            if t:
                probs.append("bad-cli %s: %s\n%s" % (c["name"], t, err[-3000:]))
                continue
            if rc != c["exit"]:
                probs.append("bad-cli %s: exit %d, want %d; stderr %r"
                             % (c["name"], rc, c["exit"], err[-400:]))
            for s in c.get("stderr", []):
                for k, v in subst.items():
                    s = s.replace(k, v)
                if s not in err:
                    probs.append("bad-cli %s: stderr lacks %r; got %r"
                                 % (c["name"], s, err[-400:]))
            if c["exit"] != 0 and out.strip() and not c.get("report"):
                probs.append("bad-cli %s: printed a report on stdout" % c["name"])
        # a report that cannot be written (disk full) is not a success
        if os.path.exists("/dev/full"):
            with open("/dev/full", "w") as full:
                for fmt in ("text", "json"):
                    p = subprocess.run([tpx, "plan", "--config", subst["@CFG@"],
                                        "--format", fmt], stdout=full,
                                       stderr=subprocess.PIPE, env=ENV,
                                       timeout=120)
                    err = p.stderr.decode("utf-8", "replace")
                    if p.returncode != 1 or "standard output" not in err:
                        probs.append("bad-cli stdout on /dev/full (%s): exit %d, "
                                     "stderr %r" % (fmt, p.returncode, err[-300:]))
    finally:
        shutil.rmtree(tmp)
    return probs, len(cases) + 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tpx")
    ap.add_argument("src")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-bad-cli", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    cfgs = [c for c in find_configs(a.src) if a.only in c]
    if not a.full:
        # a representative subset of configs: one per family plus the
        # bundled real configs
        seen, sub = set(), []
        for c in cfgs:
            fam = os.path.basename(os.path.dirname(c))
            if "/configs/" in c or fam not in seen:
                sub.append(c)
                seen.add(fam)
        cfgs = sub
    jobs = [(c,) + m for c in cfgs for m in matrix(a.full)]
    probs = []
    with cf.ThreadPoolExecutor(max_workers=a.j) as ex:
        futs = [ex.submit(one_case, a.tpx, a.src, *j) for j in jobs]
        for f in futs:
            probs += f.result()
    ncustom = 0
    if not a.only:
        cp, ncustom = custom_cases(a.tpx, a.src, a.full)
        probs += cp
    nweights = 0
    if not a.only:
        wp, nweights = weights_with_skeleton(a.tpx, a.src)
        probs += wp
    nslices = 0
    if not a.only:
        sp_, nslices = slices_cover(a.tpx, a.src)
        probs += sp_
    nadv = 0
    if not a.only or a.full:
        # the advisor on the real configs (one per family in the default run)
        acfgs = [c for c in cfgs if "/configs/" in c or a.full]
        ap_, nadv = advisor_cases(a.tpx, a.src, acfgs, a.full, a.j)
        probs += ap_
    nbad = 0
    if not a.no_bad_cli:
        bp, nbad = bad_cli(a.tpx, a.src)
        probs += bp
    for p in probs:
        print("FAIL:", p)
    print("%d configs x %d meshes (json+text) = %d runs, %d custom-plan/"
          "weights runs, %d skeleton+weights runs, %d --rank runs, "
          "%d advisor runs, %d bad-input cases, %d problems, %.1f s"
          % (len(cfgs), len(matrix(a.full)), 2 * len(jobs), 2 * ncustom,
             nweights, nslices, nadv, nbad, len(probs), time.time() - t0))
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main())
