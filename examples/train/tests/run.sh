#!/bin/sh
# run.sh — one tpx-train test (meson runs it; no Python needed).
# usage: run.sh MODE TRAIN REF CHECK FIXTURES CASE [tpx-train mesh args...]
#   (pseudo-args: --b6 the 6-row batch tokens_b6.bin; --t32 the seq-32 batch
#   tokens_v256_t32.bin of the llama3rope cases; --expect KEY: torch and
#   mesh modes also hold the per-step loss / grad norm to expected.json's
#   CASE/KEY, e.g. automodel/ep/2, NeMo Automodel's own Qwen3-MoE class at
#   ep 2 (1e-5 rel; check.c steps))
#   torch  TRAIN (at world 1, or on the mesh the args give) vs the torch
#          numbers in expected.json (1e-5 rel) and its parameters after 3
#          steps vs torch's per-tensor L2 norm, sum and first values (1e-4:
#          torch ran in f64, tpx in f32)
#   mesh   TRAIN on the mesh given by the args vs REF (tpx-train-ref, world 1,
#          without the FSDP runtime): per-step loss / grad norm within 1e-5
#          relative, the gathered gradients of step 0 within 1e-5 relative
#          L2 per tensor, and every parameter after 3 steps within 1e-5
#          relative L2 per tensor, leaving out the elements whose gradient
#          is too small for Adam's step to be determined by f32 gradients
#          (below 3e-4 of the tensor's RMS gradient in REF's run at some
#          step): those are held to Adam's bound 2 x steps x lr (check.c)
#          and, on the default batch, per-step loss / grad norm also vs
#          the torch numbers in expected.json (1e-5 rel)
#   mpi    as mesh, TRAIN under `mpirun -np WORLD ... --backend mpi`
#   bad    the args must fail cleanly: exit 1 or 2 with a message, no crash
#          (CASE is the expected stderr fragment; a run that diverged at
#          step 1 must have printed step 0's line first)
set -u
mode=$1 train=$2 ref=$3 check=$4 fix=$5 case=$6
shift 6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tokens=$fix/tokens.bin
batch=4 seq=16 args="" expect=""
while [ $# -gt 0 ]; do
  case $1 in
  --b6) tokens=$fix/tokens_b6.bin batch=6 ;;
  --t32) tokens=$fix/tokens_v256_t32.bin seq=32 ;;
  --expect) expect=$2; shift ;;
  *) args="$args $1" ;;
  esac
  shift
done
common="--tokens $tokens --batch $batch --seq $seq --steps 3 --lr 1e-3 --clip 1.0 --weight-decay 0.01 --format json"
mkdir -p "$tmp/a" "$tmp/b"
case $mode in
torch)
  "$train" --model "$fix/$case" $common $args --dump-params "$tmp/a/model.safetensors" > "$tmp/out.json" || exit 1
  "$check" steps "$tmp/out.json" "$fix/expected.json" "$case" 1e-5 || exit 1
  "$check" torch "$tmp/a/model.safetensors" "$fix/expected.json" "$case" 1e-4 || exit 1
  ;;
mesh|mpi)
  "$ref" --model "$fix/$case" $common --dump-params "$tmp/b/model.safetensors" \
    --dump-grads "$tmp/b/grads.safetensors" > "$tmp/ref.json" || exit 1
  if [ "$mode" = mpi ]; then
    world=1
    set -- $args
    while [ $# -gt 0 ]; do
      case $1 in --tp|--dp-shard|--dp-replicate|--cp) world=$((world * $2)); shift ;; esac
      shift
    done
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    mpirun -np $world "$train" --model "$fix/$case" $common $args --backend mpi \
      --dump-params "$tmp/a/model.safetensors" --dump-grads "$tmp/a/grads.safetensors" \
      > "$tmp/out.json" || exit 1
  else
    "$train" --model "$fix/$case" $common $args --dump-params "$tmp/a/model.safetensors" \
      --dump-grads "$tmp/a/grads.safetensors" > "$tmp/out.json" || exit 1
  fi
  "$check" steps "$tmp/out.json" "$tmp/ref.json" 1e-5 || exit 1
  # and straight against torch + transformers where expected.json has the
  # batch (the default tokens.bin), not only through REF
  if [ "$tokens" = "$fix/tokens.bin" ]; then
    "$check" steps "$tmp/out.json" "$fix/expected.json" "$case" 1e-5 || exit 1
  fi
  "$check" grads "$tmp/a/grads.safetensors" "$tmp/b/grads.safetensors" 1e-5 || exit 1
  "$check" params "$tmp/a/model.safetensors" "$tmp/b/model.safetensors" 1e-5 \
    "$tmp/b/grads.safetensors" 1e-3 0.01 3 || exit 1
  ;;
