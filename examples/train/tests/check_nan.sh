#!/bin/sh
# check_nan.sh — tpx-train-check must fail a comparison when a value is NaN
# (a NaN vanished in fmax / `>` tests, so a run with a NaN parameter,
# gradient or torch statistic passed), and must read integer JSON numbers.
# usage: check_nan.sh CHECK
set -u
check=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a safetensors file with tensors w and w@0 (2 f32 each): $1 = the 16
# data bytes as printf escapes
st() {
  h='{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w@0":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}'
  printf "\\$(printf %03o ${#h})\\000\\000\\000\\000\\000\\000\\000%s$1" "$h"
}
one='\000\000\200\077' two='\000\000\000\100' nan='\000\000\300\177'
st "$one$two$one$two" > "$tmp/ref.safetensors"
st "$one$nan$one$nan" > "$tmp/nan.safetensors"
fail=0
expect() { # want-rc description command...
  want=$1 what=$2
  shift 2
  "$@" > "$tmp/out" 2>&1
  rc=$?
  if [ $rc -ne "$want" ]; then
    echo "FAIL: $what: exit $rc, want $want"; cat "$tmp/out"; fail=1
  else
    echo "ok: $what (exit $rc)"
  fi
}
expect 0 "params equal" "$check" params "$tmp/ref.safetensors" "$tmp/ref.safetensors" 1e-5
expect 1 "params with a NaN" "$check" params "$tmp/nan.safetensors" "$tmp/ref.safetensors" 1e-5
expect 0 "grads equal" "$check" grads "$tmp/ref.safetensors" "$tmp/ref.safetensors" 1e-5
expect 1 "grads with a NaN" "$check" grads "$tmp/nan.safetensors" "$tmp/ref.safetensors" 1e-5
# sqrt(1 + 4) = 2.2360679774997898
echo '{"cases":{"c":{"params_after":{"w":{"l2":2.2360679774997898,"sum":3,"first":[1,2]}}}}}' \
  > "$tmp/expected.json"
expect 0 "torch equal" "$check" torch "$tmp/ref.safetensors" "$tmp/expected.json" c 1e-6
expect 1 "torch with a NaN" "$check" torch "$tmp/nan.safetensors" "$tmp/expected.json" c 1e-6
echo '{"steps":[{"step":0,"loss":5,"grad_norm":1}]}' > "$tmp/int.json"
echo '{"steps":[{"step":0,"loss":5.0,"grad_norm":1.0}]}' > "$tmp/real.json"
echo '{"steps":[{"step":0,"loss":null,"grad_norm":1.0}]}' > "$tmp/null.json"
expect 0 "steps with integer numbers" "$check" steps "$tmp/int.json" "$tmp/real.json" 1e-9
expect 1 "steps with a null (non-finite) loss" "$check" steps "$tmp/null.json" "$tmp/real.json" 1e-5
exit $fail
