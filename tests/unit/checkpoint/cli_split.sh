#!/bin/sh
# cli_split.sh — `tpx shard` + `tpx merge` of a checkpoint whose fused
# tensors the model holds cut into several parameters (transformers' Split;
# the test plugin split_plugin/split.c declares them with
# host->skeleton_add_split_source): q/k/v from self_attn.qkv_proj (dim 0,
# uneven parts), gate/up from mlp.gate_up_proj (dim 0), down_lo/down_hi
# from mlp.down_proj (dim 1). A real checkpoint of distinct values
# (tpx-ckpt-test gen-list), bf16, at dp_shard 2, 3 (uneven) and 4, tp 2
# (colwise q/k/v/gate/up, rowwise down_lo/down_hi: dim-1 slices of the
# dim-1 split), dp_shard 3 x tp 2, the plugin in this process (the others
# run it isolated: the parts cross the child's pipe), and f32 at dp_shard 3:
# each rank's slice is the stored tensor at the parameter's offset
# (check_split_slices.py), the merge is byte-identical (cmp); the report
# says which tensors are split; a stored tensor whose shape is not the sum
# of its parts and a declaration that leaves a row to no parameter are
# refused, naming the tensor and parameters.
# Usage: cli_split.sh TPX TPX_CKPT_TEST SOURCE_DIR PLUGIN_DIR
set -u
tpx=$1
tool=$2
src=$3
export TPX_PLUGIN_PATH=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-split.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
. "$src/tests/unit/checkpoint/cli_lib.sh"

H=64 HEADS=4 KV=2 HD=16 I=40 V=256 L=2
cfg="$work/config.json"
cat >"$cfg" <<JSON
{"architectures": ["TpxTestSplitForCausalLM"], "model_type": "tpxtest_split",
 "hidden_size": $H, "intermediate_size": $I, "num_hidden_layers": $L,
 "num_attention_heads": $HEADS, "num_key_value_heads": $KV,
 "vocab_size": $V, "torch_dtype": "bfloat16", "tie_word_embeddings": false}
JSON
list() { # [short]: qkv_proj of layer 1 one row short
  echo "model.embed_tokens.weight BF16 $V $H"
  echo "model.norm.weight BF16 $H"
  echo "lm_head.weight BF16 $V $H"
  l=0
  while [ $l -lt $L ]; do
    p="model.layers.$l"
    rows=$(((HEADS + 2 * KV) * HD))
    if [ "${1:-}" = short ] && [ $l = 1 ]; then rows=$((rows - 1)); fi
    echo "$p.input_layernorm.weight BF16 $H"
    echo "$p.post_attention_layernorm.weight BF16 $H"
    echo "$p.self_attn.qkv_proj.weight BF16 $rows $H"
    echo "$p.self_attn.o_proj.weight BF16 $H $((HEADS * HD))"
    echo "$p.mlp.gate_up_proj.weight BF16 $((2 * I)) $H"
    echo "$p.mlp.down_proj.weight BF16 $H $I"
    l=$((l + 1))
  done
}

s="$work/src"
check="$src/tests/unit/checkpoint/check_split_slices.py"
mkdir -p "$s"
list >"$work/list"
run "generate the fused checkpoint" "$tool" gen-list "$cfg" "$work/list" "$s"
run "tpx plan --weights: the report says which tensors are split" \
  sh -c '"$1" plan --config "$2/config.json" --weights "$2" --tp 2 | grep -q "Stored split: 6 checkpoint tensors"' \
  sh "$tpx" "$s"
run "tpx plan --json: model.stored_split" \
  sh -c '"$1" plan --config "$2/config.json" --weights "$2" --format json | grep -q "\"stored_split\""' \
  sh "$tpx" "$s"
for mesh in "--dp-shard 2" "--dp-shard 3" "--dp-shard 4" "--tp 2" \
  "--dp-shard 3 --tp 2" "--dp-shard 2 --no-isolation"; do
  # shellcheck disable=SC2086
  shard_merge "$mesh" "$s" "$work/ranks" "$check" \
    "each rank's slice is the stored tensor at its offset" $mesh
  rm -rf "$work/ranks"
done

