#!/bin/sh
# Regenerate core/tpx.symbols from a built libtpx.so (default: build/core/libtpx.so).
set -eu
lib=${1:-build/core/libtpx.so}
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRV]$/ {print $3}' | sort -u > core/tpx.symbols
echo "core/tpx.symbols: $(wc -l < core/tpx.symbols) symbols"
