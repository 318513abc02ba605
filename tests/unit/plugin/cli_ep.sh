#!/bin/sh
# cli_ep.sh — `tpx plan --ep` and `tpx shard --ep` end to end on the test
# plugin's custom MoE architecture (tests/unit/plugin/moe; the sizes of
# tests/data/upstream_moe/qwen3_moe): the JSON report's MoE mesh, every
# rank's coordinates on it and each parameter's mesh, NeMo Automodel
# 0.7.0's refusals in its words, and rank files at ep 2 and ep 4 holding
# their EP rank's experts (then merged back byte for byte).
# Usage: cli_ep.sh TPX TPX_CKPT_TEST MOE_PLUGIN_DIR GOOD_PLUGIN_DIR SOURCE_DIR
set -u
tpx=$1
tool=$2
moe_dir=$3
good_dir=$4
src=$5
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-ep.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
export TPX_PLUGIN_PATH="$moe_dir:$good_dir"
fails=0

ok() { echo "ok: $1"; }
bad() { fails=$((fails + 1)); echo "FAIL: $1"; sed 's/^/    /' "$work/log" | head -20; }

# expect DESCRIPTION RC TEXT CMD...: exit status RC and TEXT printed
expect() {
  what=$1 want=$2 text=$3
  shift 3
  "$@" >"$work/log" 2>&1
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -qF -- "$text" "$work/log"; then
    ok "$what"
  else
    echo "    (exit $rc, wanted $want and '$text')"
    bad "$what"
  fi
}

# config ARCH EXPERTS DIR: the qwen3_moe golden config for ARCH
config() {
  mkdir -p "$3"
  python3 - "$src/tests/data/upstream_moe/qwen3_moe/config.json" "$1" "$2" \
    "$3/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["architectures"] = [sys.argv[2]]
c["num_local_experts"] = int(sys.argv[3])
json.dump(c, open(sys.argv[4], "w"), indent=1)
EOF
}

config TpxMoeForCausalLM 8 "$work/moe"
config TpxMoeForCausalLM 6 "$work/moe6"
config TpxMoePlannedForCausalLM 8 "$work/planned"
cfg="$work/moe/config.json"

# --- tpx plan --format json at ep 2 -------------------------------------
"$tpx" plan --config "$cfg" --dp-shard 4 --ep 2 --format json \
  >"$work/ep2.json" 2>"$work/log"
