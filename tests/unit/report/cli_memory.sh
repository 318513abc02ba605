#!/bin/sh
# cli_memory.sh — `tpx plan` training memory, the mesh advisor (--gpus), the
# block picture (--show) and per-rank slices (--rank) end to end on bundled
# configs: exit codes, key output, and figures that must hold (the JSON
# advice sorted fitting-first, rejected meshes with their reason, per_rank
# memory summing to peak). Usage: cli_memory.sh TPX_BINARY SOURCE_DIR
set -u
tpx=$1
src=$2
cfg="$src/tests/data/configs"
l1="$cfg/Llama-3.2-1B/config.json"
l70="$cfg/Llama-3.1-70B/config.json"
out=$(mktemp "${TMPDIR:-/tmp}/tpx-mem.XXXXXX")
trap 'rm -f "$out"' EXIT INT TERM
. "$(dirname "$0")/cli_lib.sh"

# ---- bad usage ----
expect 2 "bad optimizer" -- --config "$l1" --optimizer adam
has "unknown optimizer 'adam'" "names the optimizer"
expect 2 "seq zero" -- --config "$l1" --seq 0
has "--seq expects an integer from 1" "says the range"
expect 2 "bad gpu-mem" -- --config "$l1" --gpus 8 --gpu-mem 80XB
has "--gpu-mem expects a size" "names --gpu-mem"
expect 2 "gpus with tp" -- --config "$l1" --gpus 8 --tp 2
has "--gpus chooses the mesh" "explains the conflict"
expect 2 "rank without json" -- --config "$l1" --tp 2 --rank 0
has "add --format json" "says what to add"
expect 2 "rank outside the mesh" -- --config "$l1" --tp 2 --rank 2 --format json
has "--rank 2 is outside the mesh of 2 ranks" "names the rank and world"
expect 2 "show with json" -- --config "$l1" --show lm_head --format json
expect 2 "show matching nothing" -- --config "$l1" --tp 2 --show 'model.nope'
has "--show 'model.nope' matches no parameter" "names the pattern"
expect 0 "help lists the options" -- --help
has "--gpus N" "help: --gpus"
has "--activation-checkpointing" "help: checkpointing"

# ---- training memory ----
expect 0 "memory text" -- --config "$l1" --tp 2 --dp-shard 4 --seq 2048
has "Training memory per rank (optimizer adamw; activations for batch 1 x seq 2048" "memory section header"
has "ranks               params       grads   optimizer      gather activations        peak" "memory columns"
expect 0 "memory without --seq" -- --config "$l1" --tp 2
has "activations not counted: give --seq T" "says how to add activations"
expect 0 "memory json" -- --config "$l1" --tp 2 --dp-shard 4 --seq 512 \
  --batch 2 --optimizer sgd --activation-checkpointing --format json
py "per_rank memory: every term, peak is their sum" '
m = [e["memory"] for e in r["per_rank"]]
assert len(m) == 8
assert all(x["peak"] == x["params"] + x["grads"] + x["optimizer"] + x["gather_peak"] + x["activations"] for x in m)
assert all(x["activations"] > 0 and x["gather_peak"] > 0 for x in m)'
py "memory_options echo the flags" '
assert r["memory_options"] == {"optimizer": "sgd", "batch": 2, "seq": 512, "activation_checkpointing": True, "attention": "flash", "activation_dtype": "bf16"}'
# 1B in bf16 on 8 ranks: params 2*N/8 bytes (padded: every dim 0 here
# divides evenly), sgd: one f32 state + the f32 master = 8 bytes a param
py "sgd optimizer = 4x params bytes (state + master, f32 vs bf16)" '
m = r["per_rank"][0]["memory"]
assert m["optimizer"] == 4 * m["params"], m'
expect 0 "checkpointing lowers activations" -- --config "$l1" --tp 2 --seq 1024 --format json
cp "$out" "$out.full"
"$tpx" plan --config "$l1" --tp 2 --seq 1024 --activation-checkpointing --format json >"$out" 2>&1
n=$((n + 1))
if command -v python3 >/dev/null 2>&1 && python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["per_rank"][0]["memory"]["activations"]
b = json.load(open(sys.argv[2]))["per_rank"][0]["memory"]["activations"]
assert 0 < b < a, (a, b)' "$out.full" "$out"; then
  echo "ok: checkpointed activations are smaller"
