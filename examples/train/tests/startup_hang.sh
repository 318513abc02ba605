#!/bin/sh
# startup_hang.sh TRAIN FIXTURES PHASE WANT [RANK [ARGS...]] — issue 28 C8:
# rank RANK (default 1) of `mpirun -np 2 tpx-train --backend mpi` stops
# itself (SIGSTOP, TPX_TRAIN_TEST_STOP=RANK:PHASE) as it enters a start-up
# phase; ARGS go to tpx-train. With TPX_COMM_TIMEOUT=3 the job must end
# within about the timeout, non-zero, with a message naming the rank and
# the phase (WANT, a grep pattern). Before, the other rank waited in
# MPI_Init / MPI_Comm_dup / MPI_Bcast for good.
set -u
train=$1 fix=$2 phase=$3 want=$4 rank=${5:-1}
shift 4
[ $# -gt 0 ] && shift
out=$(mktemp)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_rmaps_base_oversubscribe=1
start=$(date +%s)
TPX_COMM_TIMEOUT=3 TPX_TRAIN_TEST_STOP=$rank:$phase timeout 120 \
  mpirun --allow-run-as-root --oversubscribe -np 2 "$train" \
  --model "$fix/llama" --tokens "$fix/tokens.bin" --batch 4 --seq 16 \
  --steps 1 --lr 1e-3 --tp 2 --backend mpi "$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "startup_hang: FAIL: $*"; rm -f "$out"; exit 1; }
[ "$rc" -ne 0 ] || fail "the job exited 0"
[ "$rc" -ne 124 ] || fail "the job hung (killed by timeout after 120 s)"
grep -q "$want" "$out" || fail "no message: $want"
# 3 s timeout + MPI start-up and mpirun's teardown on a loaded machine
[ "$elapsed" -lt 30 ] || fail "the job took $elapsed s"
rm -f "$out"
echo "startup_hang $phase: ok ($elapsed s, exit $rc)"
