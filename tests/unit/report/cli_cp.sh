#!/bin/sh
# cli_cp.sh — `tpx plan --cp` / `--offload` and `tpx shard --cp` end to end
# on bundled configs (docs/SEMANTICS.md "Context parallelism"): the
# (dp_replicate, dp_shard, cp, tp) mesh numbered as torch numbers it, every
# rank's parameter bytes against torch.chunk arithmetic written out here
# (TP first, then ONE chunk of dim 0 over dp_shard x cp) for Llama and Qwen,
# cp 1 byte-identical to no --cp, the cp diagnostics, the CPU-offload
# device/host split, the advisor proposing cp for Llama-3.1-70B at --seq
# 131072 on 128 GPUs, and rank files of a cp mesh merging back
# byte-identical. Usage: cli_cp.sh TPX TPX_CKPT_TEST SOURCE_DIR
set -u
tpx=$1
tool=$2
src=$3
cfg="$src/tests/data/configs"
l1="$cfg/Llama-3.2-1B/config.json"
q06="$cfg/Qwen3-0.6B/config.json"
l70="$cfg/Llama-3.1-70B/config.json"
q35="$src/tests/data/families/qwen/Qwen3.5-35B-A3B.config.json"
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-cp.XXXXXX")
out="$work/out"
trap 'rm -rf "$work"' EXIT INT TERM
. "$(dirname "$0")/cli_lib.sh"

