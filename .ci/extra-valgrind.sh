#!/bin/sh
# The conformance harness under valgrind on one bundled plugin: no leaks, no
# invalid accesses in the host (the plugin itself runs in forked children).
# usage: .ci/extra-valgrind.sh [BUILD_DIR]
set -eu
BUILD=${1:-build}
if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIP valgrind: not installed"
  exit 0
fi
valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
  "$BUILD/tools/tpx" check-plugin "$BUILD/plugins/llama/libtpx_llama.so" \
  --config tests/data/configs/Llama-3.2-1B/config.json > "$BUILD/valgrind-check-plugin.log"
tail -1 "$BUILD/valgrind-check-plugin.log"
echo "PASS valgrind: tpx check-plugin on the llama plugin is clean"
