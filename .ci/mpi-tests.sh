#!/bin/sh
# .ci/mpi-tests.sh — run the comm suite on the mpi backend under
# `mpirun -np 4` (called by .ci/run after the meson tests).
#
# Usage: .ci/mpi-tests.sh [BUILD_DIR]   (default: build)
# Prints Check's summary line from rank 0; exits non-zero on failure.
# Skips (exit 0, with the reason) when the build has no MPI.
set -u
BUILD=${1:-build}
NP=${TPX_MPI_NP:-4}
EXE="$BUILD/tests/unit/comm/test_comm_mpi"

if [ ! -x "$EXE" ]; then
  echo "SKIP mpi tests: $EXE not built (libtpx configured without Open MPI)"
  exit 0
fi
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP mpi tests: mpirun not found on PATH"
  exit 0
fi

# Containers run CI as root and have fewer cores than ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Check must not fork after MPI_Init (the test forces CK_NOFORK too).
export CK_FORK=no
# Sanitizer builds: suppress Open MPI's exit-time allocations (see
# tests/unit/comm/meson.build); harmless otherwise.
SRC=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_MCA_mca_base_component_disable_dlclose=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1}:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$SRC/tests/unit/comm/mpi-lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"

echo "== comm suite on the mpi backend: mpirun -np $NP $EXE"
timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$NP" "$EXE"
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL mpi tests (exit $rc)"
  exit $rc
fi
echo "PASS mpi tests"
