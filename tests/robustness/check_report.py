#!/usr/bin/env python3
"""check_report.py — an independent checker of `tpx plan --format json`
(tpx-report/1, docs/REPORT_FORMAT.md).

It re-derives from the JSON alone, without tpx's code:
  * every field the format names, with the right types;
  * placements: one entry per mesh dim name; the TP placement each style gives
    a parameter (docs/SEMANTICS.md "Parallel styles"), Replicate for
    uncovered parameters and for everything at tp == 1; the FSDP2 dp
    placements (docs/SEMANTICS.md "FSDP2"): Replicate on
    dp_replicate, Shard(0) on dp_shard, or strided_shard(0, tp) when TP
    already shards dim 0;
  * per_rank: one entry per rank (above 4096 ranks one per group of
    ranks with equal figures), row-major coords per dim name;
  * param_bytes of every rank, recomputed with torch.chunk semantics from the
    shapes and placements (strided_shard: TP splits first, then dp splits the
    TP-local piece), tied aliases once, no padding;
  * per_rank memory (docs/MEMORY.md): the five terms and their sum as peak;
    params, grads and optimizer recomputed in FSDP2's padded layout (the
    TP-local piece, ceil(dim0 / dp_shard) rows) for the report's
    memory_options.optimizer;
  * with slices_rank R (--rank R): every parameter's local_shape,
    global_offset and local_bytes for rank R, recomputed;
  * per_rank param_bytes summed over every rank: at least the model's held
    bytes, at most that once per rank; grouped per_rank (above 4096 ranks):
    each group's last member recomputed too;
  * model.fused_experts present iff a fused 3-D expert parameter is;
  * peak == the sum of the five terms, saturating at INT64_MAX;
  * check_advice: `--gpus N --format json` (tpx-advice/1) consistent and
    sorted as docs/MEMORY.md says;
  * total_params / total_bytes with a tied weight once;
  * ok == (no error diagnostic).

Usable as a module (check(report, expect) -> list of problems) or from the
command line: check_report.py REPORT.json [--tp N --dp-shard N
--dp-replicate N --sp] (exit 1 with the problems listed)."""
import json
import re
import sys

DTYPE_SIZE = {
    "f64": 8, "f32": 4, "f16": 2, "bf16": 2, "f8_e4m3": 1, "f8_e5m2": 1,
    "f8_e8m0": 1, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u64": 8, "u32": 4,
    "u16": 2, "u8": 1, "bool": 1,
}
FLOAT_DTYPES = {"f64", "f32", "f16", "bf16", "f8_e4m3", "f8_e5m2", "f8_e8m0"}
ROWWISE = {"rowwise", "vocab_parallel_embedding",
           "gemma4_vocab_parallel_embedding", "gemma4_rowwise_parallel"}
SEQUENCE = {"sequence_parallel", "rotary_embed_parallel",
            "qk_norm_sequence_parallel",
            "sequence_parallel_allgather_activation"}
PREPARE = {"prepare_module_input", "prepare_module_output"}
DISTRIBUTE = {"colwise"} | ROWWISE | SEQUENCE
SOURCES = {"custom", "plugin", "hf", "default"}
LEVELS = {"error", "warning", "info"}
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
PL_RE = re.compile(r"^(replicate|shard\((-?\d+)\)|strided_shard\((-?\d+),(\d+)\)"
                   r"|partial(\(\w+\))?)$")


def parse_pl(s):
    """('R',) | ('S', dim) | ('SS', dim, k) | ('P',); None if unknown."""
    m = PL_RE.match(s) if isinstance(s, str) else None
    if not m:
        return None
    if s == "replicate":
        return ("R",)
    if s.startswith("shard("):
        return ("S", int(m.group(2)))
    if s.startswith("strided_shard("):
        return ("SS", int(m.group(3)), int(m.group(4)))
    return ("P",)


