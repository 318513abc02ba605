#!/bin/sh
# run.sh — the training benchmark, run fairly. tpx-train against torch eager
# f32 on the same random ~54M-parameter Llama (hidden 512, 8 layers, 8
# heads, intermediate 1024, vocab 32000, untied), the same token batch
# (4 x 256) and the same AdamW + clipping, at world 1 and at tp 2 (tpx: the
# local backend, ranks as threads; torch: gloo, one process per rank).
#
# Fairness rules (bench/README.md "Training"):
# - the same threads per rank on both sides (cores / world: BLAS, OpenMP
#   and torch's intra-op pool), the first (warm-up) step excluded on both;
# - torch is parallelised by NeMo Automodel's own fsdp2_strategy_parallelize
#   when nemo_automodel imports, else by the hand-written DTensor plan of
#   torch_step.py; the report says which;
# - PAIRS interleaved A/B pairs per mesh (tpx then torch, then again), each
#   figure the median with its min-max; the load average before and after,
#   and "NOISY" when either exceeds the core count (not a result then).
# It prints the ratios issue 19 names: world-1 tpx/torch, the share of the
# machine's measured sgemm peak (sgemm_peak.py; FLOP per token stated),
# tp2 over world 1 for tpx, and tp2 tpx/torch.
# usage: bench/train/run.sh [BUILD_DIR] [PAIRS] [STEPS]   (5 pairs, 3 steps)
# PYTHON names an interpreter with torch + transformers (default python3).
# Never fails on timing; exits 2 when a binary is not built.
set -eu
build=${1:-build}
pairs=${2:-5}
steps=${3:-3}
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
train=$build/examples/train/tpx-train
gen=$build/bench/train/tpx-bench-train-model
for b in "$train" "$gen"; do
  [ -x "$b" ] || { echo "run.sh: $b not built" >&2; exit 2; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/tpx-bench-train.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
H=512 L=8 NH=8 KV=8 I=1024 V=32000 B=4 T=256
"$gen" "$dir" $H $L $NH $KV $I $V $B $T >/dev/null
cores=$(nproc)
loadavg() { cut -d' ' -f1 /proc/loadavg; }

# FLOP per trained token: 6 x the matmul parameters (q, k, v, o, gate, up,
# down per layer, and lm_head; the embedding is a lookup) plus attention's
# QK^T and AV, 2 x 2 x T x H per layer forward, x3 for forward + backward,
# counted over the whole T x T square as the kernels compute it.
flops=$(awk -v h=$H -v l=$L -v kv=$KV -v nh=$NH -v i=$I -v v=$V -v t=$T 'BEGIN {
  kvd = h / nh * kv
  mm = l * (2 * h * h + 2 * h * kvd + 3 * h * i) + h * v
  printf "%.0f", 6 * mm + 12 * l * t * h }')

have_torch=0
"$py" -c "import torch, transformers" 2>/dev/null && have_torch=1
impl=none
if [ "$have_torch" = 1 ]; then
  impl=$("$py" "$here/torch_step.py" --which 2>/dev/null)
fi

echo "machine: $cores cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "model: hidden $H, $L layers, $NH heads ($KV kv), intermediate $I," \
     "vocab $V; batch $B x seq $T; $steps steps per run (first excluded)"
echo "torch side: $impl"
peak=""
if "$py" -c "import numpy" 2>/dev/null; then
  line=$("$py" "$here/sgemm_peak.py" "$cores")
  echo "$line"
  peak=$(echo "$line" | sed -n 's/^SGEMM gflops=\([0-9.]*\).*/\1/p')
fi
load_before=$(loadavg)
echo "load average before: $load_before"

# tpx-train's element-wise loops run on OpenMP threads beside OpenBLAS's
# own pthreads: with libgomp's default active wait, an idle OpenMP worker
# spins through the GEMMs on a core the BLAS needs (bench/README.md
# "Training"). Passive: it sleeps instead. The caller's setting wins.
omp_wait=${OMP_WAIT_POLICY:-passive}
echo "tpx side: OMP_WAIT_POLICY=$omp_wait"

rec=$dir/records
: >"$rec"
tpx_run() { # series world args...
  series=$1 world=$2
  shift 2
  th=$((cores / world)); [ "$th" -ge 1 ] || th=1
  out=$(OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th OMP_WAIT_POLICY=$omp_wait \
        "$train" --model "$dir" \
        --tokens "$dir/tokens.bin" --batch $B --seq $T --steps "$steps" \
        --lr 1e-4 --clip 1.0 "$@" 2>&1) || { echo "$series failed" >>"$rec"; \
        echo "  $series: failed: $(echo "$out" | tail -1)"; return 0; }
  tok=$(echo "$out" | sed -n 's/^throughput \([0-9.]*\) tokens.*/\1/p')
  coll=$(echo "$out" | sed -n 's/.*collectives \([0-9.]*\)%.*/\1/p')
  echo "$series ${tok:-failed}" >>"$rec"
  echo "$series-coll ${coll:-failed}" >>"$rec"
  echo "  $series: $tok tokens/s (collectives $coll%)"
}
torch_run() { # series tp
  [ "$have_torch" = 1 ] || return 0
  out=$("$py" "$here/torch_step.py" "$dir" "$dir/tokens.bin" $B $T "$steps" \
        "$cores" "$2" 1 2>&1 || true)
  tok=$(echo "$out" | sed -n 's/^RESULT .*tokens_s=\([0-9.]*\).*/\1/p')
  echo "$1 ${tok:-failed}" >>"$rec"
  [ -n "$tok" ] && echo "  $1: $tok tokens/s" \
    || echo "  $1: failed: $(echo "$out" | tail -1)"
}
for p in $(seq "$pairs"); do
  echo "## pair $p of $pairs (load $(loadavg))"
  tpx_run tpx-w1 1
  torch_run torch-w1 1
  tpx_run tpx-tp2 2 --tp 2
  torch_run torch-tp2 2
done
load_after=$(loadavg)
echo "load average after: $load_after"

echo "## medians (min-max) over the pairs, tokens/s"
awk -f "$here/stats.awk" "$rec" >"$dir/stats"
awk '{ printf "  %-14s %9s  (%s-%s, %d runs, %d failed)\n", $1, $2, $3, $4, $5, $6 }' \
  "$dir/stats"
med() { awk -v k="$1" '$1 == k { print $2 }' "$dir/stats"; }
ratio() { # label a b target
  awk -v l="$1" -v a="$2" -v b="$3" -v t="$4" 'BEGIN {
    if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) {
      printf "  %-34s -\n", l; exit }
    r = a / b
    printf "  %-34s %.2fx  (target %s: %s)\n", l, r, t, (r >= t + 0) ? "met" : "NOT met" }'
}
echo "## ratios (issue 19's targets)"
ratio "world 1: tpx / torch" "$(med tpx-w1)" "$(med torch-w1)" 1.2
ratio "tp2: tpx / torch" "$(med tpx-tp2)" "$(med torch-tp2)" 1.0
ratio "tpx: tp2 / world 1" "$(med tpx-tp2)" "$(med tpx-w1)" 0.9
if [ -n "$peak" ]; then
  awk -v tok="$(med tpx-w1)" -v f="$flops" -v p="$peak" 'BEGIN {
    if (tok == "" || tok == "-") exit
    s = tok * f / (p * 1e9)
    printf "  %-34s %.0f%%  (%.1f GFLOP/s at %.1f MFLOP/token of %.1f GFLOP/s; target 55%%: %s)\n",
      "world 1: share of the sgemm peak", 100 * s, tok * f / 1e9, f / 1e6, p,
      (s >= 0.55) ? "met" : "NOT met" }'
fi
noisy=$(awk -v a="$load_before" -v b="$load_after" -v c="$cores" \
  'BEGIN { print (a > c || b > c) ? "NOISY" : "quiet" }')
echo "## machine was $noisy (load $load_before before, $load_after after, $cores cores)"
[ "$noisy" = quiet ] || echo "   a figure taken on a loaded machine is not a result: run again"