else
  echo "FAIL: checkpointed activations are smaller"
  fails=$((fails + 1))
fi
rm -f "$out.full"
# --loss-in-place (a fused cross-entropy, tpx-train's): echoed, and the
# checkpointed peak no longer counts torch's two loss buffers
expect 0 "--loss-in-place" -- --config "$l1" --tp 2 --seq 1024 --activation-checkpointing --loss-in-place --format json
py "memory_options echo --loss-in-place" '
assert r["memory_options"]["loss_in_place"] is True'
expect 0 "--loss-in-place text" -- --config "$l1" --tp 2 --seq 1024 --activation-checkpointing --loss-in-place
has "activation checkpointing, flash attention, bf16, in-place loss;" "the header names the loss"

# the README's Llama-3.1-70B figures (update the README when these move)
expect 0 "README: 70B on 8 GPUs" -- --config "$l70" --tp 8 --seq 4096
has "  0-7              16.43 GiB   32.86 GiB   98.58 GiB   862.6 MiB   50.67 GiB  199.37 GiB" "README 8-GPU row"
expect 0 "README: 70B on 64 GPUs" -- --config "$l70" --dp-shard 8 --tp 8 \
  --seq 4096 --activation-checkpointing
has "  0-63              2.05 GiB    4.11 GiB   12.32 GiB   862.6 MiB    5.99 GiB   25.31 GiB" "README 64-GPU row"

# ---- mesh advisor ----
# 70B with AdamW needs ~18 bytes a parameter before activations: 8 GPUs
# of 80 GiB cannot hold it (exit 1), 64 can
expect 1 "advisor 70B on 8 GPUs: nothing fits" -- --config "$l70" --gpus 8
has "Mesh advice: LlamaForCausalLM on 8 GPUs of 80.00 GiB" "advisor header"
has "No mesh fits in 80.00 GiB per GPU; the smallest peak is" "names the smallest peak"
has "Even with activation checkpointing nothing fits (smallest peak" "says activation checkpointing is not enough either"
expect 0 "advisor 70B on 64 GPUs" -- --config "$l70" --gpus 64
has "Best: $tpx plan --config $l70 --dp-replicate 1 --dp-shard 8 --tp 8 --batch 1 --seq 4096" "the best mesh as a runnable command, with the program as run"
has "order: meshes that fit, in traffic bands" "states the ranking rule"
expect 0 "advisor 70B on 64 GPUs json" -- --config "$l70" --gpus 64 --format json
py "64 GPUs: 28 meshes, products 64, fitting first, tp 16/32/64 rejected for kv heads" '
a = r["advice"]
assert len(a) == 28, len(a)
assert all(x["dp_replicate"] * x["dp_shard"] * x["tp"] == 64 for x in a)
fit = [x["fits"] for x in a]
assert fit == sorted(fit, reverse=True)
assert a[0]["fits"] and a[0]["rejected_because"] is None
ok = [x for x in a if x["rejected_because"] is None]
fitting = [x for x in ok if x["fits"]]
bands = [x["traffic_band"] for x in fitting]
assert bands == sorted(bands) and bands[0] == 0, bands
for b in set(bands):
    inb = [x for x in fitting if x["traffic_band"] == b]
    assert [x["peak_bytes"] for x in inb] == sorted(x["peak_bytes"] for x in inb)
    lo = min(x["comm_bytes_per_step"] for x in inb)
    assert all(x["comm_bytes_per_step"] <= lo * 1.1 + (1 << 20) for x in inb)