if python3 - "$work/ep2.json" <<'EOF' >"$work/log" 2>&1; then
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "tpx-report/1.2", d["format"]
assert d["moe_mesh"] == {"dims": ["ep_shard", "ep"], "sizes": [2, 2]}, d["moe_mesh"]
for r in d["per_rank"]:
    c = r["coords"]
    assert (c["ep_shard"], c["ep"]) == (r["rank"] // 2, r["rank"] % 2), r
    assert r["param_bytes"] == 125968, r  # Automodel 0.7.0's golden
for p in d["parameters"]:
    expert = ".mlp.experts." in p["name"]
    assert p["mesh"] == ("moe" if expert else "main"), p
    if expert:
        assert p["placements"] == {"ep_shard": "shard(1)", "ep": "shard(0)"}, p
        assert p["fsdp_unit"] == p["module"], p
units = {u["module"]: u for u in d["fsdp"]["units"]}
assert units["model.layers.1.mlp.experts"]["mesh_dim"] == "ep_shard"
assert units["model"]["params"] == 1 and units[""]["params"] == 0
EOF
  ok "plan --ep 2 --format json: MoE mesh, coords, meshes, units, bytes"
else
  bad "plan --ep 2 --format json: MoE mesh, coords, meshes, units, bytes"
fi
expect "plan --ep 2 text: the MoE mesh and expert placements" 0 \
  "moe: ep_shard=shard(1) ep=shard(0)" \
  "$tpx" plan --config "$cfg" --dp-shard 4 --ep 2
expect "plan --ep 2 text: MoE mesh line" 0 "MoE mesh: ep_shard=2 ep=2" \
  "$tpx" plan --config "$cfg" --dp-shard 4 --ep 2
expect "plan --ep 4: ep = world, whole experts per rank" 0 \
  "moe: ep=shard(0)" "$tpx" plan --config "$cfg" --dp-shard 4 --ep 4
expect "plan --ep 1 keeps the experts on the main mesh" 0 \
  "experts.down_projs           [8, 32, 64] bf16  -      dp_shard=shard(0)" \
  "$tpx" plan --config "$cfg" --dp-shard 4

# --- the advisor enumerates ep for a custom MoE model ---------------------
"$tpx" plan --config "$cfg" --gpus 4 --seq 256 --format json \
  >"$work/advice.json" 2>"$work/log"
if python3 - "$work/advice.json" <<'EOF' >"$work/log" 2>&1; then
import json, sys
d = json.load(open(sys.argv[1]))
ok = [(m["dp_shard"], m.get("ep", 1)) for m in d["advice"]
      if m["rejected_because"] is None and m["tp"] == 1 and m["dp_replicate"] == 1]
assert sorted(ok) == [(4, 1), (4, 2), (4, 4)], ok
m = [m for m in d["advice"] if m.get("ep") == 2 and m["rejected_because"] is None][0]
assert m["comm_ep_bytes"] > 0, m
tp2 = [m for m in d["advice"] if m["tp"] == 2 and m.get("ep") == 2]
assert tp2 and all("No safe tensor-parallel plan" in m["rejected_because"]
                   for m in tp2), tp2
EOF
  ok "advisor: ep 1, 2, 4 costed, tp 2 refused with upstream's words"
else
  bad "advisor: ep 1, 2, 4 costed, tp 2 refused with upstream's words"
fi
expect "advisor --ep 2 keeps to ep 2, best command has --ep 2" 0 "--ep 2" \
  "$tpx" plan --config "$cfg" --gpus 4 --seq 256 --ep 2
# the text table: after the bytes sent over tp and fsdp, those over ep
# (the JSON's comm_ep_bytes, 0 B at ep 1), row for row as the JSON ranks
# them; a dense model's table (no ep > 1 mesh) has no ep column at all
"$tpx" plan --config "$cfg" --gpus 4 --seq 256 >"$work/advice.txt" 2>&1
"$tpx" plan --config "$src/tests/data/plugin/Llama-3.2-1B.json" --gpus 4 \
  --seq 256 >"$work/advice1.txt" 2>&1
if python3 - "$work/advice.json" "$work/advice.txt" "$work/advice1.txt" \
  <<'EOF' >"$work/log" 2>&1; then
import json, sys
d = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().split("\n")
h = [l for l in lines if "sent/step" in l][0].split()
assert h[-4:] == ["sent/step", "tp", "fsdp", "ep"], h
assert h[:4] == ["dp_rep", "dp_shard", "ep", "tp"], h
rows = [l.split("(upstream")[0].split() for l in lines
        if l[:3].strip().isdigit()]
ok = [m for m in d["advice"] if m["rejected_because"] is None]
assert len(rows) == len(ok) and len(rows) > 3, (rows, ok)
def near(t, want):  # as tpx_format_bytes rounds: a tenth of the unit
    unit = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[t[1]]
    return abs(float(t[0]) * unit - want) <= 0.05 * unit
for r, m in zip(rows, ok):
    assert int(r[3]) == m.get("ep", 1), (r, m)
    want = m.get("comm_ep_bytes", 0)
    assert (want == 0) == (r[-2:] == ["0", "B"]) and near(r[-2:], want), (r, m)
    assert near(r[-4:-2], m["comm_fsdp_bytes"]), (r, m)
assert any(m.get("ep", 1) > 1 for m in ok)
lines1 = open(sys.argv[3]).read().split("\n")
h1 = [l for l in lines1 if "sent/step" in l][0].split()
assert h1 == ["dp_rep", "dp_shard", "tp", "peak/rank", "fits", "band",
              "sent/step", "tp", "fsdp"], h1
EOF
  ok "advisor text: ep mesh and ep traffic columns, none without ep > 1"
else
  bad "advisor text: ep mesh and ep traffic columns, none without ep > 1"
fi
expect "advisor --ep 3 does not divide --gpus 4" 2 "--ep 3 does not divide --gpus 4" \
  "$tpx" plan --config "$cfg" --gpus 4 --ep 3

# --- upstream's refusals ------------------------------------------------
expect "ep 3 on 4 ranks" 1 \
  "non_pp_size=4 must be a multiple of ep_size=3" \
  "$tpx" plan --config "$cfg" --dp-shard 4 --ep 3
expect "ep 8 on 4 ranks" 1 \
  "non_pp_size=4 must be a multiple of ep_size=8" \
  "$tpx" plan --config "$cfg" --dp-shard 4 --ep 8
expect "6 experts over ep 4" 1 \
  "[experts-not-divisible] n_routed_experts 6 must be divisible by expert_parallel_degree 4" \
  "$tpx" plan --config "$work/moe6/config.json" --dp-shard 4 --ep 4
expect "tp 2 at ep 2 with no registered plan" 1 \
  "No safe tensor-parallel plan is registered for custom MoE model 'TpxMoeForCausalLM' at tp_size=2." \
  "$tpx" plan --config "$cfg" --dp-shard 2 --tp 2 --ep 2
expect "tp 2 at ep 1: the default plan's unmatched keys" 1 \
  "unmatched paths: model.layers.*.mlp.down_proj, model.layers.*.mlp.gate_proj, model.layers.*.mlp.gate_up_proj, model.layers.*.mlp.up_proj, model.layers.*.self_attn.qkv_proj." \
  "$tpx" plan --config "$cfg" --dp-shard 2 --tp 2
expect "a dense model at ep 2" 1 \
  "[moe-config-missing] MoE models must expose moe_config on the inner, text, or top-level model." \
  "$tpx" plan --config "$src/tests/data/plugin/Llama-3.2-1B.json" --dp-shard 4 --ep 2
expect "a registered plan at tp 2 ep 2 is accepted" 0 "Verdict: OK" \
  "$tpx" plan --config "$work/planned/config.json" --dp-shard 2 --tp 2 --ep 2

# --- tpx shard --ep 2 / 4: each rank file holds its experts --------------
mkdir -p "$work/src"
expect "generate a checkpoint" 0 "36 tensors" "$tool" gen "$cfg" "$work/src"
expect "shard refuses ep 3" 1 "non_pp_size=4 must be a multiple of ep_size=3" \
  "$tpx" shard --weights "$work/src" --dp-shard 4 --ep 3 --out "$work/none"
for ep in 2 4; do
  expect "shard --ep $ep" 0 "wrote 4 files" \
    "$tpx" shard --weights "$work/src" --dp-shard 4 --ep $ep --out "$work/r$ep"
  expect "ep $ep: rank files hold exactly their slices" 0 "hold exactly" \
    "$tool" check-ranks "$work/src" "$work/r$ep" 1 4 1 ep=$ep
  if python3 - "$work/r$ep" $ep <<'EOF' >"$work/log" 2>&1; then
import json, struct, sys
d, ep = sys.argv[1], int(sys.argv[2])
for r in range(4):
    with open("%s/rank-%05d-of-00004.safetensors" % (d, r), "rb") as f:
        h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    meta = h["__metadata__"]
    assert json.loads(meta["tpx.mesh"])["moe"]["sizes"] == [4 // ep, ep]
    t = json.loads(meta["tpx.tensors"])["model.layers.2.mlp.experts.down_projs"]
    # [8, 32, 64]: experts (r % ep) * 8/ep.. over ep, dim 1 over ep_shard
    es = 4 // ep
    want = [(r % ep) * (8 // ep), (r // ep) * (32 // es), 0]
    assert t["mesh"] == "moe" and t["offsets"] == want, (r, t)
    shape = h["model.layers.2.mlp.experts.down_projs"]["shape"]
    assert shape == [8 // ep, 32 // es, 64], (r, shape)
EOF
    ok "ep $ep: rank r holds experts of EP rank r % ep"
  else
    bad "ep $ep: rank r holds experts of EP rank r % ep"
  fi
  expect "ep $ep: merge" 0 "wrote 1 file" \
    "$tpx" merge --in "$work/r$ep" --out "$work/m$ep"
  expect "ep $ep: merged checkpoint is the source" 0 "identical" \
    "$tool" cmp "$work/src" "$work/m$ep"
done

if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all passed"