bad)
  # fixtures the bad cases need, made here
  mkdir -p "$tmp/arch"
  sed 's/LlamaForCausalLM/GPT2LMHeadModel/' "$fix/llama/config.json" > "$tmp/arch/config.json"
  cp "$fix/llama/model.safetensors" "$tmp/arch/"
  mkdir -p "$tmp/yarn"
  sed 's/"llama3"/"yarn"/' "$fix/llama3rope-v4/config.json" > "$tmp/yarn/config.json"
  cp "$fix/llama3rope/model.safetensors" "$tmp/yarn/"
  # malformed rope parameters (each must be refused, never train on NaN)
  for v in 's/"rope_theta": 10000.0/"rope_theta": -10000.0/:theta-neg' \
           's/"rope_theta": 10000.0/"rope_theta": "10000"/:theta-str' \
           's/"factor": 8.0/"factor": Infinity/:factor-inf' \
           's/"factor": 8.0/"factor": 0/:factor-zero' \
           's/"low_freq_factor": 1.0/"low_freq_factor": 4.0/:band' \
           's/"rope_type": "llama3"/"rope_type": 3/:type-num' \
           's/"rms_norm_eps": 1e-05/"rms_norm_eps": -1e-05/:eps-neg'; do
    mkdir -p "$tmp/rope-${v##*:}"
    sed "${v%:*}" "$fix/llama3rope/config.json" > "$tmp/rope-${v##*:}/config.json"
    cp "$fix/llama3rope/model.safetensors" "$tmp/rope-${v##*:}/"
  done
  # weights of another model: a config with another intermediate_size, and
  # one of fewer layers than the checkpoint holds
  for v in 's/"intermediate_size": 172/"intermediate_size": 128/:other-inter' \
           's/"num_hidden_layers": 2/"num_hidden_layers": 1/:layers1'; do
    mkdir -p "$tmp/${v##*:}"
    sed "${v%:*}" "$fix/llama/config.json" > "$tmp/${v##*:}/config.json"
    cp "$fix/llama/model.safetensors" "$tmp/${v##*:}/"
  done
  # MoE configs tpx-train refuses (issue 29)
  for v in 'glm4moe:s/"partial_rotary_factor": 1.0/"partial_rotary_factor": 0.5/:glm4-rotary' \
           'glm4moe:/"partial_rotary_factor": 1.0,/d:glm4-rotary-absent' \
           'glm4moe:s/"use_qk_norm": false/"use_qk_norm": true/:glm4-qk-norm' \
           'mixtral:s/"router_jitter_noise": 0.0/"router_jitter_noise": 0.01/:mixtral-jitter' \
           'qwen3moe:s/"output_router_logits": false/"output_router_logits": true/; s/"router_aux_loss_coef": 0.0/"router_aux_loss_coef": 0.001/:qwen3moe-aux' \
           'qwen3moe:s/"num_experts_per_tok": 2/"num_experts_per_tok": 9/:qwen3moe-topk'; do
    src=${v%%:*} rest=${v#*:}
    mkdir -p "$tmp/${rest##*:}"
    sed "${rest%:*}" "$fix/$src/config.json" > "$tmp/${rest##*:}/config.json"
    cp "$fix/$src/model.safetensors" "$tmp/${rest##*:}/"
  done
  # a NaN in the weights: the first float of the data (lm_head row 0, so
  # every position's logits)
  mkdir -p "$tmp/nan-weights"
  cp "$fix/llama/config.json" "$fix/llama/model.safetensors" "$tmp/nan-weights/"
  hl=$(od -An -t u8 -N 8 "$fix/llama/model.safetensors" | tr -d ' ')
  printf '\000\000\300\177' | dd of="$tmp/nan-weights/model.safetensors" \
    bs=1 seek=$((8 + hl)) conv=notrunc 2> /dev/null
  # a FIFO as --tokens and as the model's config.json: refused at once
  mkfifo "$tmp/fifo"
  mkdir -p "$tmp/cfgfifo"
  cp "$fix/llama/model.safetensors" "$tmp/cfgfifo/"
  mkfifo "$tmp/cfgfifo/config.json"
  i=0; : > "$tmp/big.bin"
  while [ $i -lt 68 ]; do printf '\210\023\000\000' >> "$tmp/big.bin"; i=$((i + 1)); done
  set -- $(echo "$args" | sed "s#@TMP@#$tmp#g; s#@FIX@#$fix#g")
  "$train" "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  cat "$tmp/err"
  if [ $rc -ne 1 ] && [ $rc -ne 2 ]; then echo "exit status $rc, want 1 or 2"; exit 1; fi
  grep -qF -- "$case" "$tmp/err" || { echo "stderr lacks '$case'"; exit 1; }
  # a run that fails after some steps has printed them as they completed
  case $case in
  *"training diverged"*|*"step 1:"*)
    grep -q '^step 0 ' "$tmp/out" || { echo "stdout lacks step 0's line"; exit 1; } ;;
  esac
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
if [ -n "$expect" ]; then
  "$check" steps "$tmp/out.json" "$fix/expected.json" "$case/$expect" 1e-5 || exit 1
fi
exit 0
