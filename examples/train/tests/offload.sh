#!/bin/sh
# offload.sh — tpx-train --offload (FSDP2's CPUOffloadPolicy in the runtime)
# against the same run without it: 3 steps on the same mesh and backend
# give the same per-step loss and grad norm (the JSON lines, character for
# character: bit-identical doubles) and byte-identical parameters after
# the last step (--dump-params) and gradients of every step
# (--dump-grads); the memory report (rank 0) moves the sharded state to
# the host: without offload host_peak is 0, with it host_peak holds at
# least params + grads + optimizer and device_peak drops by at least the
# gradients and optimizer state (the parameters' shards still visit the
# device, one unit at a time, before each all-gather). python3 (standard library only) reads the JSON.
# usage: offload.sh local|mpi TRAIN FIXTURES CASE [mesh args...] [--b6]
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
run off --offload || { echo "FAIL tpx-train$mesh --offload ($mode)"; exit 1; }
bad=0
# the step lines (all but the last, the summary with the memory report)
sed '$d' "$tmp/plain/out.json" > "$tmp/plain/steps"
sed '$d' "$tmp/off/out.json" > "$tmp/off/steps"
if [ "$(wc -l < "$tmp/off/steps")" -ne 3 ] || ! cmp -s "$tmp/plain/steps" "$tmp/off/steps"; then
  echo "FAIL per-step loss / grad norm differ with --offload:"
  diff "$tmp/plain/steps" "$tmp/off/steps"
  bad=1
else
  echo "PASS 3 steps' loss and grad norm bit-identical"
fi
for f in params grads; do
  if cmp -s "$tmp/plain/$f.safetensors" "$tmp/off/$f.safetensors"; then
    echo "PASS $f byte-identical"
  else
    echo "FAIL $f differ with --offload"
    bad=1
  fi
done
python3 - "$tmp/plain/out.json" "$tmp/off/out.json" <<'PY' || bad=1
import json, sys
def mem(path):
    return json.loads(open(path).read().strip().splitlines()[-1])["memory"]
plain, off = mem(sys.argv[1]), mem(sys.argv[2])
state = off["params"] + off["grads"] + off["optimizer"]
checks = [
    ("no offload: host_peak 0", plain["host_peak"] == 0),
    ("offload: same params / grads / optimizer bytes",
     all(plain[k] == off[k] for k in ("params", "grads", "optimizer"))),
    ("offload: host_peak >= params + grads + optimizer", off["host_peak"] >= state),
    ("offload: device_peak lower by at least grads + optimizer",
     off["device_peak"] <= plain["device_peak"] - off["grads"] - off["optimizer"]),
]
for name, ok in checks:
    print("%s %s" % ("PASS" if ok else "FAIL", name))
print("     device_peak %d -> %d, host_peak %d -> %d (state %d)" % (
    plain["device_peak"], off["device_peak"], plain["host_peak"],
    off["host_peak"], state))
sys.exit(0 if all(ok for _, ok in checks) else 1)
PY
exit $bad
