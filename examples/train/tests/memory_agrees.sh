#!/bin/sh
# memory_agrees.sh — the training memory `tpx plan` reports (per_rank[0].memory
# params, grads, optimizer; docs/MEMORY.md) equals what tpx-train's runtime
# actually allocated on rank 0 after AdamW steps (tpx_runtime_allocated_bytes),
# byte for byte, on the same model and mesh; tpx-train also reports its
# gather peak, its activation arena and its peak (runtime peak + activations,
# at least params + grads + optimizer + activations), printed beside the
# plan's figures for the same batch and sequence. python3 (standard library
# only) reads the two JSON documents.
# usage: memory_agrees.sh TPX TRAIN FIXTURES CASE [mesh args...] [--b6]
set -u
tpx=$1 train=$2 fix=$3 case=$4
shift 4
tokens=$fix/tokens.bin
batch=4
mesh=""
ndp=1
prev=""
for a in "$@"; do
  if [ "$a" = "--b6" ]; then tokens=$fix/tokens_b6.bin; batch=6; else mesh="$mesh $a"; fi
  case $prev in --dp-shard|--dp-replicate) ndp=$((ndp * a)) ;; esac
  prev=$a
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
"$train" --model "$fix/$case" --tokens "$tokens" --batch $batch --seq 16 --steps 2 \
  --lr 1e-3 --format json $mesh > "$tmp/train.json" || { echo "FAIL tpx-train$mesh"; exit 1; }
# shellcheck disable=SC2086
# --dtype f32 --attention eager: what tpx-train computes in (f32, the
# attention probabilities kept), so the activation figures compare like
# with like (docs/MEMORY.md "tpx-train's activations")
"$tpx" plan --config "$fix/$case/config.json" --optimizer adamw --format json $mesh \
  --seq 16 --batch $((batch / ndp)) --dtype f32 --attention eager \
  > "$tmp/plan.json"
[ $? -le 1 ] || { echo "FAIL tpx plan$mesh"; exit 1; }
python3 - "$tmp/train.json" "$tmp/plan.json" "$case$mesh" <<'PY'
import json, sys
train = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["memory"]
plan = json.load(open(sys.argv[2]))["per_rank"][0]["memory"]
bad = [k for k in ("params", "grads", "optimizer") if train[k] != plan[k]]
for k in ("params", "grads", "optimizer"):
    print("%s %-9s tpx-train %d  tpx plan %d" % ("FAIL" if k in bad else "PASS", k, train[k], plan[k]))
for k in ("gather_peak", "activations", "peak"):
    print("     %-11s tpx-train %s  tpx plan %s" % (k, train.get(k), plan.get(k)))
held = sum(train[k] for k in ("params", "grads", "optimizer"))
if not (train.get("activations", 0) > 0 and train.get("peak", 0) >= held + train["activations"]):
    print("FAIL tpx-train's activations / peak missing or below what it holds")
    bad.append("peak")
sys.exit(1 if bad else 0)
PY
