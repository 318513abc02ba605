#!/bin/sh
# mpi_hang.sh MPIRUN PROG [MODE] — a hung MPI rank (SIGSTOP one of 4, at the
# point MODE names: all_reduce, dup, split; see mpi_hang.c) ends the job
# with a message naming it within the collective timeout (TPX_COMM_TIMEOUT
# = 2 s here), instead of spinning or blocking forever.
set -u
mpirun=$1
prog=$2
mode=${3:-all_reduce}
case $mode in
all_reduce) want="rank 2: TPX_TIMEOUT: mpi all_reduce over mesh dim 'tp': rank 3 did not arrive at all_reduce over mesh dim 'tp' within 2 s" ;;
dup) want="TPX_TIMEOUT: mpi create_mpi: rank [012]: start-up phase MPI_Comm_dup (the world communicator) did not complete within 2 s" ;;
split) want="TPX_TIMEOUT: mpi split over the world: rank 3 did not arrive at split over the world within 2 s" ;;
*) echo "mpi_hang: unknown mode $mode"; exit 2 ;;
esac
out=$(mktemp)
start=$(date +%s)
TPX_COMM_TIMEOUT=2 timeout 100 "$mpirun" --allow-run-as-root --oversubscribe \
  -np 4 "$prog" "$mode" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "mpi_hang: FAIL: $*"; rm -f "$out"; exit 1; }
[ "$rc" -ne 0 ] || fail "the job exited 0"
[ "$rc" -ne 124 ] || fail "the job hung (killed by timeout after 100 s)"
grep -q "$want" "$out" || fail "no message: $want"
# 2 s timeout + a 2 s roll call + mpirun's teardown; a hang took 100 s.
[ "$elapsed" -lt 60 ] || fail "the job took $elapsed s"
rm -f "$out"
echo "mpi_hang $mode: ok ($elapsed s, exit $rc)"
