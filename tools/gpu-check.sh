#!/bin/sh
# tools/gpu-check.sh — prove the GPU path in one command, on a machine with
# an NVIDIA GPU (H100 / H200 class, CUDA 13): build an optimised tree with
# CUDA + NCCL for the GPU found, run every device check, print one line per
# group, exit 0 only if all pass. Without a usable GPU: exit 77 within
# seconds, naming why. Nothing is fetched from the network: what the lent
# GPU machines lack (jansson, xxhash, check, pkg-config) comes from the Debian
# packages committed in tools/gpu-deps/ (bootstrap.sh unpacks them into
# BUILD_DIR/deps); CUDA is found by nvcc when /usr/local/cuda is absent,
# NCCL in the pip package nvidia-nccl-cu13 when CUDA's root lacks it.
#
# usage: tools/gpu-check.sh [BUILD_DIR]     (default: build-gpu)
# env:   TPX_GPU_CHECK_LOG   the full log (default: BUILD_DIR/gpu-check.log;
#                            through the device tool: $OUT/gpu-check.log)
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
#   cuda-suites  the runtime suite again with TPX_TEST_DEVICE=cuda: every TP,
#           FSDP, expert-parallel (rt_ep) and MoE dispatch (moe_dispatch)
#           case's device-memory run on the GPU (managed memory), held
#           against its host run as the sim runs are
set -u
cd "$(dirname "$0")/.." || exit 1
dir=${1:-build-gpu}
groups=${TPX_GPU_CHECK_GROUPS:-}

start=$(date +%s)
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

# ---- what the machine lacks (seconds) ------------------------------------
# python3's folder: pip's meson and ninja live there on the lent machines
py=$(command -v python3) && PATH=$PATH:$(dirname "$py")
PATH=$PATH:/usr/local/cuda/bin
meson=meson
command -v meson >/dev/null 2>&1 || meson="python3 -m mesonbuild.mesonmain"
# CUDA's root: /usr/local/cuda, else the folder above nvcc's bin/
cuda=${CUDA_PATH:-/usr/local/cuda}
if [ ! -d "$cuda/include" ] && nvcc=$(command -v nvcc); then
  cuda=$(dirname "$(dirname "$nvcc")")
fi
CUDA_PATH=$cuda
export PATH CUDA_PATH
# NCCL: beside CUDA, else the pip package nvidia-nccl-cu13 (lib/libnccl.so.2)
nccl=$cuda
if [ ! -f "$cuda/include/nccl.h" ]; then
  nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' \
    2>/dev/null) || nccl=$cuda
fi
for d in "$nccl/lib" "$cuda/lib64" /usr/local/nvidia/lib64; do
  [ -d "$d" ] && LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
export LD_LIBRARY_PATH
echo "gpu-check: CUDA at $cuda (nvcc: $(command -v nvcc || echo none)), NCCL at $nccl"
. tools/gpu-deps/bootstrap.sh
gpu_deps_bootstrap "$dir/deps" >"$dir/deps.out"
rc=$?
tee -a "$log" <"$dir/deps.out"
if [ $rc -ne 0 ]; then
  line build FAIL "cannot unpack tools/gpu-deps/*.deb"
  exit 1
fi

# ---- build (its own tree, optimised, native code for this GPU) ----------
NVCC_APPEND_FLAGS="-gencode=arch=compute_$arch,code=sm_$arch"
export NVCC_APPEND_FLAGS
t0=$(date +%s)
{
  if [ ! -f "$dir/build.ninja" ]; then
    $meson setup "$dir" -Dbuildtype=release -Dcuda=enabled -Dnccl=enabled \
      -Dmpi=auto -Dgpu_root="$cuda" -Dnccl_root="$nccl"
  fi && $meson compile -C "$dir" -j "$(nproc)"
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
# each group's line gets the seconds it took (the lent machine's window is
# short: ~540 s for the whole script)
t1=$(date +%s)
# shellcheck disable=SC2086
{
  "$exe" $groups 2>&1
  echo "gpu-check-rc $?"
} | while IFS= read -r l; do
  case $l in
  'gpu-check '*)
    now=$(date +%s)
    l="$l [$((now - t1)) s]"
    t1=$now
    ;;
  esac
  printf '%s\n' "$l"
done >>"$log"
rc=$(sed -n 's/^gpu-check-rc //p' "$log" | tail -1)
rc=${rc:-1}
grep '^gpu-check ' "$log" | grep -v '^gpu-check build' | grep -v '^gpu-check suites' |
  grep -v '^gpu-check cuda-suites'
grep -q '^gpu-check .*FAIL' "$log" && fails=$((fails + 1))
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || grep -q '^gpu-check .*FAIL' "$log" ||
  line checks FAIL "tpx-gpu-check exited $rc: see the log"
# nvidia-smi saw a GPU, CUDA cannot use it (e.g. a driver too old for
# this CUDA): no usable GPU after all
[ "$rc" -eq 77 ] && skip "no usable GPU for CUDA: $(grep SKIP "$log" | tail -1)"
grep '^#' "$log" | tail -12

# ---- the suites in that build: as in CI, then their device runs on the GPU
suite() { # group env-assignment suites...
  g=$1 envset=$2 ts=$(date +%s)
  shift 2
  # shellcheck disable=SC2086 # $meson may be "python3 -m mesonbuild.mesonmain"
  out=$(env "$envset" $meson test -C "$dir" --num-processes 4 --no-rebuild \
    --print-errorlogs "$@" 2>&1)
  rc=$?
  echo "$out" >>"$log"
  sum=$(echo "$out" | grep -E '^(Ok|Fail|Skipped|Timeout):' | tr -s ' ' |
    tr '\n' ' ' | sed 's/ *$//')"; $(($(date +%s) - ts)) s"
  if [ $rc -eq 0 ]; then line "$g" PASS "$sum"; else line "$g" FAIL "$sum"; fi
}
if [ -z "$groups" ]; then
  # (not the gpu suite: it holds this script)
  suite suites TPX_TEST_DEVICE=sim --suite device --suite comm \
    --suite runtime
  suite cuda-suites TPX_TEST_DEVICE=cuda --suite runtime
fi

echo "gpu-check: $(($(date +%s) - start)) s in all" | tee -a "$log"
if [ $fails -eq 0 ]; then
  echo "gpu-check: PASS on $name; full log: $log"
  exit 0
fi
echo "gpu-check: FAIL; full log: $log"
exit 1