assert all(x["traffic_band"] is None for x in a if not x["fits"])
assert r["best"].startswith("'"$tpx"' plan --config ") and "--seq 4096" in r["best"], r["best"]
assert r["suggestion"] is None
assert "traffic bands" in r["rule"]
assert all(x["peak_bytes"] <= r["gpu_mem"] for x in fitting)
assert all(x["peak_bytes"] > r["gpu_mem"] for x in ok if not x["fits"])
rej = [x for x in a if x["rejected_because"] is not None]
assert sorted(x["tp"] for x in rej) == [16, 16, 16, 32, 32, 64], rej
assert all("num_key_value_heads" in x["rejected_because"] for x in rej)
assert all(x["peak_bytes"] is None and x["fits"] is False for x in rej)'
# Ranked by fit margin within a traffic band: on 16 GPUs of 96 GiB
# Qwen3-30B-A3B (NeMo Automodel's own MoE class: tp > 1 refused, ep
# enumerated) ranks (1, 16, ep 4) above (4, 4, ep 8) in one band although it
# sends more: within a band the order is by peak, so some mesh in it
# sends more than one ranked below it.
q30="$cfg/Qwen3-30B-A3B/config.json"
expect 0 "advisor: fit margin within a traffic band" -- --config "$q30" --gpus 16 --gpu-mem 96GiB --format json
py "a mesh that sends more ranks above one that peaks higher in its band" '
a = [x for x in r["advice"] if x["fits"]]
assert all(x["tp"] == 1 for x in a), a[0]
assert (a[0]["dp_shard"], a[0]["ep"]) == (16, 8), a[0]
band = [x for x in a if x["traffic_band"] == a[0]["traffic_band"]]
assert len(band) > 2, band
assert [x["peak_bytes"] for x in band] == sorted(x["peak_bytes"] for x in band)
assert any(band[i]["comm_bytes_per_step"] > band[j]["comm_bytes_per_step"]
           for i in range(len(band)) for j in range(i + 1, len(band)))
rej = [x for x in r["advice"] if x["rejected_because"] is not None]
assert all("custom moe" in x["rejected_because"].lower() or "divisible by TP" in x["rejected_because"]
           for x in rej if x["tp"] > 1), rej[0]'
# Nothing fits without activation checkpointing: the advice says what it
# would take, as a command that plans exactly that.
expect 1 "advisor: activation checkpointing suggested" -- --config "$l70" --gpus 16 --gpu-mem 96GiB --seq 8192
has "With activation checkpointing 3 meshes fit; the best (peak 86.75 GiB):" "suggests activation checkpointing"
has "  $tpx plan --config $l70 --dp-replicate 1 --dp-shard 2 --tp 8 --batch 1 --seq 8192 --activation-checkpointing" "as a runnable command"
expect 0 "the suggested command runs" -- --config "$l70" --dp-replicate 1 --dp-shard 2 --tp 8 --batch 1 --seq 8192 --activation-checkpointing --format json
py "and plans the peak the advice named" '
assert round(max(e["memory"]["peak"] for e in r["per_rank"]) / 2**30, 2) == 86.75'
# The suggested commands start with the program as run (a build tree's
# tools/tpx is not on PATH: "tpx: not found"); a relative path stays so.
n=$((n + 1))
(cd "$(dirname "$tpx")" && ./"$(basename "$tpx")" plan --config "$l70" --gpus 64) >"$out" 2>&1
has "Best: ./$(basename "$tpx") plan --config $l70 --dp-replicate 1" "Best: starts with argv[0] as run"
lacks "Best: tpx plan" "not a bare tpx"
# Meshes upstream refuses (dp_replicate > 1 with dp_shard 1: "DDP usecase
# is not supported by FSDP2") are marked, in the table and in JSON.
expect 0 "advisor 1B on 2 GPUs" -- --config "$l1" --gpus 2 --seq 128
has "  3         2        1    1   21.82 GiB   yes    2     4.60 GiB          0 B     4.60 GiB  (upstream refuses: \"DDP usecase is not supported by FSDP2\")" "marks the (2, 1, 1) mesh"
expect 0 "advisor 1B on 2 GPUs json" -- --config "$l1" --gpus 2 --seq 128 --format json
py "upstream_refuses: only where dp_shard is 1 and dp_replicate > 1" '
for x in r["advice"]:
    refused = x["dp_replicate"] > 1 and x["dp_shard"] == 1
    assert (x["upstream_refuses"] is not None) == refused, x
    assert refused or x["upstream_refuses"] is None'
