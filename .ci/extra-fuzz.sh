#!/bin/sh
# libFuzzer over every parser for 60 s each (FUZZ_SECONDS to change), when
# clang is installed; fails on any crash, leak or timeout and keeps the
# reproducer under build-fuzz/fuzz/artifacts/.
# usage: .ci/extra-fuzz.sh [BUILD_DIR]   (BUILD_DIR is ignored: own build)
set -eu
if ! command -v clang >/dev/null 2>&1; then
  echo "SKIP fuzz: clang not installed"
  exit 0
fi
# clang without its fuzzer runtime (libclang-rt-*-dev) cannot link a target.
probe=$(mktemp -d)
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' > "$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2> "$probe/err"; then
  echo "SKIP fuzz: clang cannot link -fsanitize=fuzzer (install libclang-rt-dev):"
  head -3 "$probe/err"
  rm -rf "$probe"
  exit 0
fi
rm -rf "$probe"
dir=build-fuzz
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang meson setup "$dir" -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dtests=disabled > "$dir.setup.log" 2>&1 ||
    { cat "$dir.setup.log"; exit 1; }
fi
meson compile -C "$dir" > "$dir.compile.log" 2>&1 || { tail -50 "$dir.compile.log"; exit 1; }
fuzz/run.sh "$dir" "${FUZZ_SECONDS:-60}"
