#!/bin/sh
# run.sh — the training benchmark: tpx-train on a random ~20M-non-embedding-
# parameter Llama (hidden 512, 8 layers, 8 heads, intermediate 1024, vocab
# 32000; 53.7M parameters with the untied embeddings), seq 256, batch 4, at
# (tp, dp_shard) = (1,1) (2,1) (2,2) (4,1) on the local backend (threads),
# tpx-train-ref (world 1 without the runtime) and, when torch + transformers
# import, torch eager f32 on CPU on the same checkpoint, batch and meshes
# (torch_step.py: DTensor TP + FSDP2 over gloo, one process per rank).
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
have_torch=0
python3 -c "import torch, transformers" 2>/dev/null && have_torch=1
tresults=""
trun() { # name tp dp
  if [ "$have_torch" = 1 ]; then
    echo "## torch $1 (eager f32, gloo, $cores threads in all)"
    tout=$(python3 "$here/torch_step.py" "$dir" "$dir/tokens.bin" 4 256 "$steps" "$cores" "$2" "$3" 2>&1 \
           | grep -E '^(torch step|RESULT|Traceback|[A-Za-z]*Error)' || true)
    echo "$tout"
    tok=$(echo "$tout" | sed -n 's/^RESULT .*tokens_s=\([0-9.]*\).*/\1/p')
    tresults="$tresults$1 ${tok:-failed}
"
  fi
}
[ "$have_torch" = 1 ] || echo "## torch: not importable, no baseline"
trun tp1-dp1 1 1
trun tp2-dp1 2 1
trun tp2-dp2 2 2
trun tp4-dp1 4 1
echo "## summary (tokens/s; collectives = share of rank 0's step; vs torch = tpx tokens/s over torch's, same mesh)"
printf '%s' "$results" | awk -v tr="$tresults" '
BEGIN { n = split(tr, L, "\n"); for (i = 1; i <= n; i++) { split(L[i], f, " "); if (f[1] != "") T[f[1]] = f[2] } }
{ t = ($1 in T) ? T[$1] : (($1 == "ref-world1") ? T["tp1-dp1"] : "");
  r = (t != "" && t != "failed" && $2 != "failed") ? sprintf("%.2fx", $2 / t) : "-";
  printf "  %-10s tpx %9s tokens/s  collectives %5s%%  torch %9s tokens/s  tpx/torch %s\n", $1, $2, $3, (t == "" ? "-" : t), r }'