# --offload proposals must fit the host too: 70B on 8 GPUs offloads
# 148 GiB a rank, over the default --host-mem of 128 GiB
expect 1 "offload over the default host memory fits nothing" -- --config "$l70" --gpus 8 --activation-checkpointing
has "Even with CPU offload nothing fits (smallest peak 6.83 GiB on the device, 147.86 GiB on the host; --host-mem 128.00 GiB per rank)" "names the host bytes and the limit"
lacks "With CPU offload" "proposes no offload mesh"
expect 1 "with --host-mem 160GiB offload fits" -- --config "$l70" --gpus 8 --activation-checkpointing --host-mem 160GiB --format json
py "the offload suggestion fits within host_mem" '
s = {x["with"]: x for x in r["suggestions"]}
assert r["host_mem"] == 160 * 2**30
assert s["offload"]["command"] and s["offload"]["mesh"]["fits"], s["offload"]
assert s["offload"]["mesh"]["host_bytes_max"] <= r["host_mem"]'
expect 2 "--host-mem without --gpus" -- --config "$l1" --host-mem 64GiB
has "--host-mem is the host memory of one rank" "says what it is for"
expect 1 "nothing fits in 1GiB" -- --config "$l70" --gpus 8 --gpu-mem 1GiB
has "No mesh fits in 1.00 GiB per GPU" "says nothing fits"
expect 0 "advisor 1B, tp 3 rejected on 6 GPUs" -- --config "$l1" --gpus 6 --seq 128
has "Rejected (" "lists rejected meshes"
has "dp_replicate=2 dp_shard=1 tp=3: num_key_value_heads (8) must be divisible by TP size (3)" "states why tp 3 is rejected"

# ---- --show ----
expect 0 "show q_proj" -- --config "$l1" --tp 2 --dp-shard 2 --show 'model.layers.*.self_attn.q_proj'
has "model.layers.{0..15}.self_attn.q_proj.weight  [2048, 2048] bf16 (16 identical)" "identical layers collapsed"
has "placements: dp_replicate=replicate dp_shard=strided_shard(0,2) tp=shard(0)" "placements line"
has "          0:512 0" "first block held by rank 0"
has "       512:1024 2" "TP first, then FSDP: rank 2 holds rows 512:1024"
lacks "$(printf '\033')" "no color when not a tty"
lacks "Training memory" "the picture replaces the report"
expect 0 "show down_proj uneven" -- --config "$l1" --tp 4 --dp-shard 3 --show 'model.layers.0.mlp.down_proj.weight'
has "0:2048    2048:4096 4096:6144 6144:8192" "column blocks of a rowwise weight"
has "1366:2048 8" "uneven last dp block"

# ---- --rank ----
expect 0 "rank slices" -- --config "$l1" --tp 2 --dp-shard 2 --rank 3 --format json
py "rank 3 slices: local_shape, global_offset, local_bytes" '
p = {x["name"]: x for x in r["parameters"]}
q = p["model.layers.0.self_attn.q_proj.weight"]
assert q["local_shape"] == [512, 2048] and q["global_offset"] == [1536, 0], q
assert q["local_bytes"] == 512 * 2048 * 2
d = p["model.layers.0.mlp.down_proj.weight"]
assert d["local_shape"] == [1024, 4096] and d["global_offset"] == [1024, 4096], d
assert r["slices_rank"] == 3'

