#!/bin/sh
# cli_fp8.sh — FP8 block-quantized checkpoints (docs/CHECKPOINT.md "FP8
# checkpoints"): a Qwen3 checkpoint whose Linear weights are stored F8_E4M3
# with `_scale_inv` block scales (tests/data/fp8/make_fp8.py, python3
# stdlib). `tpx plan --weights` plans the plugin's skeleton (no
# skeleton-fallback), counts those weights in bf16 (the dtype NeMo
# Automodel 0.7.0 dequantizes them into), lists no scale as a parameter and
# says so (`fp8-checkpoint`); F8_E8M0 scales the same. `tpx shard` cuts
# each F8 weight as stored with its scale whole in every rank file, on
# aligned and unaligned meshes, and `tpx merge` gives the checkpoint back
# byte for byte. The
# broken variants are refused by `tpx plan` naming the tensor: a scale of
# the wrong shape, a scale without its weight, an F8 weight without its
# scale, scales under a config without quantization_config, a
# weight_block_size other than upstream's 128.
# The MoE families served through NeMo Automodel's own classes (the
# automodel_moe plugin's skeleton, per-expert and fused expert tensors as
# stored sources): DeepSeek-V3 with 128 x 128 block scales, Mistral-4 with
# per-tensor / per-expert scales and activation scales: the plan of the FP8
# checkpoint is the plan of the same checkpoint in bf16 (parameters, bytes,
# per-rank bytes); `tpx shard` cuts the grouped expert parameters as F8
# from the F8 expert tensors (transposed), the scales whole, at dp_shard 4,
# 3 and ep 2, and `tpx merge` gives the checkpoint back byte for byte.
# Usage: cli_fp8.sh TPX SOURCE_DIR TPX_CKPT_TEST
set -u
tpx=$1
src=$2
tool=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-fp8.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
. "$src/tests/unit/checkpoint/cli_lib.sh"
has() { # WHAT TEXT...: $work/log holds each TEXT
  what=$1
  shift
  good=1
  for t in "$@"; do grep -qF -- "$t" "$work/log" || good=0; done
  if [ $good = 1 ]; then ok "$what"; else bad "$what"; fi
}
gen() { python3 "$src/tests/data/fp8/make_fp8.py" "$work/$1" "$1"; }

for v in ok e8m0 static scale-shape orphan no-scale no-qconfig; do
  run "generate the $v checkpoint" gen $v
done

# 2 layers x 7 Linear weights (256x256 + 2 x 128x256 + 256x256 + 3 x
# 384x256 = 491520 elements per layer) in bf16, plus embed, lm_head, norms.
W=$((2 * 491520))
REST=$((2 * 512 * 256 + 256 + 2 * (2 * 256 + 2 * 64)))
BYTES=$((2 * (W + REST)))
for v in ok e8m0; do
  d="$work/$v"
  "$tpx" plan --config "$d/config.json" --weights "$d" --tp 2 >"$work/log" 2>&1
  rc=$?
  [ $rc -eq 0 ] && ok "$v: tpx plan --weights succeeds" || bad "$v: tpx plan (exit $rc)"
  has "$v: the report says fp8-checkpoint, what upstream does and the bytes" \
    "[fp8-checkpoint] 14 weights are stored F8_E4M3" \
    "dequantizes each as it loads" "into bf16" "as trained" \
    "$(echo "$v" | sed 's/ok/F32/;s/e8m0/F8_E8M0/')"
  has "$v: the parameter count has no scale in it" "$((W + REST)) parameters"
  if grep -Eq "mlp\.down_proj\.weight +\[256, 384\] bf16 " "$work/log"; then
    ok "$v: the FP8 weights are bf16 parameters"
  else
    bad "$v: the FP8 weights are bf16 parameters"
  fi
  if grep -q "skeleton-fallback" "$work/log" ||
    grep -Eq "_scale_inv +\[" "$work/log"; then
    bad "$v: no skeleton fallback, no scale listed as a parameter"
  else
    ok "$v: no skeleton fallback, no scale listed as a parameter"
  fi
  run "$v: tpx plan --format json" "$tpx" plan --config "$d/config.json" --weights "$d" --format json
  has "$v: JSON total bytes are bf16's, fp8-checkpoint listed" \
    "\"total_bytes\": $BYTES" "\"fp8-checkpoint\""
