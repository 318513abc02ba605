#!/bin/sh
# tools/gpu-check.sh — prove the GPU path in one command, on a machine with
# an NVIDIA GPU (H100 / H200 class, CUDA 13): build an optimised tree with
# CUDA + NCCL for the GPU found, run every device check, print one line per
# group, exit 0 only if all pass. Without a usable GPU: exit 77 within
# seconds, naming why. Nothing is fetched from the network.
#
# usage: tools/gpu-check.sh [BUILD_DIR]     (default: build-gpu)
# env:   TPX_GPU_CHECK_LOG   the full log (default: BUILD_DIR/gpu-check.log)
#        TPX_GPU_CHECK_GROUPS  tpx-gpu-check groups (default: all)
#
# Groups (tests/gpu/gpu_check.c, docs/RUNTIME.md "Running on a GPU"):
#   build   meson setup + compile (-Dcuda=enabled -Dnccl=enabled, release,
#           -gencode for the GPU's compute capability)
#   ops     every memory-space op and kernel, device vs host, bit for bit
#   big     the streaming kernels at n > 2^31 (when memory allows)
#   coll    every collective on local worlds of 1..4 ranks sharing the GPU
#   nccl    the nccl backend at world 1
#   fsdp    the FSDP runtime step on local device worlds of 1, 2, 4 ranks
#   bench   copy / kernel bandwidth vs cudaMemcpy D2D; one FSDP step split
#   suites  meson test of the device, comm and runtime suites in that build
#           (the sim variants; rt_nccl on the GPU)
#   cuda-suites  the runtime suite again with TPX_TEST_DEVICE=cuda: every TP
#           and FSDP case's device-memory run on the GPU (managed memory),
#           held against its host run as the sim runs are
set -u
cd "$(dirname "$0")/.." || exit 1
dir=${1:-build-gpu}
groups=${TPX_GPU_CHECK_GROUPS:-}

skip() {
  echo "gpu-check: SKIP: $*"
  exit 77
}

# ---- a usable GPU? (seconds) --------------------------------------------
command -v nvidia-smi >/dev/null 2>&1 ||
  skip "no usable GPU: nvidia-smi is not on PATH (no NVIDIA driver)"
q=$(timeout 30 nvidia-smi --query-gpu=compute_cap,name \
  --format=csv,noheader 2>&1) ||
  skip "no usable GPU: nvidia-smi failed: $(echo "$q" | head -1)"
first=$(echo "$q" | head -1)
cap=$(echo "$first" | cut -d, -f1 | tr -d ' ')
name=$(echo "$first" | cut -d, -f2- | sed 's/^ *//')
case $cap in
[0-9]*.[0-9]*) ;;
*) skip "no usable GPU: nvidia-smi says: $first" ;;
esac
arch=$(echo "$cap" | tr -d .)
mkdir -p "$dir" || exit 1
log=${TPX_GPU_CHECK_LOG:-$(cd "$dir" && pwd)/gpu-check.log}
: >"$log"
echo "gpu-check: $name (compute capability $cap, sm_$arch); full log: $log"
fails=0
line() { # group verdict detail
  printf 'gpu-check %-6s: %s%s\n' "$1" "$2" "${3:+ ($3)}" | tee -a "$log"
  [ "$2" = PASS ] || fails=$((fails + 1))
}

# ---- build (its own tree, optimised, native code for this GPU) ----------
PATH=$PATH:/usr/local/cuda/bin
export PATH
NVCC_APPEND_FLAGS="-gencode=arch=compute_$arch,code=sm_$arch"
export NVCC_APPEND_FLAGS
t0=$(date +%s)
{
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dbuildtype=release -Dcuda=enabled -Dnccl=enabled \
      -Dmpi=auto
  fi && meson compile -C "$dir"
} >>"$log" 2>&1
rc=$?
exe=$dir/tests/gpu/tpx-gpu-check
if [ $rc -ne 0 ] || [ ! -x "$exe" ]; then
  line build FAIL "rc $rc; no tpx-gpu-check: see the log"
  echo "gpu-check: FAIL (the build); full log: $log"
  exit 1
fi
line build PASS "$(($(date +%s) - t0)) s, sm_$arch"

# ---- the device checks ----------------------------------------------------
# shellcheck disable=SC2086
"$exe" $groups >>"$log" 2>&1
rc=$?
grep '^gpu-check ' "$log" | grep -v '^gpu-check build' | grep -v '^gpu-check suites'
grep -q '^gpu-check .*FAIL' "$log" && fails=$((fails + 1))
[ $rc -eq 0 ] || [ $rc -eq 77 ] || grep -q '^gpu-check .*FAIL' "$log" ||
  line checks FAIL "tpx-gpu-check exited $rc: see the log"
# nvidia-smi saw a GPU, CUDA cannot use it (e.g. a driver too old for
# this CUDA): no usable GPU after all
[ $rc -eq 77 ] && skip "no usable GPU for CUDA: $(grep SKIP "$log" | tail -1)"
grep '^#' "$log" | tail -12

# ---- the suites in that build: as in CI, then their device runs on the GPU
suite() { # group env-assignment suites...
  g=$1 envset=$2
  shift 2
  out=$(env "$envset" meson test -C "$dir" --num-processes 4 --no-rebuild \
    --print-errorlogs "$@" 2>&1)
  rc=$?
  echo "$out" >>"$log"
  sum=$(echo "$out" | grep -E '^(Ok|Fail|Skipped|Timeout):' | tr -s ' ' |
    tr '\n' ' ' | sed 's/ *$//')
  if [ $rc -eq 0 ]; then line "$g" PASS "$sum"; else line "$g" FAIL "$sum"; fi
}
if [ -z "$groups" ]; then
  # (not the gpu suite: it holds this script)
  suite suites TPX_TEST_DEVICE=sim --suite device --suite comm \
    --suite runtime
  suite cuda-suites TPX_TEST_DEVICE=cuda --suite runtime
fi

if [ $fails -eq 0 ]; then
  echo "gpu-check: PASS on $name; full log: $log"
  exit 0
fi
echo "gpu-check: FAIL; full log: $log"
exit 1
