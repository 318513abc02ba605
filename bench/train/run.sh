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
lib=$here
. "$lib/pairs.sh"
bench_init train 512 8 8 8 1024 32000 4 256

# FLOP per trained token: 6 x the matmul parameters (q, k, v, o, gate, up,
# down per layer, and lm_head; the embedding is a lookup) plus attention's
# QK^T and AV, 2 x 2 x T x H per layer forward, x3 for forward + backward,
# counted over the whole T x T square as the kernels compute it.
flops=$(awk -v h=$H -v l=$L -v kv=$KV -v nh=$NH -v i=$I -v v=$V -v t=$T 'BEGIN {
  kvd = h / nh * kv
  mm = l * (2 * h * h + 2 * h * kvd + 3 * h * i) + h * v
  printf "%.0f", 6 * mm + 12 * l * t * h }')

impl=none
if [ "$have_torch" = 1 ]; then
  impl=$("$py" "$here/torch_step.py" --which 2>/dev/null)
fi
bench_header "$impl"
peak=""
if "$py" -c "import numpy" 2>/dev/null; then
  line=$("$py" "$here/sgemm_peak.py" "$cores")
  echo "$line"
  peak=$(echo "$line" | sed -n 's/^SGEMM gflops=\([0-9.]*\).*/\1/p')
fi
bench_load before
echo "tpx side: OMP_WAIT_POLICY=$omp_wait"

for p in $(seq "$pairs"); do
  echo "## pair $p of $pairs (load $(loadavg))"
  tpx_run tpx-w1 1
  torch_run torch-w1 "$here/torch_step.py" 1 1
  tpx_run tpx-tp2 2 --tp 2
  torch_run torch-tp2 "$here/torch_step.py" 2 1
done
bench_load after

bench_medians
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
bench_noisy