# ---- --attention, --dtype for activations, the torch optimizer figure ----
expect 2 "bad attention" -- --config "$l1" --attention flash2 --seq 512
has "unknown attention implementation 'flash2' (expected flash, sdpa or eager)" "names the value and the choices"
expect 2 "attention without a value" -- --config "$l1" --attention
has "--attention needs a value" "says the value is missing"
expect 0 "eager attention" -- --config "$l1" --tp 2 --seq 512 --attention eager
has "activations for batch 1 x seq 512, no activation checkpointing, eager attention, bf16;" "the header names the attention and the dtype"
has "optimizer as torch holds it (unpadded shard, step tensors)" "torch's optimizer line"
expect 0 "eager json" -- --config "$l1" --tp 2 --seq 512 --attention eager --format json
cp "$out" "$out.eager"
expect 0 "sdpa json" -- --config "$l1" --tp 2 --seq 512 --attention sdpa --format json
py "eager keeps more than sdpa (the seq x seq probabilities); options echo it" '
e = json.load(open(sys.argv[1] + ".eager"))
assert e["memory_options"]["attention"] == "eager"
assert r["memory_options"]["attention"] == "sdpa"
a, b = e["per_rank"][0]["memory"]["activations"], r["per_rank"][0]["memory"]["activations"]
assert a > b > 0, (a, b)'
rm -f "$out.eager"
expect 0 "f32 activations" -- --config "$l1" --seq 512 --dtype f32 --no-fsdp --format json
cp "$out" "$out.f32"
expect 0 "bf16 activations" -- --config "$l1" --seq 512 --dtype bf16 --no-fsdp --format json
py "--dtype f32 keeps more activation bytes than bf16" '
assert r["memory_options"]["activation_dtype"] == "bf16"
assert json.load(open(sys.argv[1] + ".f32"))["memory_options"]["activation_dtype"] == "f32"
f = json.load(open(sys.argv[1] + ".f32"))["per_rank"][0]["memory"]["activations"]
b = r["per_rank"][0]["memory"]["activations"]
assert f > b > 0, (f, b)'
rm -f "$out.f32"
expect 0 "uneven dp_shard: torch's optimizer" -- --config "$l1" --dp-shard 3 --format json
py "torch holds less optimizer state on the short last rank, tpx the same padded figure" '
m = [e["memory"] for e in r["per_rank"]]
assert m[0]["optimizer"] == m[1]["optimizer"] == m[2]["optimizer"]
assert m[2]["optimizer_torch"] < m[0]["optimizer_torch"], m
assert all(x["peak"] == x["params"] + x["grads"] + x["optimizer"] + x["gather_peak"] + x["activations"] for x in m)'
expect 0 "the advisor keeps --attention in its command" -- --config "$l1" --gpus 4 --seq 2048 --attention eager --format json
py "advice JSON: attention, and the best command holds it" '
assert r["attention"] == "eager"
assert r["best"].endswith("--seq 2048 --attention eager"), r["best"]'

# ---- byte counts past int64 ----
# batch x seq at their limits: activations saturate at INT64_MAX (as every
# byte count); the text peak and the HTML totals must saturate too, never
# wrap to a negative figure
expect 0 "activations past int64: text" -- --config "$l1" --tp 2 --dp-shard 4 \
  --batch 16777216 --seq 16777216 --html "$out.html"
lacks " -9" "the text peak does not wrap negative"
has "8589934592.00 GiB 8589934592.00 GiB" "activations and peak saturate"
n=$((n + 1))
if grep -q '>-[0-9]' "$out.html"; then
  echo "FAIL: the HTML memory totals wrap negative"
  fails=$((fails + 1))
else
  echo "ok: the HTML memory totals do not wrap negative"
fi
rm -f "$out.html"
# a config whose hidden_size is 2^62 (model from tiny safetensors headers):
# the activation formula's products saturate instead of wrapping (UB) to a
# small wrong figure
hh="$src/tests/data/memory/huge-hidden"
expect 0 "hidden_size 2^62: activations" -- --config "$hh.config.json" \
  --weights "$hh.safetensors" --seq 4096 --dp-shard 2 --format json
lacks "runtime error" "no sanitizer report"
py "activations and peak saturate at INT64_MAX" '
m = r["per_rank"][0]["memory"]
assert m["activations"] == m["peak"] == 2**63 - 1, m'

echo "cli_memory: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
