#!/bin/sh
# cli_truth.sh — what `tpx plan` says is true (issue 28): no per-rank head
# count for a split tp cannot make; a Diagnostics count that says how many
# lines follow. Usage: cli_truth.sh TPX_BINARY SOURCE_DIR
set -u
tpx=$1
src=$2
cfg="$src/tests/data/configs"
out=$(mktemp "${TMPDIR:-/tmp}/tpx-cli.XXXXXX")
trap 'rm -f "$out"' EXIT INT TERM
. "$(dirname "$0")/cli_lib.sh"

# 14 heads, 2 kv heads at tp 4: heads-not-divisible, so no per-rank count.
expect 1 "qwen2.5 tp4" -- --config "$cfg/Qwen2.5-0.5B/config.json" --tp 4
has "Attention: 14 heads, 2 kv heads, head_dim 64; tp 4 cannot split them per rank (heads-not-divisible)" "no impossible split"
lacks "per rank after TP: 3 heads" "no 3 heads, 0 kv heads"
expect 0 "qwen2.5 tp2" -- --config "$cfg/Qwen2.5-0.5B/config.json" --tp 2
has "per rank after TP: 7 heads, 1 kv heads" "a split that happens is shown"

# Two optional keys share one line: the count says so.
expect 0 "llama tp2" -- --config "$cfg/Llama-3.2-1B/config.json" --tp 2
has "Diagnostics (2, on 1 line):" "the count matches the lines"
lacks "Diagnostics (2):" "not a bare 2 over one line"

echo "$n checks, $fails failed"
[ "$fails" -eq 0 ]
