#!/bin/sh
# cli_transposed.sh — `tpx shard` + `tpx merge` of a checkpoint whose model
# holds its experts as NeMo Automodel does (experts.gate_and_up_projs
# [E, H, 2I], experts.down_projs [E, I, H]) while the Hugging Face
# checkpoint stores them per expert, transposed (the test plugin
# moe_plugin/moe.c declares the sources; Qwen3-MoE's shapes: E 8, H 64,
# I 32, bf16): each rank file's expert slice holds the transposed per-expert
# tensors (check_expert_slices.py), the merge is byte-identical to the
# source (cmp), at dp_shard 2, 3 (uneven) and 4, and in f32 at 3; a source
# stored the wrong way round is refused naming it; the report and the
# conformance harness say what the plugin declared.
# Usage: cli_transposed.sh TPX TPX_CKPT_TEST SOURCE_DIR PLUGIN_DIR [FLAG...]
# Extra flags go to every `tpx shard` (e.g. --ep 2); TPX_TEST_DP_SHARDS
# (default "2 3 4") lists the dp_shard sizes to cut.
set -u
tpx=$1
tool=$2
src=$3
export TPX_PLUGIN_PATH=$4
shift 4
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-transposed.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
. "$src/tests/unit/checkpoint/cli_lib.sh"

# The config: Qwen3-MoE's tiny one, served by the test plugin.
cfg="$work/config.json"
sed -e 's/"Qwen3MoeForCausalLM"/"TpxTestMoeForCausalLM"/' \
  -e 's/"qwen3_moe"/"tpxtest_moe"/' \
  "$src/tests/data/upstream_moe/qwen3_moe/config.json" >"$cfg"
E=8 H=64 I=32 V=512 L=3 HD=16
so="$TPX_PLUGIN_PATH/libtpxtest_moe.so"

# The conformance harness counts the sources, and fails a skeleton whose
# sources leave part of a parameter out.
run "check-plugin: the skeleton's stored sources counted" sh -c \
  '"$1" check-plugin "$2" --config "$3" | grep -q "72 stored sources (72 transposed)"' \
  sh "$tpx" "$so" "$cfg"
sed 's/"tie_word_embeddings"/"tpxtest_bad_source": "gap", &/' "$cfg" \
  >"$work/gap.json"
"$tpx" check-plugin "$so" --config "$work/gap.json" >"$work/log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "FAIL skeleton.*do not tile.*gate_and_up_projs" \
  "$work/log"; then
  ok "check-plugin: sources that do not tile fail the skeleton check"
else
  echo "    (exit $rc)"
  bad "check-plugin: sources that do not tile fail the skeleton check"
fi
list() { # [SWAP_DOWN]: the HF tensors (down_proj of expert 1 the wrong way)
  echo "model.embed_tokens.weight BF16 $V $H"
  echo "model.norm.weight BF16 $H"
  echo "lm_head.weight BF16 $V $H"
  l=0
  while [ $l -lt $L ]; do
    p="model.layers.$l"
    echo "$p.input_layernorm.weight BF16 $H"
    echo "$p.post_attention_layernorm.weight BF16 $H"
    echo "$p.self_attn.q_proj.weight BF16 $((4 * HD)) $H"
    echo "$p.self_attn.k_proj.weight BF16 $((2 * HD)) $H"
    echo "$p.self_attn.v_proj.weight BF16 $((2 * HD)) $H"
    echo "$p.self_attn.o_proj.weight BF16 $H $((4 * HD))"
    echo "$p.self_attn.q_norm.weight BF16 $HD"
    echo "$p.self_attn.k_norm.weight BF16 $HD"
    echo "$p.mlp.gate.weight BF16 $E $H"
    e=0
    while [ $e -lt $E ]; do
      echo "$p.mlp.experts.$e.gate_proj.weight BF16 $I $H"
      echo "$p.mlp.experts.$e.up_proj.weight BF16 $I $H"
      if [ "${1:-}" = swap ] && [ $e = 1 ]; then
        echo "$p.mlp.experts.$e.down_proj.weight BF16 $I $H"
      else
        echo "$p.mlp.experts.$e.down_proj.weight BF16 $H $I"
      fi
      e=$((e + 1))
    done
    l=$((l + 1))
  done
}

s="$work/src"
mkdir -p "$s"
list >"$work/list"
run "generate the per-expert checkpoint" "$tool" gen-list "$cfg" \
  "$work/list" "$s"
run "tpx plan --weights: the report says the experts are stored transposed" \
  sh -c '"$1" plan --config "$2/config.json" --weights "$2" --dp-shard 2 | grep -q "Stored transposed"' \
  sh "$tpx" "$s"
check="$src/tests/unit/checkpoint/check_expert_slices.py"
for dp in ${TPX_TEST_DP_SHARDS:-2 3 4}; do
  r="$work/ranks-$dp"
  shard_merge "dp_shard $dp${*:+ $*}" "$s" "$r" "$check" \
    "expert slices hold the transposed tensors" --dp-shard "$dp" "$@"
  if grep -q '\\"transpose\\":true' "$r"/rank-00000-of-*.safetensors; then
    ok "dp_shard $dp: the fold lists say transpose"
  else
    echo "no \"transpose\":true in rank 0's metadata" >"$work/log"
    bad "dp_shard $dp: the fold lists say transpose"
  fi
  rm -rf "$r"
done

# f32 (config and tensors), dp_shard 3.
sed 's/"bfloat16"/"float32"/' "$cfg" >"$work/cfg32.json"
f="$work/src32"
mkdir -p "$f"
list | sed 's/ BF16 / F32 /' >"$work/list32"
run "f32: generate" "$tool" gen-list "$work/cfg32.json" "$work/list32" "$f"
shard_merge "f32 dp_shard 3" "$f" "$work/r32" "$check" \
  "expert slices hold the transposed tensors" --dp-shard 3 "$@"
rm -rf "$f" "$work/r32"

# The header check: a transposed source stored the wrong way round.
w="$work/swapped"
mkdir -p "$w"
list swap >"$work/list-swap"
run "generate a checkpoint with one down_proj untransposed" "$tool" gen-list \
  "$cfg" "$work/list-swap" "$w"
"$tpx" shard --weights "$w" --dp-shard 2 --out "$work/ranks-swap" "$@" \
  >"$work/log" 2>&1
rc=$?
refused "an untransposed source is refused, named" \
  "model.layers.0.mlp.experts.1.down_proj.weight" "transposed"

finish
