#!/bin/sh
# mpi_hang.sh MPIRUN PROG — a hung MPI rank (SIGSTOP one of 4) ends the job
# with a message naming it within the collective timeout (TPX_COMM_TIMEOUT
# = 2 s here), instead of spinning forever. See mpi_hang.c.
set -u
mpirun=$1
prog=$2
out=$(mktemp)
start=$(date +%s)
TPX_COMM_TIMEOUT=2 timeout 100 "$mpirun" --allow-run-as-root --oversubscribe \
  -np 4 "$prog" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "mpi_hang: FAIL: $*"; rm -f "$out"; exit 1; }
[ "$rc" -ne 0 ] || fail "the job exited 0"
[ "$rc" -ne 124 ] || fail "the job hung (killed by timeout after 100 s)"
grep -q "rank 2: TPX_TIMEOUT: mpi all_reduce over mesh dim 'tp': rank 3 did not arrive at all_reduce over mesh dim 'tp' within 2 s" "$out" ||
  fail "no timeout message naming rank 3 and mesh dim 'tp'"
# 2 s timeout + a 2 s roll call + mpirun's teardown; a hang took 100 s.
[ "$elapsed" -lt 60 ] || fail "the job took $elapsed s"
rm -f "$out"
echo "mpi_hang: ok ($elapsed s, exit $rc)"
