#!/bin/sh
# bench/coll/compare.sh — tpx `local` collectives next to a plain MPI loop.
#
# Usage: bench/coll/compare.sh [BUILD_DIR] [BYTES] [ITERS] [OPS...]
#   defaults: build 64M 20 all_reduce all_gather reduce_scatter
#
# For each op: tpx-bench-coll --backend local --ranks 4, then right after it
# tpx-bench-mpi-baseline (MPI_Allreduce / MPI_Allgather /
# MPI_Reduce_scatter_block) under `mpirun -np 4`; prints both outputs, then
# one summary line per op with busbw of both, their ratio, and local busbw
# over the memcpy reference measured in the local run. Targets (issue 6):
# ratio >= 2 and local/memcpy >= 0.30. Exit status 1 if any result is wrong.
set -u
BUILD=${1:-build}
BYTES=${2:-64M}
ITERS=${3:-20}
if [ $# -ge 3 ]; then shift 3; else shift $#; fi
OPS=${*:-all_reduce all_gather reduce_scatter}
NP=4
BENCH="$BUILD/bench/coll/tpx-bench-coll"
BASE="$BUILD/bench/coll/tpx-bench-mpi-baseline"
for exe in "$BENCH" "$BASE"; do
  [ -x "$exe" ] || { echo "compare.sh: $exe not built" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

field() { # field NAME JSON -> number
  printf '%s\n' "$2" | sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p"
}

status=0
summary=""
for op in $OPS; do
  out=$("$BENCH" --backend local --op "$op" --ranks $NP --bytes "$BYTES" \
        --iters "$ITERS" --json) || status=1
  printf '%s\n' "$out" | sed '$d'
  ljson=$(printf '%s\n' "$out" | tail -n 1)
  bout=$(mpirun --allow-run-as-root --oversubscribe -np $NP "$BASE" \
         --op "$op" --bytes "$BYTES" --iters "$ITERS" --json) || status=1
  printf '%s\n' "$bout" | sed '$d'
  bjson=$(printf '%s\n' "$bout" | tail -n 1)
  lbus=$(field busbw_gbps "$ljson"); mbus=$(field busbw_gbps "$bjson")
  mem=$(field memcpy_gbps "$ljson")
  line=$(awk -v op="$op" -v l="$lbus" -v m="$mbus" -v c="$mem" 'BEGIN {
    r = m > 0 ? l / m : 0; f = c > 0 ? l / c : 0;
    printf "%-15s %10.2f %10.2f %8.2fx %10.2f %9.2f  %s", op, l, m, r, c, f,
           (r >= 2 && f >= 0.30) ? "meets target" : "BELOW target" }')
  summary="$summary$line
"
done
echo "#"
echo "# summary: $NP ranks, $BYTES f32, $ITERS iters (busbw in GB/s)"
printf '# %-13s %10s %10s %9s %10s %9s\n' op local mpi ratio memcpy \
  local/memcpy
printf '%s' "$summary" | sed 's/^/  /'
exit $status
