#!/bin/sh
# threads.sh — tpx-train on one thread per rank against the same run on
# two (OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = 1, then 2: the rank's
# OpenMP team, docs/TRAIN.md "What it implements"): 3 steps give the same
# per-step loss and grad norm (the JSON step lines, character for
# character: bit-identical doubles) and byte-identical parameters after
# the last step (--dump-params) and gradients of every step
# (--dump-grads). Every sum runs in the order one thread gives it,
# whatever the thread count: the products split by rows or columns
# (tr_sgemm), attention's (batch row, kv head) tasks, and the MoE
# experts' passes, whose dispatched rows are cut across the team.
# On threads (--backend local) only.
# usage: threads.sh TRAIN FIXTURES CASE [mesh args...]
set -u
train=$1 fix=$2 case=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common="--model $fix/$case --tokens $fix/tokens.bin --batch 4 --seq 16 --steps 3 --lr 1e-3 --clip 1.0 --weight-decay 0.01 --format json"
for n in 1 2; do
  mkdir -p "$tmp/$n"
  # shellcheck disable=SC2086
  OPENBLAS_NUM_THREADS=$n OMP_NUM_THREADS=$n "$train" $common "$@" \
    --dump-params "$tmp/$n/params.safetensors" \
    --dump-grads "$tmp/$n/grads.safetensors" > "$tmp/$n/out.json" \
    || { echo "FAIL tpx-train $* on $n thread(s)"; exit 1; }
  # the step lines (all but the last, the summary)
  sed '$d' "$tmp/$n/out.json" > "$tmp/$n/steps"
done
grep -q '"threads":2' "$tmp/2/out.json" \
  || { echo "FAIL the 2-thread run does not say 2 threads per rank"; exit 1; }
bad=0
if [ "$(wc -l < "$tmp/2/steps")" -ne 3 ] || ! cmp -s "$tmp/1/steps" "$tmp/2/steps"; then
  echo "FAIL per-step loss / grad norm differ between 1 and 2 threads:"
  diff "$tmp/1/steps" "$tmp/2/steps"
  bad=1
else
  echo "PASS 3 steps' loss and grad norm bit-identical on 1 and 2 threads"
fi
for f in params grads; do
  if cmp -s "$tmp/1/$f.safetensors" "$tmp/2/$f.safetensors"; then
    echo "PASS $f byte-identical"
  else
    echo "FAIL $f differ between 1 and 2 threads"
    bad=1
  fi
done
exit $bad