# Rank files whose "fold" moves k_proj one row up in qkv_proj (every rank,
# so they agree): the merge refuses the overlap, naming the tensor and both
# parameters.
run "dp_shard 2: shard for a bad fold" "$tpx" shard --weights "$s" \
  --dp-shard 2 --out "$work/r-fold"
for f in "$work"/r-fold/rank-*.safetensors; do
  LC_ALL=C sed 's/\\"offsets\\":\[-64,0\]/\\"offsets\\":[-63,0]/' "$f" \
    >"$f.bad" && mv "$f.bad" "$f"
done
"$tpx" merge --in "$work/r-fold" --out "$work/m-fold" >"$work/log" 2>&1
rc=$?
refused "merge: parts of a stored tensor that overlap are refused, named" \
  "model.layers.0.self_attn.qkv_proj.weight" \
  "model.layers.0.self_attn.q_proj.weight" \
  "model.layers.0.self_attn.k_proj.weight" "overlap"
rm -rf "$work/r-fold" "$work/m-fold"

# f32 (config and tensors), dp_shard 3.
sed 's/"bfloat16"/"float32"/' "$cfg" >"$work/cfg32.json"
f="$work/src32"
mkdir -p "$f"
list | sed 's/ BF16 / F32 /' >"$work/list32"
run "f32: generate" "$tool" gen-list "$work/cfg32.json" "$work/list32" "$f"
shard_merge "f32 dp_shard 3" "$f" "$work/r32" "$check" slices --dp-shard 3
rm -rf "$f" "$work/r32"

# The header check: a stored tensor that is not the sum of its parts.
w="$work/short"
mkdir -p "$w"
list short >"$work/list-short"
run "generate a checkpoint with qkv_proj one row short" "$tool" gen-list \
  "$cfg" "$work/list-short" "$w"
"$tpx" shard --weights "$w" --dp-shard 2 --out "$work/ranks-short" \
  >"$work/log" 2>&1
rc=$?
refused "a stored tensor of the wrong shape is refused, named" \
  "model.layers.1.self_attn.qkv_proj.weight" "model.layers.1.self_attn.q_proj.weight" \
  "[127, 64]"

# A declaration leaving a row of qkv_proj to no parameter: the conformance
# harness fails the skeleton, naming the tensor and the parameter after the
# gap; without it, it counts the parts.
run "check-plugin: the skeleton's split sources counted" sh -c \
  '"$1" check-plugin "$2" --config "$3" | grep -q "14 stored sources (0 transposed, 14 parts of split tensors)"' \
  sh "$tpx" "$TPX_PLUGIN_PATH/libtpxtest_split.so" "$cfg"
sed 's/"tie_word_embeddings"/"tpxtest_bad_split": "gap", &/' "$cfg" \
  >"$work/gap.json"
"$tpx" check-plugin "$TPX_PLUGIN_PATH/libtpxtest_split.so" \
  --config "$work/gap.json" >"$work/log" 2>&1
rc=$?
refused "parts that leave a gap are refused, naming the tensor and parameters" \
  "model.layers.0.self_attn.qkv_proj.weight" \
  "model.layers.0.self_attn.k_proj.weight" "[64:65)"

# transformers' Split applied by the conversion rules: lara_mini's
# linear_attn.in_proj [200, 64] cut into in_proj_qkv / _z / _b / _a (no
# plugin: the module tree from the headers), its shapes from the recorded
# upstream recipe, through tpx shard and tpx merge.
lara="$src/tests/data/upstream/lara_mini"
python3 -c '
import json, sys
for n, dt, sh in json.load(open(sys.argv[1]))["tensors"]:
    print(n, dt.upper(), *sh)' "$lara/recipe.json" >"$work/lara.list"
ls="$work/lara"
mkdir -p "$ls"
run "lara_mini: generate" "$tool" gen-list "$lara/config.json" \
  "$work/lara.list" "$ls"
for mesh in "--dp-shard 3" "--tp 2" "--dp-shard 2 --tp 2"; do
  # shellcheck disable=SC2086
  shard_merge "lara_mini $mesh" "$ls" "$work/lr" "$check" \
    "slices of in_proj" $mesh
  rm -rf "$work/lr"
done

finish