done

# tpx shard cuts each F8 weight as stored, its scale whole in every rank
# file (replicate on every mesh dim), on meshes whose cuts fall inside
# 128-blocks too (dp_shard 3: 86 rows; tp 2 x dp_shard 3); tpx merge gives
# the source back byte for byte.
for mesh in "--tp 2" "--dp-shard 3" "--dp-shard 3 --tp 2" \
  "--dp-replicate 2 --dp-shard 2 --tp 2" "--dp-shard 5 --no-fsdp"; do
  r="$work/ranks"
  m="$work/merged"
  # shellcheck disable=SC2086
  run "$mesh: shard" "$tpx" shard --weights "$work/ok" $mesh --out "$r"
  has "$mesh: shard says how it cut the FP8 weights" \
    "14 FP8 weights cut as stored (F8), each with its _scale_inv whole"
  run "$mesh: F8 slices, whole scales" python3 -c '
import glob, json, struct, sys
files = sorted(glob.glob(sys.argv[1] + "/rank-*.safetensors"))
assert files
for f in files:
    with open(f, "rb") as fh:
        h = json.loads(fh.read(struct.unpack("<Q", fh.read(8))[0]))
    t = json.loads(h["__metadata__"]["tpx.tensors"])
    for name, e in h.items():
        if name.endswith("_proj.weight"):
            assert e["dtype"] == "F8_E4M3", (f, name, e)
        if name.endswith("_scale_inv"):
            assert e["dtype"] == "F32" and e["shape"] == t[name]["global_shape"]
            assert set(t[name]["placements"]) == {"replicate"}, (f, name)
' "$r"
  run "$mesh: merge" "$tpx" merge --in "$r" --out "$m"
  run "$mesh: merged file byte-identical" cmp "$work/ok/model.safetensors" \
    "$m/model.safetensors"
  rm -rf "$r" "$m"
done
# F8_E8M0 block scales; one scale per tensor with activation scales
# (written whole too, as upstream's Mistral-4 adapter drops them on load).
for v in e8m0 static; do
  run "$v --dp-shard 3 --tp 2: shard" "$tpx" shard --weights "$work/$v" \
    --dp-shard 3 --tp 2 --out "$work/r-$v"
  run "$v --dp-shard 3 --tp 2: merge" "$tpx" merge --in "$work/r-$v" \
    --out "$work/m-$v"
  run "$v --dp-shard 3 --tp 2: merged file byte-identical" cmp \
    "$work/$v/model.safetensors" "$work/m-$v/model.safetensors"
done
"$tpx" plan --config "$work/static/config.json" --weights "$work/static" \
  >"$work/log" 2>&1
has "static: one scale per tensor, activation scales not parameters" \
  "14 weights are stored F8_E4M3" "one scale per tensor or expert" \
  "$((W + REST)) parameters"

"$tpx" plan --config "$work/scale-shape/config.json" --weights "$work/scale-shape" >"$work/log" 2>&1
rc=$?
refused "plan: a scale of the wrong shape is refused, named" \
  "model.layers.0.self_attn.q_proj.weight_scale_inv" "[2, 3] F32" \
  "needs [2, 2]" "128 x 128 blocks"
"$tpx" plan --config "$work/orphan/config.json" --weights "$work/orphan" >"$work/log" 2>&1
rc=$?
refused "plan: a scale without its weight is refused, named" \
  "model.layers.0.mlp.extra_proj.weight_scale_inv" \
  "its weight 'model.layers.0.mlp.extra_proj.weight' is not stored"