# Every rank's param_bytes from the parameters' global shapes alone:
# torch.chunk by hand, TP dim by the family plan's style of each name
# (colwise and the embedding: dim 0, rowwise: dim 1, norms none), the rank
# numbered row-major (dp_replicate, dp_shard, cp, tp), tp fastest.
HAND='
def chunk(n, w, i):
    c = -(-n // w)
    o = min(n, i * c)
    return o, min(c, n - o)
def tp_dim(name):
    if "o_proj" in name or "down_proj" in name:
        return 1
    if "norm" in name:
        return None
    return 0
R, S, C, T = (r["mesh"]["sizes"][r["mesh"]["dims"].index(d)] if d in r["mesh"]["dims"] else 1
              for d in ("dp_replicate", "dp_shard", "cp", "tp"))
def bytes_of(rank):
    t = rank % T; c = rank // T % C; s = rank // (T * C) % S
    total = 0
    for p in r["parameters"]:
        if p.get("tied_to"):
            continue
        shape = list(p["shape"])
        d = tp_dim(p["name"]) if T > 1 else None
        if d is not None:
            shape[d] = chunk(shape[d], T, t)[1]
        shape[0] = chunk(shape[0], S * C, s * C + c)[1]
        n = 1
        for x in shape:
            n *= x
        total += n * {"bf16": 2, "f32": 4}[p["dtype"]]
    return total
ranks = []
for e in r["per_rank"]:
    spans = e.get("ranks") or [[e["rank"], e["rank"]]]
    for a, b in spans:
        for k in range(a, b + 1):
            ranks.append(k)
            assert bytes_of(k) == e["param_bytes"], (k, bytes_of(k), e["param_bytes"])
    k = e["rank"]
    co = e["coords"]
    assert k == ((co["dp_replicate"] * S + co["dp_shard"]) * C + co.get("cp", 0)) * T + co["tp"], (k, co)
assert sorted(ranks) == list(range(R * S * C * T)), ranks
'

# ---- usage ----
expect 0 "help lists --cp and --offload" -- --help
has "--cp N" "help: --cp"
has "--offload" "help: --offload"
expect 2 "cp zero" -- --config "$l1" --cp 0
has "--cp expects a positive integer" "says the range"
expect 2 "rank outside a cp mesh" -- --config "$l1" --cp 2 --dp-shard 2 --rank 4 --format json
has "--rank 4 is outside the mesh of 4 ranks" "the world includes cp"

# ---- per-rank bytes against torch.chunk by hand ----
for mesh in "--cp 2" "--dp-shard 2 --cp 2" "--dp-replicate 2 --dp-shard 2 --cp 2 --tp 2" \
            "--dp-shard 3 --cp 2 --tp 2"; do
  for c in "$l1" "$q06"; do
    fam=$(basename "$(dirname "$c")")
    # shellcheck disable=SC2086 # the mesh is several words on purpose
    expect 0 "$fam $mesh" -- --config "$c" $mesh --format json
    py "$fam $mesh: every rank's bytes by hand, coords numbered as torch" "$HAND"
    py "$fam $mesh: FSDP over dp_shard_cp, cp joined" '
assert r["format"] == "tpx-report/1.1", r["format"]
assert r["fsdp"]["mesh"] == "dp_shard_cp", r["fsdp"].get("mesh")
S = r["mesh"]["sizes"][1]; C = r["mesh"]["sizes"][2]
assert r["mesh"]["dims"] == ["dp_replicate", "dp_shard", "cp", "tp"]
assert r["fsdp"]["mesh_size"] == S * C
assert all(p["placements"]["cp"] == "joined" for p in r["parameters"])'
  done
done
# 151936 rows of Qwen3 embed over tp 2 then 6 pieces is uneven: the flat
# chunk differs from a chunk over dp_shard then cp, and the test above
# holds the flat one.
expect 0 "text: the FSDP mesh is named" -- --config "$l1" --dp-shard 2 --cp 2 --tp 2
has "sharded over dp_shard_cp (4 ranks: one torch.chunk of dim 0" "says which mesh FSDP used"
has "mesh      dp_replicate=1 dp_shard=2 cp=2 tp=2 (world 8)" "verdict mesh line"
has "dp_shard=strided_shard(0,2) cp=joined tp=shard(0)" "placements show joined"

# ---- cp 1 changes nothing ----
"$tpx" plan --config "$l1" --dp-shard 2 --tp 2 --seq 512 --format json >"$work/a" 2>&1
"$tpx" plan --config "$l1" --dp-shard 2 --tp 2 --seq 512 --format json --cp 1 >"$work/b" 2>&1
n=$((n + 1))
if cmp -s "$work/a" "$work/b" && ! grep -q '"cp"' "$work/a"; then
  echo "ok: --cp 1 is byte-identical to no --cp (no cp dim)"
else
  echo "FAIL: --cp 1 is byte-identical to no --cp (no cp dim)"
  fails=$((fails + 1))
fi

# ---- diagnostics ----
expect 1 "seq not divisible by 2 cp" -- --config "$l1" --cp 4 --seq 4100
has "error [cp-seq-indivisible] --seq 4100 is not divisible by 2 x cp = 8" "names seq and 2 cp"
has "(--seq 4104)" "suggests the padded length"
expect 0 "seq divisible by 2 cp" -- --config "$l1" --cp 4 --seq 4096
lacks "cp-seq-indivisible" "no diagnostic when it divides"
expect 0 "cp without FSDP warns" -- --config "$l1" --cp 2 --no-fsdp
has "warning [cp-without-fsdp]" "cp without FSDP"
expect 0 "pure replication is planned, upstream would refuse it" -- --config "$l1" --dp-replicate 2
has "info [upstream-refuses-mesh]" "the note"
has "DDP usecase is not supported by FSDP2" "quotes upstream"
expect 0 "HSDP is not refused" -- --config "$l1" --dp-replicate 2 --dp-shard 2
lacks "upstream-refuses-mesh" "no note for HSDP"
expect 0 "Qwen3.5 CP-aware linear attention named" -- --config "$q35" --cp 2 --dp-shard 2
has "info [cp-linear-attention] 30 gated delta-net linear-attention modules (model.language_model.layers.0.linear_attn .. model.language_model.layers.38.linear_attn)" "names the modules"
expect 0 "no CP-aware note at cp 1" -- --config "$q35" --dp-shard 2
lacks "cp-linear-attention" "nothing at cp 1"

# ---- CPU offload ----
expect 0 "offload json" -- --config "$l1" --tp 2 --dp-shard 2 --cp 2 --seq 1024 --offload --format json
py "device = gathered + activations, host = the sharded state" '
assert r["memory_options"]["offload"] is True
for e in r["per_rank"]:
    m = e["memory"]
    assert m["device"] == m["gather_peak"] + m["activations"], m
    assert m["host"] == m["params"] + m["grads"] + m["optimizer"], m
    assert m["peak"] == m["device"] + m["host"], m'
expect 0 "no offload: no device/host keys" -- --config "$l1" --tp 2 --seq 1024 --format json
py "reports without --offload keep their keys" '
assert "offload" not in r["memory_options"]
assert all("device" not in e["memory"] for e in r["per_rank"])'
expect 0 "offload text" -- --config "$l1" --tp 2 --seq 1024 --offload
has "CPU offload: params, grads and optimizer on the host" "offload header"
has "      device        host" "device and host columns"

# ---- the advisor ----
expect 1 "70B at 128k tokens on 128 GPUs: nothing fits at cp 1" -- --config "$l70" --gpus 128 --seq 131072
has "No mesh fits in 80.00 GiB per GPU" "says nothing fits"
has "With context parallelism " "proposes cp"
cmd=$(sed -n '/^With context parallelism /{n;p;}' "$out" | sed "s|^  $tpx plan ||")
n=$((n + 1))
case "$cmd" in
*"--cp "*) echo "ok: the proposal is a command with --cp" ;;
*) echo "FAIL: the proposal is a command with --cp: '$cmd'"; fails=$((fails + 1)) ;;
esac
# shellcheck disable=SC2086 # the command's words
expect 0 "the proposed cp mesh plans and fits" -- $cmd --format json
py "its worst rank fits in 80 GiB" '
assert max(e["memory"]["peak"] for e in r["per_rank"]) <= 80 * 2**30'
expect 1 "advisor json lists the cp suggestion" -- --config "$l70" --gpus 128 --seq 131072 --format json
py "suggestions: cp fits, its mesh has cp > 1" '
s = {x["with"]: x for x in r["suggestions"]}
assert s["cp"]["command"] and "--cp" in s["cp"]["command"], s["cp"]
assert s["cp"]["mesh"]["cp"] > 1 and s["cp"]["mesh"]["fits"]
assert all(x["cp"] == 1 for x in r["advice"])'
expect 0 "advisor --cp 8 restricts the meshes" -- --config "$l70" --gpus 64 --cp 8 --seq 131072 --activation-checkpointing --format json
py "every mesh has cp 8 and product 64" '
assert r["advice"] and all(x["cp"] == 8 for x in r["advice"])
assert all(x["dp_replicate"] * x["dp_shard"] * x["cp"] * x["tp"] == 64 for x in r["advice"])'
expect 2 "advisor --cp needs 2 cp to divide --seq" -- --config "$l70" --gpus 64 --cp 8 --seq 1000
has "needs --seq divisible by 2 x cp = 16" "says why"

