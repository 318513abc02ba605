#!/bin/sh
# ckpt_band.sh — tpx-train --activation-checkpointing's measured activation
# peak (rank 0's arena high-water mark, the summary line's
# memory.activations) is within 10% of what `tpx plan
# --activation-checkpointing` predicts for the same model, mesh, batch and
# sequence (per_rank[0].memory.activations), planned as tpx-train computes:
# --dtype f32 --attention eager --loss-in-place (docs/MEMORY.md "tpx-train's
# activations"). python3 (standard library only) reads the two JSON
# documents.
# usage: ckpt_band.sh TPX TRAIN FIXTURES CASE [mesh args...]
set -u
tpx=$1 train=$2 fix=$3 case=$4
shift 4
batch=4 ndp=1 prev=""
for a in "$@"; do
  case $prev in --dp-shard|--dp-replicate) ndp=$((ndp * a)) ;; esac
  prev=$a
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$train" --model "$fix/$case" --tokens "$fix/tokens.bin" --batch $batch --seq 16 \
  --steps 1 --lr 1e-3 --format json --activation-checkpointing "$@" \
  > "$tmp/train.json" || { echo "FAIL tpx-train $*"; exit 1; }
"$tpx" plan --config "$fix/$case/config.json" --optimizer adamw --format json "$@" \
  --seq 16 --batch $((batch / ndp)) --dtype f32 --attention eager \
  --loss-in-place --activation-checkpointing > "$tmp/plan.json"
[ $? -le 1 ] || { echo "FAIL tpx plan $*"; exit 1; }
python3 - "$tmp/train.json" "$tmp/plan.json" "$case $*" <<'PY'
import json, sys
train = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["memory"]["activations"]
plan = json.load(open(sys.argv[2]))["per_rank"][0]["memory"]["activations"]
ratio = train / plan
ok = 0.9 <= ratio <= 1.1
print("%s %s: measured %d, planned %d, ratio %.3f (band 0.9-1.1)" % (
    "PASS" if ok else "FAIL", sys.argv[3], train, plan, ratio))
sys.exit(0 if ok else 1)
PY