"$tpx" plan --config "$work/no-scale/config.json" --weights "$work/no-scale" >"$work/log" 2>&1
rc=$?
refused "plan: an F8 weight without its scale is refused, named" \
  "model.layers.1.mlp.down_proj.weight' is stored F8_E4M3 without its scale"
"$tpx" plan --config "$work/no-qconfig/config.json" --weights "$work/no-qconfig" >"$work/log" 2>&1
rc=$?
refused "plan: scales under a config without quantization_config refused" \
  "has no quantization_config.quant_method" "unscaled"
tr -d '\n' <"$work/ok/config.json" |
  sed 's/"weight_block_size": *\[ *128, *128 *\]/"weight_block_size": [64, 64]/' \
    >"$work/ok/config64.json"
"$tpx" plan --config "$work/ok/config64.json" --weights "$work/ok" \
  >"$work/log" 2>&1
rc=$?
refused "plan: a weight_block_size other than 128 x 128 is refused" \
  "weight_block_size is [64, 64]" "128 x 128 blocks"

for fs in deepseek_v3:block mistral4:tensor; do
  fam=${fs%%:*}
  f="$work/$fam"
  run "$fam: lists" python3 "$src/tests/data/fp8/make_fp8.py" list \
    "$src/tests/data/upstream_moe/$fam" "$f" "${fs#*:}"
  mkdir -p "$f/bf16" "$f/fp8"
  run "$fam: generate bf16" "$tool" gen-list \
    "$src/tests/data/upstream_moe/$fam/config.json" "$f/list-bf16" "$f/bf16"
  run "$fam: generate fp8" "$tool" gen-list "$f/config.json" "$f/list-fp8" \
    "$f/fp8"
  for v in bf16 fp8; do
    "$tpx" plan --config "$f/$v/config.json" --weights "$f/$v" --dp-shard 4 \
      --format json >"$f/$v.json" 2>&1
    "$tpx" plan --config "$f/$v/config.json" --weights "$f/$v" --dp-shard 4 \
      >"$f/$v.txt" 2>&1
  done
  cp "$f/fp8.txt" "$work/log"
  has "$fam: fp8-checkpoint said, skeleton used" "[fp8-checkpoint]" \
    "skeleton, checked against the safetensors headers"
  if python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda r: (r["model"]["total_params"], r["model"]["total_bytes"],
                 [x.get("param_bytes") for x in r.get("per_rank", [])])
sys.exit(key(a) != key(b))' "$f/bf16.json" "$f/fp8.json" >"$work/log" 2>&1; then
    ok "$fam: the FP8 plan counts what the bf16 plan counts"
  else
    bad "$fam: the FP8 plan counts what the bf16 plan counts"
  fi
  for mesh in "--dp-shard 4" "--dp-shard 3" "--ep 2 --dp-shard 4"; do
    # shellcheck disable=SC2086
    run "$fam $mesh: shard" "$tpx" shard --weights "$f/fp8" $mesh \
      --out "$f/ranks"
    run "$fam $mesh: grouped experts cut as F8 from the F8 experts" python3 -c '
import glob, json, struct, sys
n = 0
for f in sorted(glob.glob(sys.argv[1] + "/rank-*.safetensors")):
    with open(f, "rb") as fh:
        h = json.loads(fh.read(struct.unpack("<Q", fh.read(8))[0]))
    t = json.loads(h["__metadata__"]["tpx.tensors"])
    for name, e in t.items():
        if "fold" in e and ".experts." in name:
            assert h[name]["dtype"] == "F8_E4M3", (f, name, h[name])
            n += 1
assert n, "no grouped expert parameter"
' "$f/ranks"
    run "$fam $mesh: merge" "$tpx" merge --in "$f/ranks" --out "$f/merged"
    run "$fam $mesh: merged file byte-identical" cmp \
      "$f/fp8/model.safetensors" "$f/merged/model.safetensors"
    rm -rf "$f/ranks" "$f/merged"
  done
done

finish
