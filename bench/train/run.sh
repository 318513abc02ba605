#!/bin/sh
# run.sh — the training benchmark: tpx-train on a random ~20M-non-embedding-
# parameter Llama (hidden 512, 8 layers, 8 heads, intermediate 1024, vocab
# 32000; 53.7M parameters with the untied embeddings), seq 256, batch 4, at
# (tp, dp_shard) = (1,1) (2,1) (2,2) (4,1) on the local backend (threads),
# tpx-train-ref (world 1 without the runtime) and, when torch + transformers
# import, torch eager f32 on CPU at world 1 on the same checkpoint and batch.
# Prints tokens/s, the share of the step in collectives and the ratios.
# usage: bench/train/run.sh [BUILD_DIR] [STEPS]   (default build, 2 steps;
# the first step is warm-up and not counted). Never fails on timing.
set -eu
build=${1:-build}
steps=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
train=$build/examples/train/tpx-train
ref=$build/examples/train/tpx-train-ref
gen=$build/bench/train/tpx-bench-train-model
for b in "$train" "$ref" "$gen"; do
  [ -x "$b" ] || { echo "run.sh: $b not built" >&2; exit 2; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/tpx-bench-train.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
"$gen" "$dir" 512 8 8 8 1024 32000 4 256
cores=$(nproc)
common="--model $dir --tokens $dir/tokens.bin --batch 4 --seq 256 --steps $steps --lr 1e-4 --clip 1.0"
results=""
run() { # name world binary args...
  name=$1 world=$2 bin=$3
  shift 3
  th=$((cores / world)); [ "$th" -ge 1 ] || th=1
  echo "## $name (OPENBLAS_NUM_THREADS=$th per rank)"
  if out=$(OPENBLAS_NUM_THREADS=$th "$bin" $common "$@" 2>&1); then
    echo "$out"
    line=$(echo "$out" | grep '^throughput' || true)
    tok=$(echo "$line" | sed -n 's/^throughput \([0-9.]*\) tokens.*/\1/p')
    coll=$(echo "$line" | sed -n 's/.*collectives \([0-9.]*\)%.*/\1/p')
    results="$results$name $tok $coll
"
  else
    echo "$out" | tail -3
    results="$results$name failed -
"
  fi
}
run "ref-world1" 1 "$ref"
run "tp1-dp1" 1 "$train"
run "tp2-dp1" 2 "$train" --tp 2
run "tp2-dp2" 4 "$train" --tp 2 --dp-shard 2
run "tp4-dp1" 4 "$train" --tp 4
torch_tok=""
if python3 -c "import torch, transformers" 2>/dev/null; then
  echo "## torch eager f32, world 1 ($cores threads)"
  tout=$(python3 "$here/torch_step.py" "$dir" "$dir/tokens.bin" 4 256 "$steps" "$cores" 2>&1 | grep -v '^Loading' || true)
  echo "$tout"
  torch_tok=$(echo "$tout" | sed -n 's/^RESULT .*tokens_s=\([0-9.]*\).*/\1/p')
else
  echo "## torch: not importable, no baseline"
fi
echo "## summary (tokens/s; collectives = share of rank 0's step; ratio = tokens/s over torch world 1)"
printf '%s' "$results" | awk -v t="$torch_tok" '
{ r = (t != "" && $2 != "failed") ? sprintf("%.2fx", $2 / t) : "-";
  printf "  %-10s %10s tokens/s  collectives %5s%%  vs torch %s\n", $1, $2, $3, r }
END { if (t != "") printf "  %-10s %10s tokens/s  (torch eager f32 CPU, world 1)\n", "torch", t }'
