#!/bin/sh
# Configure BUILD_DIR (default: build) if it is not configured yet, then build.
# usage: tools/build.sh [BUILD_DIR] [meson setup options...]
set -eu
cd "$(dirname "$0")/.."
dir=${1:-build}
[ $# -gt 0 ] && shift
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "$@"
fi
meson compile -C "$dir"
