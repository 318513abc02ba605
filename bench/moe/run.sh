#!/bin/sh
# run.sh — the MoE benchmark (issue 29), run fairly: tpx-train at ep 1
# (world 1), ep 2 (dp_shard 2 x ep 2) and ep 4 (dp_shard 4 x ep 4) on a
# random Qwen3-MoE that torch_moe.py --make writes with transformers'
# save_pretrained (both sides load that checkpoint), against torch on the
# same meshes (gloo, one process per rank) running NeMo Automodel 0.7.0's
# own Qwen3MoeForCausalLM under its MeshContext + parallelize_model (its MoE
# parallelizer at ep > 1) and its grad-norm clipping (torch_moe.py says
# what it runs, and its two CPU shims).
#
# The model (bench/README.md "MoE" says why this shape): hidden 512, 4
# layers, 8 heads (4 kv, head_dim 64), every layer MoE with 16 experts,
# top-2 with norm_topk_prob, moe_intermediate 384, vocab 8192, untied, f32,
# router aux loss off: 49.3M parameters, 37.7M of them in experts; batch
# 8 x seq 256. HIDDEN, LAYERS, EXPERTS, TOPK, MOE_INTER, VOCAB, BATCH and
# SEQ override it (BATCH must divide by the largest world).
#
# Fairness rules: bench/train's (bench/README.md "Training"), through its
# harness (bench/train/pairs.sh): the same checkpoint and tokens, the same
# AdamW (lr 1e-4) and clipping (1.0), the same threads per rank on both
# sides (cores / world, at least 1), the first (warm-up) step excluded,
# PAIRS interleaved A/B pairs per mesh (tpx then torch), each figure the
# median with its min-max, the load average before and after and "NOISY"
# when either exceeds the core count (not a result then).
# ep 4 runs 4 ranks: on fewer than 4 cores they run one thread each,
# oversubscribed on both sides alike (the header says so; EPS="1 2" skips
# it). tpx also runs its all-to-all dispatcher at ep > 1 (series *-a2a; no
# torch peer on CPU: Automodel's other dispatchers need CUDA); A2A=0 skips
# those runs.
# It prints tokens/s per mesh and side, tpx / torch per mesh, ep N / ep 1
# per side, tpx's all-to-all / all-gather, and the share of rank 0's step
# in the MoE dispatch (tpx: when tpx-train's throughput line reports it;
# torch: GroupedExperts' token all-gathers and combine all-reduce, forward
# and backward) and, for tpx, in all collectives.
# usage: bench/moe/run.sh [BUILD_DIR] [PAIRS] [STEPS]   (5 pairs, 3 steps)
# PYTHON names an interpreter with torch + transformers (needed: it writes
# the checkpoint) and nemo-automodel 0.7.0 (default python3).
# Never fails on timing; exits 2 when tpx-train is not built or torch is
# missing.
set -eu
build=${1:-build}
pairs=${2:-${PAIRS:-5}}
steps=${3:-${STEPS:-3}}
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
lib=$here/../train
. "$lib/pairs.sh"
bench_setup moe
H=${HIDDEN:-512} L=${LAYERS:-4} NH=8 KV=4 MI=${MOE_INTER:-384}
E=${EXPERTS:-16} K=${TOPK:-2} V=${VOCAB:-8192} B=${BATCH:-8} T=${SEQ:-256}
eps=${EPS:-1 2 4}
a2a=${A2A:-1}
if [ "$have_torch" = 0 ]; then
  echo "$(basename "$0"): $py has no torch + transformers: it writes the" \
       "checkpoint (save_pretrained)" >&2
  exit 2
fi
made=$("$py" "$here/torch_moe.py" --make "$dir" "$H" "$L" "$NH" "$KV" "$MI" "$E" \
       "$K" "$V" "$B" "$T" 2>/dev/null | sed -n 's/^MODEL //p')
[ -n "$made" ] || { echo "$(basename "$0"): torch_moe.py --make failed" >&2; exit 2; }

