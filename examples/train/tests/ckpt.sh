#!/bin/sh
# ckpt.sh — tpx-train --activation-checkpointing (each decoder layer run
# forward again in its backward) and --activation-checkpointing-modules
# (self_attn and mlp, each on its own) against the same run without
# either: 3 steps on the same mesh and backend give the same per-step loss
# and grad norm (the JSON step lines, character for character:
# bit-identical doubles) and byte-identical parameters after the last
# step (--dump-params) and gradients of every step (--dump-grads); and
# where the trainer reports its memory (tpx-train, not tpx-train-ref),
# rank 0's activations (the arena's peak) drop with each while params,
# grads, optimizer and the gather peak stay. python3 (standard library
# only) reads the JSON.
# usage: ckpt.sh local|mpi TRAIN FIXTURES CASE [mesh args...] [--b6]
set -u
mode=$1 train=$2 fix=$3 case=$4
shift 4
tokens=$fix/tokens.bin
batch=4 mesh="" world=1 prev=""
for a in "$@"; do
  if [ "$a" = "--b6" ]; then tokens=$fix/tokens_b6.bin; batch=6; else mesh="$mesh $a"; fi
  case $prev in --tp|--dp-shard|--dp-replicate|--cp) world=$((world * a)) ;; esac
  prev=$a
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common="--model $fix/$case --tokens $tokens --batch $batch --seq 16 --steps 3 --lr 1e-3 --clip 1.0 --weight-decay 0.01 --format json"
run() { # run OUTDIR [extra args]
  out=$1
  shift
  mkdir -p "$tmp/$out"
  if [ "$mode" = mpi ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    # shellcheck disable=SC2086
    mpirun -np $world "$train" $common $mesh "$@" --backend mpi \
      --dump-params "$tmp/$out/params.safetensors" \
      --dump-grads "$tmp/$out/grads.safetensors" > "$tmp/$out/out.json"
  else
    # shellcheck disable=SC2086
    "$train" $common $mesh "$@" --dump-params "$tmp/$out/params.safetensors" \
      --dump-grads "$tmp/$out/grads.safetensors" > "$tmp/$out/out.json"
  fi
}
run plain || { echo "FAIL tpx-train$mesh ($mode)"; exit 1; }
sed '$d' "$tmp/plain/out.json" > "$tmp/plain/steps"
bad=0
for v in layer:--activation-checkpointing modules:--activation-checkpointing-modules; do
  name=${v%%:*} flag=${v#*:}
  run "$name" "$flag" || { echo "FAIL tpx-train$mesh $flag ($mode)"; exit 1; }
  # the step lines (all but the last, the summary with the memory report)
  sed '$d' "$tmp/$name/out.json" > "$tmp/$name/steps"
  if [ "$(wc -l < "$tmp/$name/steps")" -ne 3 ] || ! cmp -s "$tmp/plain/steps" "$tmp/$name/steps"; then
    echo "FAIL per-step loss / grad norm differ with $flag:"
    diff "$tmp/plain/steps" "$tmp/$name/steps"
    bad=1
  else
    echo "PASS $flag: 3 steps' loss and grad norm bit-identical"
  fi
  for f in params grads; do
    if cmp -s "$tmp/plain/$f.safetensors" "$tmp/$name/$f.safetensors"; then
      echo "PASS $flag: $f byte-identical"
    else
      echo "FAIL $f differ with $flag"
      bad=1
    fi
  done
done
python3 - "$tmp/plain/out.json" "$tmp/layer/out.json" "$tmp/modules/out.json" <<'PY' || bad=1
import json, sys
def mem(path):
    return json.loads(open(path).read().strip().splitlines()[-1]).get("memory")
plain, layer, modules = (mem(p) for p in sys.argv[1:4])
if plain is None:
    print("     (no memory report: a trainer without the runtime)")
    sys.exit(0)
same = ("params", "grads", "optimizer", "gather_peak")
checks = [
    ("the same params / grads / optimizer / gather peak",
     all(plain[k] == m[k] for m in (layer, modules) for k in same)),
    ("--activation-checkpointing: activations drop",
     layer["activations"] < plain["activations"]),
    ("--activation-checkpointing-modules: activations drop",
     modules["activations"] < plain["activations"]),
]
for name, ok in checks:
    print("%s %s" % ("PASS" if ok else "FAIL", name))
print("     activations (rank 0, bytes): %d, layers %d, modules %d" % (
    plain["activations"], layer["activations"], modules["activations"]))
sys.exit(0 if all(ok for _, ok in checks) else 1)
PY
exit $bad