expect 0 "advisor with --offload: the device bytes decide" -- --config "$l70" --gpus 8 --offload --activation-checkpointing --host-mem 160GiB
has "CPU offload (device bytes shown, host bytes within --host-mem)" "says the column is the device"
has "--activation-checkpointing --offload" "the best command keeps --offload"

# ---- tpx shard --cp and tpx merge ----
# (3 kv heads in the shrunken checkpoint: tp 3; dp_shard 3 x cp 2 = 6
# pieces of dim 0, uneven; test_cp_shard.c checks each slice by hand)
s="$work/src"
mkdir -p "$s"
n=$((n + 1))
if "$tool" gen "$src/tests/data/ckpt/Llama-3.2-1B/config.json" "$s" >"$out" 2>&1 &&
   "$tpx" shard --weights "$s" --dp-shard 3 --cp 2 --tp 3 --out "$work/ranks" >"$out" 2>&1 &&
   [ "$(ls "$work/ranks" | grep -c '^rank-.*-of-00018.safetensors$')" -eq 18 ] &&
   grep -qF '[\"dp_replicate\",\"dp_shard\",\"cp\",\"tp\"],\"sizes\":[1,3,2,3]' \
     "$work/ranks/rank-00005-of-00018.safetensors" &&
   "$tpx" merge --in "$work/ranks" --out "$work/merged" >"$out" 2>&1 &&
   cmp "$s/model.safetensors" "$work/merged/model.safetensors"; then
  echo "ok: tpx shard --cp 2 writes 18 rank files that merge back byte-identical"
else
  echo "FAIL: tpx shard --cp 2 writes 18 rank files that merge back byte-identical"
  sed 's/^/    /' "$out" | head -20
  fails=$((fails + 1))
fi

echo "cli_cp: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
