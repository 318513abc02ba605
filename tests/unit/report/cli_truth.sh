#!/bin/sh
# cli_truth.sh — what `tpx plan` says is true (issue 28): no per-rank head
# count for a split tp cannot make; a Diagnostics count that says how many
# lines follow; the training peak on the verdict screen when --seq is given;
# OLMo-2's whole-width q/k norms under a column-wise q/k. Usage: cli_truth.sh TPX_BINARY SOURCE_DIR
set -u
tpx=$1
src=$2
cfg="$src/tests/data/configs"
out=$(mktemp "${TMPDIR:-/tmp}/tpx-cli.XXXXXX")
trap 'rm -f "$out"' EXIT INT TERM
. "$(dirname "$0")/cli_lib.sh"

# 14 heads, 2 kv heads at tp 4: heads-not-divisible, so no per-rank count.
expect 1 "qwen2.5 tp4" -- --config "$cfg/Qwen2.5-0.5B/config.json" --tp 4
has "Attention: 14 heads, 2 kv heads, head_dim 64; tp 4 cannot split them per rank (heads-not-divisible)" "no impossible split"
lacks "per rank after TP: 3 heads" "no 3 heads, 0 kv heads"
expect 0 "qwen2.5 tp2" -- --config "$cfg/Qwen2.5-0.5B/config.json" --tp 2
has "per rank after TP: 7 heads, 1 kv heads" "a split that happens is shown"
# the JSON report likewise: no local counts for tp 4, 7 and 1 for tp 2
expect 1 "qwen2.5 tp4 json" -- --config "$cfg/Qwen2.5-0.5B/config.json" --tp 4 --format json
has '"local_attention_heads": null' "json: no impossible split"
has '"local_key_value_heads": null' "json: no impossible kv split"
expect 0 "qwen2.5 tp2 json" -- --config "$cfg/Qwen2.5-0.5B/config.json" --tp 2 --format json
has '"local_attention_heads": 7' "json: a split that happens is shown"

# Two optional keys share one line: the count says so.
expect 0 "llama tp2" -- --config "$cfg/Llama-3.2-1B/config.json" --tp 2
has "Diagnostics (2, on 1 line):" "the count matches the lines"
lacks "Diagnostics (2):" "not a bare 2 over one line"

# D14: with --seq the verdict's peak is the training peak of the table
# below (and --summary shows it), not the parameter memory.
L70="$cfg/Llama-3.1-70B/config.json"
expect 0 "70b tp8 cp8 seq 131072" -- --config "$L70" --tp 8 --cp 8 \
  --dp-shard 1 --seq 131072
has "training peak 222.05 GiB (rank 0, batch 1 x seq 131072, with gradients, optimizer and activations)" "verdict: the training peak"
has "  0-63              2.05 GiB    4.11 GiB   12.32 GiB   862.6 MiB  202.72 GiB  222.05 GiB" "the table's peak is the same"
lacks ", peak 2.90 GiB while FSDP units are gathered" "not the parameter peak"
expect 0 "70b --summary" -- --config "$L70" --tp 8 --cp 8 --dp-shard 1 \
  --seq 131072 --summary
has "training peak 222.05 GiB" "--summary shows the training peak"
expect 0 "70b --summary --offload" -- --config "$L70" --tp 8 --cp 8 \
  --dp-shard 1 --seq 131072 --summary --offload
has "training peak 203.57 GiB on the device" "offload: the device peak"
expect 0 "70b without --seq" -- --config "$L70" --tp 8 --summary
has "while FSDP units are gathered" "without --seq: the parameter peak, so named"

# D16: OLMo-2's q_norm / k_norm normalise over all heads (width hidden);
# the default plan shards q/k_proj column-wise: an error with the fix, and
# an info that upstream does the same without a word. The checkpoint is
# header-true and sparse (no data written).
olmo="$src/tests/data/report/OLMo-2-0425-1B/config.json"
wdir=$(mktemp -d "${TMPDIR:-/tmp}/tpx-olmo.XXXXXX")
trap 'rm -f "$out"; rm -rf "$wdir"' EXIT INT TERM
if python3 "$src/tests/unit/report/gen_olmo2.py" "$olmo" "$wdir"; then
  expect 1 "olmo2 tp4" -- --config "$olmo" --weights "$wdir" --tp 4
  has "error [qk-norm-whole-width] 'model.layers.*.self_attn.q_norm' (16 modules) normalises over the whole output width 2048 of the colwise 'model.layers.*.self_attn.q_proj', whose output is sharded over tp 4 (512 per rank)" "q_norm refused"
  has "error [qk-norm-whole-width] 'model.layers.*.self_attn.k_norm' (16 modules)" "k_norm refused"
  has "colwise_rep" "the fix names transformers' plan"
  has "info [upstream-qk-norm-whole-width] upstream applies this plan as it is, without a word" "upstream's silence noted"
  lacks "partial-grad-replicated" "not a per-head norm"
  expect 0 "olmo2 tp1" -- --config "$olmo" --weights "$wdir" --tp 1
  lacks "qk-norm-whole-width" "nothing at tp 1"
else
  echo "skip: olmo2 (no python3)"
fi

echo "$n checks, $fails failed"
[ "$fails" -eq 0 ]
