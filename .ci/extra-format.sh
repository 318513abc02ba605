#!/bin/sh
# The house format: every tracked C / CUDA file is clean under the root
# .clang-format (clang-format 14, Debian 12's; tools/install-deps.sh
# installs it). To fix: clang-format -i FILE.
# usage: .ci/extra-format.sh [BUILD_DIR]   (the build dir is not used)
set -eu
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  echo "FAIL format: clang-format is not installed (tools/install-deps.sh)"
  exit 1
fi
files=$(git ls-files '*.c' '*.h' '*.cu')
if echo "$files" | xargs clang-format --dry-run --Werror 2>"${TMPDIR:-/tmp}/tpx-format.log"; then
  echo "PASS format: $(echo "$files" | wc -l) files clean under .clang-format ($(clang-format --version | sed 's/.*version \([0-9.]*\).*/\1/'))"
else
  grep -m 20 'error:' "${TMPDIR:-/tmp}/tpx-format.log" | sed 's/: error:.*//' | sort -u
  echo "FAIL format: files above differ from clang-format's output (clang-format -i FILE)"
  exit 1
fi