def chunk(n, w, i):
    """torch.chunk: (offset, length) of piece i of n over w."""
    c = -(-n // w) if n else 0
    off = min(n, i * c)
    return off, max(0, min(n, off + c) - off)


def local_lengths(shape, dims, sizes, pls, coords):
    """Lengths of the slice a rank holds (see local_box)."""
    return local_box(shape, dims, sizes, pls, coords)[1]


def local_box(shape, dims, sizes, pls, coords):
    """(offsets, lengths) of the slice a rank holds: plain shards in mesh
    order, then strided shards (they split the piece left by the later mesh
    dims)."""
    off = [0] * len(shape)
    ln = list(shape)
    order = [i for i, p in enumerate(pls) if p[0] == "S"] + \
            [i for i, p in enumerate(pls) if p[0] == "SS"]
    for i in order:
        d = pls[i][1]
        if d < 0:
            d += len(shape)
        if not 0 <= d < len(shape):
            raise ValueError("shard dim out of range")
        o, l = chunk(ln[d], sizes[i], coords[i])
        off[d] += o
        ln[d] = l
    return off, ln


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def expected_tp(style, kind, pname, own, ndim):
    """TP placement (text) torch gives a parameter; None = unsupported."""
    if style == "colwise":
        return "shard(1)" if kind == "embedding" else "shard(0)"
    if style in ROWWISE:
        if kind == "embedding":
            return "shard(0)"
        return "shard(1)" if pname == "weight" else "replicate"
    return "replicate"


class Problems(list):
    def add(self, msg):
        if len(self) < 50:
            self.append(msg)


def check(rep, expect=None):
    """Problems (strings) found in report `rep`. `expect`: dict with tp,
    dp_shard, dp_replicate, sp, fsdp (all optional) from the command line."""
    expect = expect or {}
    P = Problems()
    if not isinstance(rep, dict):
        return ["report is not an object"]
    for k in ("format", "model", "mesh", "selection", "plan", "parameters",
              "per_rank", "diagnostics", "ok"):
        if k not in rep:
            P.add("missing top-level field '%s'" % k)
    if P:
        return P
    if rep["format"] != "tpx-report/1":
        P.add("format is %r" % rep["format"])
    model = rep["model"]
    for k, t in (("architecture", (str, type(None))), ("source", (str, type(None))),
                 ("dtype", (str, type(None))), ("total_params", int),
                 ("total_bytes", int)):
        if k not in model or not isinstance(model[k], t) or isinstance(model[k], bool) and t is int:
            P.add("model.%s missing or of the wrong type: %r" % (k, model.get(k)))
    mesh = rep["mesh"]
    dims, sizes = mesh.get("dims"), mesh.get("sizes")
    if not (isinstance(dims, list) and isinstance(sizes, list) and
            len(dims) == len(sizes) and all(isinstance(d, str) for d in dims)
            and all(isinstance(s, int) and s >= 1 for s in sizes)):
        P.add("mesh dims/sizes malformed: %r" % mesh)
        return P
    if len(set(dims)) != len(dims):
        P.add("mesh dim names repeat: %r" % dims)
    size_of = dict(zip(dims, sizes))
    for k, dim in (("tp", "tp"), ("dp_shard", "dp_shard"),
                   ("dp_replicate", "dp_replicate")):
        if k in expect and size_of.get(dim) != expect[k]:
            P.add("mesh %s is %r, asked for %r" % (dim, size_of.get(dim), expect[k]))
    tp = size_of.get("tp", 1)
    world = numel(sizes)

    sel = rep["selection"]
    if not isinstance(sel, dict):
        P.add("selection is not an object")
        sel = {}
    if sel.get("source") not in SOURCES:
        P.add("selection.source %r not one of %s" % (sel.get("source"), sorted(SOURCES)))
    if sel.get("source") == "plugin" and not isinstance(sel.get("plugin"), str):
        P.add("selection.plugin missing while source is plugin")
    if not isinstance(sel.get("sequence_parallel"), bool):
        P.add("selection.sequence_parallel not a bool")
    elif "sp" in expect and sel["sequence_parallel"] != bool(expect["sp"]):
        P.add("selection.sequence_parallel %r, asked %r" % (sel["sequence_parallel"], expect["sp"]))
    if not isinstance(sel.get("trace"), list) or not all(isinstance(t, str) for t in sel.get("trace", [])):
        P.add("selection.trace not a list of strings")

    plan = rep["plan"]
    if not isinstance(plan, dict) or plan.get("format") != "tpx-plan/1" or \
            not isinstance(plan.get("entries"), list):
        P.add("plan is not a tpx-plan/1 object with entries")
        return P

    # diagnostics and ok
    diags = rep["diagnostics"]
    if not isinstance(diags, list):
        P.add("diagnostics not a list")
        diags = []
    has_error = False
    for i, d in enumerate(diags):
        if not isinstance(d, dict) or d.get("level") not in LEVELS or \
                not isinstance(d.get("code"), str) or not KEBAB.match(d["code"]) \
                or not isinstance(d.get("message"), str) or not d["message"]:
            P.add("diagnostic %d malformed: %r" % (i, d))
            continue
        has_error |= d["level"] == "error"
    if not isinstance(rep["ok"], bool):
        P.add("ok is not a bool")
    elif rep["ok"] == has_error:
        P.add("ok=%r but %s error diagnostic" % (rep["ok"], "an" if has_error else "no"))

    # modules: key -> style and kind of each styled module
    mods = {}
    for m in rep.get("modules", []) or []:
        if isinstance(m, dict) and isinstance(m.get("module"), str):
            mods[m["module"]] = m

    params = rep["parameters"]
    if not isinstance(params, list):
        P.add("parameters not a list")
        return P
    by_name = {}
    for i, p in enumerate(params):
        if not isinstance(p, dict):
            P.add("parameter %d not an object" % i)
            continue
        for k in ("name", "shape", "dtype", "module", "plan_key", "placements",
                  "fsdp_unit"):
            if k not in p:
                P.add("parameter %r lacks '%s'" % (p.get("name", i), k))
        if not isinstance(p.get("name"), str):
            continue
        if p["name"] in by_name:
            P.add("parameter %r listed twice" % p["name"])
        by_name[p["name"]] = p
    if P:
        return P

    fsdp_on = expect.get("fsdp", True)
    total_params = total_bytes = 0
    sig = {}  # (shape, dtype, placements) -> count
    msig = {}  # (shape, held dtype, reduce dtype, placements) -> count
    mp = (rep.get("fsdp") or {}).get("mixed_precision") or {}
    fsdp_enabled = bool((rep.get("fsdp") or {}).get("enabled"))
    for p in params:
        name = p["name"]
        shape = p["shape"]
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            P.add("%s: bad shape %r" % (name, shape))
            continue
        if p["dtype"] not in DTYPE_SIZE:
            P.add("%s: unknown dtype %r" % (name, p["dtype"]))
            continue
        pl = p["placements"]
        if not isinstance(pl, dict) or sorted(pl) != sorted(dims):
            P.add("%s: placements %r do not name exactly the mesh dims %r" % (name, pl, dims))
            continue
        parsed = [parse_pl(pl[d]) for d in dims]
        if None in parsed:
            P.add("%s: unparsable placement in %r" % (name, pl))
            continue
        tied = p.get("tied_to")
        if tied is not None and tied not in by_name:
            P.add("%s: tied_to %r is not a parameter" % (name, tied))
            tied = None
        # TP placement by style (docs/SEMANTICS.md "Parallel styles")
        key = p["plan_key"]
        if key is not None and not isinstance(key, str):
            P.add("%s: plan_key %r" % (name, key))
        if tied is not None:
            tgt = by_name[tied]["placements"]
            if "tp" in pl and pl["tp"] != tgt.get("tp"):
                P.add("%s: tied alias tp placement %s != its target's %s"
                      % (name, pl["tp"], tgt.get("tp")))
        elif "tp" in pl:
            want = "replicate"
            if tp > 1 and key is not None:
                # the styled module: nearest ancestor-or-self with a
                # distribute_module style (reported in "modules")
                mod = p["module"]
                styled = None
                while True:
                    m = mods.get(mod)
                    if m and m.get("style") in DISTRIBUTE:
                        styled = m
                        break
                    if not mod:
                        break
                    mod = mod.rsplit(".", 1)[0] if "." in mod else ""
                if styled is None:
                    P.add("%s: plan_key %r but no styled module above it" % (name, key))
                else:
                    if styled.get("plan_key") != key:
                        P.add("%s: plan_key %r but styled module %r has key %r"
                              % (name, key, styled["module"], styled.get("plan_key")))
                    kind = styled.get("kind")
                    own = styled["module"] == p["module"]
                    pname = name.rsplit(".", 1)[-1]
                    if styled["style"] in SEQUENCE:
                        want = "replicate"
                    elif kind in ("linear", "embedding"):
                        want = expected_tp(styled["style"], kind, pname, own,
                                           len(shape))
                    elif kind is None:
                        P.add("modules entry %r lacks 'kind'" % styled["module"])
                        want = None
                    else:
                        want = "replicate"  # torch raises: nothing applied
            elif tp > 1 and key is None:
                want = "replicate"
            if tp == 1:
                want = "replicate"
            if want is not None and pl["tp"] != want:
                P.add("%s: tp placement %s, torch gives %s (key %r)" % (name, pl["tp"], want, key))
        # dp placements (FSDP2)
        tpp = parse_pl(pl["tp"]) if "tp" in pl else ("R",)
        if tpp[0] == "S" and tpp[1] < 0:
            tpp = ("S", tpp[1] + len(shape))
        if "dp_replicate" in pl and pl["dp_replicate"] != "replicate":
            P.add("%s: dp_replicate placement %s, HSDP gives replicate" % (name, pl["dp_replicate"]))
        if "dp_shard" in pl:
            if not fsdp_on or len(shape) == 0:
                want = "replicate"
            elif tp > 1 and tpp == ("S", 0):
                want = "strided_shard(0,%d)" % tp
            else:
                want = "shard(0)"
            if pl["dp_shard"] != want:
                P.add("%s: dp_shard placement %s, FSDP2 gives %s" % (name, pl["dp_shard"], want))
        if tied is None:
            total_params += numel(shape)
            total_bytes += numel(shape) * DTYPE_SIZE[p["dtype"]]
            # a parameter kept in fp32 (keep_fp32) is held in f32 whatever
            # its checkpoint dtype, if it is a floating-point one
            held = p["dtype"]
            if p.get("keep_fp32") is True and held in FLOAT_DTYPES:
                held = "f32"
            k = (tuple(shape), held, tuple(parsed))
            sig[k] = sig.get(k, 0) + 1
            # gradient dtype: the FSDP reduce dtype (the compute dtype when
            # unset), f32 without FSDP
            red = "f32"
            if fsdp_enabled:
                red = mp.get("reduce_dtype") or p.get("fsdp_param_dtype") or held
            mk = (tuple(shape), held, red, tuple(parsed))
            msig[mk] = msig.get(mk, 0) + 1
    # FSDP units: a parameter belongs to its nearest enclosing unit, else the
    # root (""); each unit's "params" counts them (tied aliases excluded).
    fsdp = rep.get("fsdp")
    if fsdp_on and isinstance(fsdp, dict) and fsdp.get("enabled"):
        units = [u.get("module") for u in fsdp.get("units", [])]
        if not units or units[-1] != "" or units.count("") != 1:
            P.add("fsdp units %r: the root must be last, once" % units[-3:])
        else:
            uset = set(units)
            counts = dict.fromkeys(units, 0)
            for p in params:
                if p.get("tied_to") is not None:
                    continue
                mod = p["module"]
                while mod and mod not in uset:
                    mod = mod.rsplit(".", 1)[0] if "." in mod else ""
                if p["fsdp_unit"] != mod:
                    P.add("%s: fsdp_unit %r, nearest unit is %r"
                          % (p["name"], p["fsdp_unit"], mod))
                counts[mod] = counts.get(mod, 0) + 1
            for u in fsdp.get("units", []):
                if u.get("params") != counts.get(u.get("module")):
                    P.add("fsdp unit %r: params %r, counted %r"
                          % (u.get("module"), u.get("params"),
                             counts.get(u.get("module"))))
    elif fsdp_on is False:
        for p in params:
            if p["fsdp_unit"] is not None:
                P.add("%s: fsdp_unit %r with FSDP off" % (p["name"], p["fsdp_unit"]))
                break
    fused = [p["name"] for p in params if len(p["shape"]) == 3 and
             (p["name"].endswith(".experts.gate_up_proj") or
              p["name"].endswith(".experts.down_proj"))]
    note = model.get("fused_experts")
    if fused and not isinstance(note, str):
        P.add("model.fused_experts missing with fused expert parameters "
              "(%s)" % fused[0])
    elif not fused and note is not None:
        P.add("model.fused_experts %r without a fused expert parameter"
              % (note[:60] if isinstance(note, str) else note))
    if model["total_params"] != total_params:
        P.add("model.total_params %d != %d (sum over parameters, tied once)"
              % (model["total_params"], total_params))
    if model["total_bytes"] != total_bytes:
        P.add("model.total_bytes %d != %d" % (model["total_bytes"], total_bytes))

    # per_rank
    pr = rep["per_rank"]
    if world > 4096 and isinstance(pr, list):
        # grouped form (docs/REPORT_FORMAT.md): one entry per group of ranks
        # with equal figures; check the partition, then each group's first
        # rank like any other entry.
        seen, firsts = set(), []
        for e in pr:
            members = [r for lo, hi in e.get("ranks", []) for r in range(lo, hi + 1)]
            if len(members) != e.get("num_ranks") or not members or \
                    members[0] != e.get("rank") or seen & set(members):
                P.add("per_rank group malformed: %r" % {k: e.get(k) for k in ("rank", "num_ranks")})
            seen |= set(members)
            firsts.append(e.get("rank"))
        if seen != set(range(world)) or firsts != sorted(firsts):
            P.add("per_rank groups do not partition the %d ranks in order" % world)
            return P
        entries = [(e["rank"], e) for e in pr]
        # the group's last member must have the first member's figures
        # (checked below like any entry, with the group's figures)
        for e in pr:
            last = e["ranks"][-1][1]
            if last != e["rank"]:
                twin = dict(e)
                twin["rank"] = last
                twin.pop("coords", None)
                entries.append((last, twin))
    elif not isinstance(pr, list) or len(pr) != world:
        P.add("per_rank has %s entries, world is %d" % (len(pr) if isinstance(pr, list) else pr, world))
        return P
    else:
        entries = list(enumerate(pr))
    # every rank together holds each parameter at least once and at most
    # once per rank (held dtype: keep_fp32 counts in f32)
    held_total = sum(n * numel(shape) * DTYPE_SIZE[dt]
                     for (shape, dt, _), n in sig.items())
    held_sum = 0
    for r, e in entries:
        if isinstance(e, dict) and isinstance(e.get("param_bytes"), int) and \
                "coords" in e:
            held_sum += e["param_bytes"] * (e.get("num_ranks") or 1)
    if not held_total <= held_sum <= world * held_total:
        P.add("per_rank param_bytes sum to %d over %d ranks, outside "
              "[%d, %d] (the model once .. once per rank)"
              % (held_sum, world, held_total, world * held_total))
    for r, e in entries:
        if isinstance(e, dict) and "coords" not in e and "num_ranks" in e:
            # a group's last member: coords recomputed from the rank
            c, rem = {}, r
            for d, sz in zip(reversed(dims), reversed(sizes)):
                c[d] = rem % sz
                rem //= sz
            e["coords"] = c
        if not isinstance(e, dict) or e.get("rank") != r:
            P.add("per_rank[%d] malformed or out of order: %r" % (r, e))
            continue
        c = e.get("coords")
        want_c, rem = [], r
        for s in reversed(sizes):
            want_c.append(rem % s)
            rem //= s
        want_c.reverse()
        if not isinstance(c, dict) or sorted(c) != sorted(dims) or \
                [c[d] for d in dims] != want_c:
            P.add("per_rank[%d].coords %r, want %r" % (r, c, dict(zip(dims, want_c))))
            continue
        got = e.get("param_bytes")
        want = 0
        try:
            for (shape, dt, pls), n in sig.items():
                ln = local_lengths(list(shape), dims, sizes, pls, want_c)
                want += n * numel(ln) * DTYPE_SIZE[dt]
        except ValueError as ex:
            P.add("per_rank[%d]: %s" % (r, ex))
            continue
        if got != want:
            P.add("per_rank[%d].param_bytes %r, recomputed %d" % (r, got, want))
        check_memory(P, r, e, rep, msig, dims, sizes, want_c, fsdp_enabled)
    check_slices(P, rep, dims, sizes)
    return P


INT64_MAX = (1 << 63) - 1  # byte counts saturate there
MEM_KEYS = ("params", "grads", "optimizer", "gather_peak", "activations", "peak")
OPT_STATES = {"adamw": 2, "sgd": 1, "none": 0}


def check_memory(P, r, e, rep, msig, dims, sizes, coords, fsdp_enabled):
    """per_rank[r].memory: types, the sum, and the padded state terms."""
    mem = e.get("memory")
    if not isinstance(mem, dict) or any(
            not isinstance(mem.get(k), int) or isinstance(mem.get(k), bool)
            or mem.get(k) < 0 for k in MEM_KEYS):
        P.add("per_rank[%d].memory %r lacks a non-negative integer %s"
              % (r, mem, "/".join(MEM_KEYS)))
        return
    if mem["peak"] != min(sum(mem[k] for k in MEM_KEYS[:-1]), INT64_MAX):
        P.add("per_rank[%d].memory.peak %d != the sum of the other terms"
              % (r, mem["peak"]))
    opt = (rep.get("memory_options") or {}).get("optimizer", "adamw")
    if opt not in OPT_STATES:
        P.add("memory_options.optimizer %r unknown" % opt)
        return
    dps = sizes[dims.index("dp_shard")] if fsdp_enabled and "dp_shard" in dims else 1
    params = grads = fl = lowp = fl_u = lowp_u = tensors = 0
    for (shape, held, red, pls), n in msig.items():
        tponly = [("R",) if dims[i] in ("dp_shard", "dp_replicate") else pl
                  for i, pl in enumerate(pls)]
        try:
            ln = local_lengths(list(shape), dims, sizes, tponly, coords)
            own = local_lengths(list(shape), dims, sizes, pls, coords)
        except ValueError:
            return
        padded = numel(ln[1:]) * (-(-ln[0] // dps)) if ln else 1
        params += n * padded * DTYPE_SIZE[held]
        if held in FLOAT_DTYPES:
            grads += n * padded * DTYPE_SIZE[red]
            fl += n * padded
            fl_u += n * numel(own)
            tensors += n
            if DTYPE_SIZE[held] < 4:
                lowp += n * padded
                lowp_u += n * numel(own)
    states = OPT_STATES[opt]
    optimizer = 4 * states * fl + (4 * lowp if states else 0)
    # torch's optimizer: the unpadded local shard, AdamW's f32 step each
    torch_opt = (4 * states * fl_u + 4 * lowp_u + 4 * tensors * (opt == "adamw")
                 if states else 0)
    for k, want in (("params", params), ("grads", grads),
                    ("optimizer", optimizer), ("optimizer_torch", torch_opt)):
        if mem[k] != want:
            P.add("per_rank[%d].memory.%s %d, recomputed %d (padded, %s)"
                  % (r, k, mem[k], want, opt))
    if not fsdp_enabled and mem["gather_peak"] != 0:
        P.add("per_rank[%d].memory.gather_peak %d without FSDP"
              % (r, mem["gather_peak"]))


def check_slices(P, rep, dims, sizes):
    """--rank R: local_shape / global_offset / local_bytes of rank R."""
    r = rep.get("slices_rank")
    if r is None:
        for p in rep["parameters"]:
            if "local_shape" in p:
                P.add("%s: local_shape without slices_rank" % p["name"])
                return
        return
    world = numel(sizes)
    if not isinstance(r, int) or not 0 <= r < world:
        P.add("slices_rank %r outside the mesh" % r)
        return
    coords, rem = [], r
    for s in reversed(sizes):
        coords.append(rem % s)
        rem //= s
    coords.reverse()
    for p in rep["parameters"]:
        parsed = [parse_pl(p["placements"][d]) for d in dims]
        try:
            off, ln = local_box(list(p["shape"]), dims, sizes, parsed, coords)
        except (ValueError, TypeError):
            continue
        held = "f32" if p.get("keep_fp32") is True and p["dtype"] in FLOAT_DTYPES \
            else p["dtype"]
        if p.get("local_shape") != ln or p.get("global_offset") != off or \
                p.get("local_bytes") != numel(ln) * DTYPE_SIZE[held]:
            P.add("%s: rank %d slice %r @ %r (%r bytes), recomputed %r @ %r"
                  % (p["name"], r, p.get("local_shape"), p.get("global_offset"),
                     p.get("local_bytes"), ln, off))


ADVICE_MEM = ("params", "grads", "optimizer", "gather_peak", "activations",
              "peak")


def check_advice(adv, gpus=None):
    """Problems in `tpx plan --gpus N --format json` (tpx-advice/1,
    docs/MEMORY.md): one candidate per (dp_replicate, dp_shard, tp) with
    product N (a custom MoE model's once per ep); fits == peak <= gpu_mem;
    memory terms summing to the peak; TP + FSDP + EP traffic == the total; sorted fitting (by traffic, then peak),
    then not fitting (by peak), then rejected (with a reason, no figures)."""
    P = Problems()
    if not isinstance(adv, dict) or adv.get("format") != "tpx-advice/1":
        return ["advice: not a tpx-advice/1 object"]
    n, mem = adv.get("gpus"), adv.get("gpu_mem")
    if gpus is not None and n != gpus:
        P.add("advice.gpus %r, asked %r" % (n, gpus))
    if not isinstance(n, int) or not isinstance(mem, int) or mem < 1:
        return P + ["advice: gpus/gpu_mem malformed"]
    a = adv.get("advice")
    if not isinstance(a, list):
        return P + ["advice.advice is not a list"]
    want = sorted((n // t // s, s, t) for t in range(1, n + 1) if n % t == 0
                  for s in range(1, n // t + 1) if (n // t) % s == 0)
    # A custom MoE model's advice repeats a mesh once per ep (docs/MEMORY.md
    # "Expert parallelism"): every triple is there, each ep at most once.
    got = sorted(set((x.get("dp_replicate"), x.get("dp_shard"), x.get("tp"))
                     for x in a))
    eps = [(x.get("dp_replicate"), x.get("dp_shard"), x.get("tp"),
            x.get("ep", 1)) for x in a]
    if len(set(eps)) != len(eps):
        P.add("advice lists a mesh twice with the same ep")
    if got != want:
        P.add("advice lists meshes %r, want every product-%d triple %r"
              % (got[:6], n, want[:6]))
    keys = []
    bands = {}
    for x in a:
        tag = "advice %s" % ((x.get("dp_replicate"), x.get("dp_shard"),
                               x.get("tp")),)
        why = x.get("rejected_because")
        if why is not None:
            if not isinstance(why, str) or not why or x.get("fits") is not False \
                    or x.get("peak_bytes") is not None \
                    or x.get("comm_bytes_per_step") is not None or "memory" in x:
                P.add("%s: rejected but carries figures or no reason" % tag)
            keys.append((2, 0, 0))
            continue
        m, pk = x.get("memory"), x.get("peak_bytes")
        if not isinstance(m, dict) or any(not isinstance(m.get(k), int) or
                                          m.get(k) < 0 for k in ADVICE_MEM):
            P.add("%s: memory %r malformed" % (tag, m))
            continue
        if m["peak"] != pk or pk != min(sum(m[k] for k in ADVICE_MEM[:-1]),
                                        INT64_MAX):
            P.add("%s: peak_bytes %r, memory %r: not the sum" % (tag, pk, m))
        if x.get("fits") is not (pk <= mem):
            P.add("%s: fits %r but peak %d vs gpu_mem %d"
                  % (tag, x.get("fits"), pk, mem))
        tot, ctp, cf, cep = (x.get("comm_bytes_per_step"),
                             x.get("comm_tp_bytes"), x.get("comm_fsdp_bytes"),
                             x.get("comm_ep_bytes", 0))
        if not all(isinstance(v, int) and v >= 0
                   for v in (tot, ctp, cf, cep)) or \
                tot != min(ctp + cf + cep, INT64_MAX):
            P.add("%s: traffic %r != tp %r + fsdp %r + ep %r"
                  % (tag, tot, ctp, cf, cep))
            continue
        band = x.get("traffic_band")
        if x["fits"] != isinstance(band, int):
            P.add("%s: fits %r with traffic_band %r" % (tag, x["fits"], band))
            continue
        keys.append((0, band, pk) if x["fits"] else (1, pk, 0))
        if x["fits"]:
            bands.setdefault(band, []).append(tot)
    if keys != sorted(keys):
        P.add("advice not sorted fitting (by traffic band, then peak), not "
              "fitting (by peak), rejected: %r" % keys[:8])
    # bands: 0, 1, ... each within 10% + 1 MiB of its least traffic, and
    # each band's least beyond the previous band's reach
    reach = -1
    for b in range(len(bands)):
        if b not in bands:
            P.add("traffic bands %r are not numbered 0.." % sorted(bands))
            break
        lo = min(bands[b])
        if lo <= reach or any(t > lo + int(lo * 0.10) + (1 << 20)
                              for t in bands[b]):
            P.add("traffic band %d %r does not follow the 10%% rule" % (b, bands[b]))
        reach = lo + int(lo * 0.10) + (1 << 20)
    return P


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--tp", type=int)
    ap.add_argument("--dp-shard", type=int)
    ap.add_argument("--dp-replicate", type=int)
    ap.add_argument("--sp", action="store_true")
    a = ap.parse_args(argv)
    with open(a.report) as f:
        rep = json.load(f)
    ex = {"sp": a.sp}
    if a.tp:
        ex["tp"] = a.tp
    if a.dp_shard:
        ex["dp_shard"] = a.dp_shard
    if a.dp_replicate:
        ex["dp_replicate"] = a.dp_replicate
    probs = check(rep, ex)
    for p in probs:
        print(p)
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
