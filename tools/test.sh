#!/bin/sh
# Build (configuring if needed) and run the whole test suite verbosely, so
# Check's "Checks: N, Failures: 0, Errors: 0" lines reach the console.
# usage: tools/test.sh [BUILD_DIR] [meson setup options...]
set -eu
cd "$(dirname "$0")/.."
dir=${1:-build}
# mpirun refuses root and more ranks than cores unless told otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
tools/build.sh "$@"
meson test -C "$dir" -v --print-errorlogs