impl=$("$py" "$here/torch_moe.py" --which 2>/dev/null)
probe=$("$py" "$here/torch_moe.py" --probe 2>&1 | sed -n 's/^PROBE //p')
case "$probe" in
*"runs on CPU"*) side=automodel ;;
*) side=transformers ;;
esac
bench_machine
echo "model: Qwen3-MoE, hidden $H, $L layers, $NH heads ($KV kv), $E experts" \
     "top-$K (norm_topk_prob), moe_intermediate $MI, vocab $V, f32; $made"
echo "batch $B x seq $T; $steps steps per run (first excluded)"
echo "torch side: $impl"
echo "torch side, Automodel's Qwen3-MoE class: ${probe:-probe failed}"
[ "$side" = automodel ] \
  || echo "torch side: FALLBACK, transformers' Qwen3MoeForCausalLM at ep 1 only" \
          "(Automodel's class does not run here: the probe line above says why)"
for ep in $eps; do
  [ "$ep" -le "$cores" ] || echo "ep $ep: $ep ranks, 1 thread each, on $cores cores:" \
    "OVERSUBSCRIBED on both sides alike; compare tpx with torch there, not the meshes"
done
has_ep=0
"$train" --help 2>&1 | grep -q -- "--ep" && has_ep=1
[ "$has_ep" = 1 ] || echo "tpx-train: no --ep in this build (issue 29's MoE training" \
                          "not merged); its runs are skipped"
bench_load before
echo "tpx side: OMP_WAIT_POLICY=$omp_wait"

for p in $(seq "$pairs"); do
  echo "## pair $p of $pairs (load $(loadavg))"
  for ep in $eps; do
    if [ "$ep" = 1 ]; then
      [ "$has_ep" = 0 ] || tpx_run tpx-ep1 1
      torch_run torch-ep1 "$here/torch_moe.py" 1 "$side"
      continue
    fi
    [ "$has_ep" = 0 ] \
      || tpx_run tpx-ep$ep "$ep" --dp-shard "$ep" --ep "$ep" --moe-dispatcher all-gather
    [ "$side" = transformers ] || torch_run torch-ep$ep "$here/torch_moe.py" "$ep" "$side"
    [ "$has_ep" = 0 ] || [ "$a2a" = 0 ] \
      || tpx_run tpx-ep$ep-a2a "$ep" --dp-shard "$ep" --ep "$ep" --moe-dispatcher all-to-all
  done
done
bench_load after

bench_medians
echo "## ratios"
for ep in $eps; do
  ratio "ep $ep: tpx / torch" "$(med tpx-ep$ep)" "$(med torch-ep$ep)"
done
for ep in $eps; do
  [ "$ep" = 1 ] && continue
  for s in tpx torch; do
    ratio "$s: ep $ep / ep 1" "$(med $s-ep$ep)" "$(med $s-ep1)"
  done
  [ "$a2a" = 0 ] || ratio "tpx ep $ep: all-to-all / all-gather" \
    "$(med tpx-ep$ep-a2a)" "$(med tpx-ep$ep)"
done
pct() { if [ -n "$1" ] && [ "$1" != - ]; then echo "$1%"; else echo -; fi; }
echo "## share of rank 0's step, median: MoE dispatch; all collectives (tpx)"
for ep in $eps; do
  for s in tpx-ep$ep tpx-ep$ep-a2a torch-ep$ep; do
    case "$s" in tpx-ep1-a2a) continue ;; esac
    [ "$a2a" = 1 ] || case "$s" in *-a2a) continue ;; esac
    printf "  %-14s %7s  %7s\n" "$s" "$(pct "$(med "$s-moe")")" \
      "$(pct "$(med "$s-coll")")"
  done
done
[ "$has_ep" = 0 ] || grep -q -- "^tpx-ep[0-9]*-moe " "$rec" \
  || echo "  (tpx-train printed no MoE dispatch share: its throughput line has none yet)"
bench_noisy
