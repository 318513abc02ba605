#!/bin/sh
# run.sh — the context-parallel benchmark, run fairly: tpx-train at tp 4,
# tp 2 x cp 2 and cp 4 on bench/train's random ~54M-parameter Llama
# (hidden 512, 8 layers, 8 heads, intermediate 1024, vocab 32000, f32) at
# seq 1024, against torch on the same meshes (gloo, one process per rank)
# under NeMo Automodel 0.7.0's own mesh, fsdp2_strategy_parallelize and cp
# batch sharding (torch_cp.py).
#
# torch's own context_parallel attention is tried first on a tiny model
# (torch_cp.py --probe) and the outcome printed: where it runs, the torch
# cp runs use it; where it does not (torch 2.15 on CPU), they use
# torch_cp.py's hand-written all-gather attention, and the header says so.
#
# Fairness rules: bench/train's (bench/README.md "Training"), through its
# harness (bench/train/pairs.sh): the same threads per rank on both sides
# (cores / world), the first (warm-up) step excluded, PAIRS interleaved A/B
# pairs per mesh (tpx then torch), each figure the median with its min-max,
# the load average before and after and "NOISY" when either exceeds the
# core count (not a result then).
# It prints tokens/s per mesh and side, tpx / torch per mesh, each cp mesh
# over tp 4, and the share of rank 0's step spent in cp collectives (tpx:
# when tpx-train reports it; torch: the fallback attention's K/V
# collectives, forward and backward).
# usage: bench/cp/run.sh [BUILD_DIR] [PAIRS] [STEPS]   (5 pairs, 3 steps)
# SEQ (1024) and BATCH (1 sequence) override the batch, PAIRS and STEPS
# the counts when not given; PYTHON names an interpreter with torch +
# transformers + nemo-automodel (default python3).
# Never fails on timing; exits 2 when a binary is not built.
set -eu
build=${1:-build}
pairs=${2:-${PAIRS:-5}}
steps=${3:-${STEPS:-3}}
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
lib=$here/../train
. "$lib/pairs.sh"
bench_init cp 512 8 8 8 1024 32000 "${BATCH:-1}" "${SEQ:-1024}"

impl=none attn=none
if [ "$have_torch" = 1 ]; then
  impl=$("$py" "$here/torch_cp.py" --which 2>/dev/null)
  probe=$("$py" "$here/torch_cp.py" --probe 2>&1 | sed -n 's/^PROBE //p')
  case "$probe" in
  *"context_parallel runs"*) attn=context_parallel ;;
  *) attn=allgather ;;
  esac
fi
bench_header "$impl"
if [ "$have_torch" = 1 ]; then
  echo "torch context_parallel: ${probe:-probe failed}"
  [ "$attn" = context_parallel ] \
    && echo "torch cp attention: torch's context_parallel (allgather rotate)" \
    || echo "torch cp attention: FALLBACK, torch_cp.py's hand-written K/V all-gather" \
            "(torch's context_parallel does not run here)"
fi
has_cp=0
"$train" --help 2>&1 | grep -q -- "--cp" && has_cp=1
[ "$has_cp" = 1 ] || echo "tpx-train: no --cp in this build; its cp meshes are skipped"
bench_load before
echo "tpx side: OMP_WAIT_POLICY=$omp_wait"

for p in $(seq "$pairs"); do
  echo "## pair $p of $pairs (load $(loadavg))"
  tpx_run tpx-tp4 4 --tp 4
  torch_run torch-tp4 "$here/torch_cp.py" 4 1
  [ "$has_cp" = 0 ] || tpx_run tpx-tp2cp2 4 --tp 2 --cp 2
  torch_run torch-tp2cp2 "$here/torch_cp.py" 2 2 "$attn"
  [ "$has_cp" = 0 ] || tpx_run tpx-cp4 4 --cp 4
  torch_run torch-cp4 "$here/torch_cp.py" 1 4 "$attn"
done
bench_load after

bench_medians
echo "## ratios"
for m in tp4 tp2cp2 cp4; do
  ratio "$m: tpx / torch" "$(med tpx-$m)" "$(med torch-$m)"
done
for side in tpx torch; do
  ratio "$side: tp2 x cp2 / tp4" "$(med $side-tp2cp2)" "$(med $side-tp4)"
  ratio "$side: cp4 / tp4" "$(med $side-cp4)" "$(med $side-tp4)"
done
pct() { if [ -n "$1" ] && [ "$1" != - ]; then echo "$1%"; else echo -; fi; }
echo "## share of rank 0's step in collectives, median: all of them; cp's"
for s in tpx-tp4 tpx-tp2cp2 tpx-cp4 torch-tp2cp2 torch-cp4; do
  printf "  %-14s %7s  %7s\n" "$s" "$(pct "$(med "$s-coll")")" \
    "$(pct "$(med "$s-cpcoll")")"
done
bench_noisy
