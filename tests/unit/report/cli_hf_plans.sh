#!/bin/sh
# cli_hf_plans.sh — issue 26: every base_model_tp_plan of transformers 5.25
# is bundled (core/src/model/hf_conversion/tp_plans.json, embedded by
# core/src/select/embed_hf_plans.py), so `--plan hf` applies the model's
# own plan for model types that had no hand-kept table (olmo2, starcoder2,
# cohere: tests/data/upstream/<type>), checked on a few placements.
# Usage: cli_hf_plans.sh TPX_BINARY SOURCE_DIR
set -u
tpx=$1
src=$2
if ! command -v python3 >/dev/null 2>&1; then
  echo "cli_hf_plans: no python3, skipped"
  exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/tpx-cli.XXXXXX")
dir=$(mktemp -d "${TMPDIR:-/tmp}/tpx-hfp.XXXXXX")
trap 'rm -f "$out"; rm -rf "$dir"' EXIT INT TERM
. "$(dirname "$0")/cli_lib.sh"

for t in olmo2 starcoder2 cohere; do
  PYTHONDONTWRITEBYTECODE=1 python3 - "$src" "$src/tests/data/upstream/$t" \
    "$dir/$t" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], 'tools', 'upstream'))
import compare
os.mkdir(sys.argv[3])
recipe = json.load(open(os.path.join(sys.argv[2], 'recipe.json')))
compare.write_sparse_safetensors(os.path.join(sys.argv[3], 'model.safetensors'),
                                 recipe['tensors'])
PY
done

run_hf() {
  expect 0 "$1 --plan hf" -- --config "$src/tests/data/upstream/$1/config.json" \
    --weights "$dir/$1" --tp 2 --no-isolation --plan hf
  has "Plan: custom (function get_hf_tp_shard_plan)" "$1: the HF plan is applied"
  has "used the bundled $2.base_model_tp_plan (model_type '$1')" \
    "$1: transformers' own table"
}

run_hf olmo2 Olmo2Config
has "model.layers.{0..1}.self_attn.q_proj.weight            [64, 64] bf16   colwise  tp=shard(0)" \
  "olmo2: q_proj colwise"
has "model.layers.{0..1}.mlp.down_proj.weight               [64, 128] bf16  rowwise  tp=shard(1)" \
  "olmo2: down_proj rowwise"
has "model.layers.{0..1}.self_attn.q_norm.weight            [64] bf16       -        tp=replicate" \
  "olmo2: q_norm replicated (replicated_with_grad_allreduce)"
has "model.embed_tokens.weight                              [512, 64] bf16  rowwise  tp=shard(0)" \
  "olmo2: embedding_rowwise"

run_hf starcoder2 Starcoder2Config
has "model.layers.{0..1}.mlp.c_fc.weight                  [128, 64] bf16  colwise  tp=shard(0)" \
  "starcoder2: c_fc colwise"
has "model.layers.{0..1}.mlp.c_fc.bias                    [128] bf16      colwise  tp=shard(0)" \
  "starcoder2: c_fc bias sharded with it"
has "model.layers.{0..1}.mlp.c_proj.weight                [64, 128] bf16  rowwise  tp=shard(1)" \
  "starcoder2: c_proj rowwise"

run_hf cohere CohereConfig
has "self_attn.o_proj.weight" "cohere: o_proj listed"
has "rowwise  tp=shard(1)" "cohere: a rowwise placement"

# By default the same model falls back to the default plan, as upstream
# does, and the style that forced it is named (the class plan's lm_head
# colwise_gather_output comes first).
expect 0 "starcoder2 default" -- \
  --config "$src/tests/data/upstream/starcoder2/config.json" \
  --weights "$dir/starcoder2" --tp 2 --no-isolation
has "warning [hf-style-unsupported]" "starcoder2 default: falls back"
has "Hugging Face style 'colwise_gather_output' has no faithful translation" \
  "starcoder2 default: names the style"

echo "cli_hf_plans: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
