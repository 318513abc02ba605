#!/bin/sh
# cp_memory.sh — the long-context case of context parallelism: a sequence
# 8x the fixtures' (128 tokens) trains on cp 4 with the losses and grad
# norms of cp 1 (1e-5 relative), and rank 0's activation arena is about a
# quarter of cp 1's (between 0.20 and 0.30 of it: each rank keeps the
# activations of its 32 positions, plus one layer's gathered K and V).
# Prints the measured figures beside `tpx plan`'s activation prediction
# for the same model, batch and sequence (at cp 4 where `tpx plan` takes
# --cp). python3 (standard library only) makes the tokens and reads the
# JSON.
# usage: cp_memory.sh TPX TRAIN CHECK FIXTURES CASE
set -u
tpx=$1 train=$2 check=$3 fix=$4 case=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seq=128
python3 - "$tmp/tokens.bin" "$fix/$case/config.json" $seq <<'PY' || exit 1
import json, random, struct, sys
vocab = json.load(open(sys.argv[2]))["vocab_size"]
n = int(sys.argv[3]) + 1
random.seed(20)
open(sys.argv[1], "wb").write(struct.pack("<%di" % n, *[random.randrange(vocab) for _ in range(n)]))
PY
for cp in 1 4; do
  "$train" --model "$fix/$case" --tokens "$tmp/tokens.bin" --batch 1 --seq $seq \
    --steps 2 --lr 1e-3 --clip 1.0 --format json --cp $cp > "$tmp/cp$cp.json" ||
    { echo "FAIL tpx-train --cp $cp"; exit 1; }
done
"$check" steps "$tmp/cp4.json" "$tmp/cp1.json" 1e-5 || exit 1
# planned as tpx-train computes: f32, the attention probabilities kept
plan() {
  # shellcheck disable=SC2068
  "$tpx" plan --config "$fix/$case/config.json" --optimizer adamw --format json \
    --seq $seq --batch 1 --dtype f32 --attention eager $@ > "$tmp/plan.json" 2> /dev/null
  [ $? -le 1 ] && python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["per_rank"][0]["memory"].get("activations"))' "$tmp/plan.json" ||
    echo "n/a"
}
p1=$(plan)
p4=$(plan --cp 4)
python3 - "$tmp/cp1.json" "$tmp/cp4.json" "$p1" "$p4" <<'PY'
import json, sys
def act(path):
    return json.loads(open(path).read().strip().splitlines()[-1])["memory"]["activations"]
a1, a4 = act(sys.argv[1]), act(sys.argv[2])
ratio = a4 / a1
print("activations (rank 0, bytes) at seq 128: cp 1 %d  cp 4 %d  ratio %.3f" % (a1, a4, ratio))
print("tpx plan's prediction: cp 1 %s  cp 4 %s" % (sys.argv[3], sys.argv[4]))
ok = 0.20 <= ratio <= 0.30
print("%s cp 4 holds about a quarter of cp 1's activations" % ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
