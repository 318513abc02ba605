#!/bin/sh
# run.sh — the planning benchmark: tpx-bench-plan at ~100k and ~1M tensors
# (tp=8 x dp_shard=8), the Python fnmatch baseline on the same 1M FQNs, and
# the ratios. Usage: bench/plan/run.sh [BUILD_DIR]   (default: build)
# Prints figures; never fails on timing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
bin="$build/bench/plan/tpx-bench-plan"
[ -x "$bin" ] || { echo "run.sh: $bin not built (ninja -C $build)" >&2; exit 2; }
py=${PYTHON:-python3}
dump=$(mktemp "${TMPDIR:-/tmp}/tpx-bench-fqns.XXXXXX")
trap 'rm -f "$dump"' EXIT INT TERM

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }

echo "## 100k tensors"
small=$("$bin" --experts 332 --tp 8 --dp-shard 8)
echo "$small" | grep -v '^RESULT'
echo "## 1M tensors"
big=$("$bin" --experts 3328 --tp 8 --dp-shard 8 --dump-fqns "$dump")
echo "$big" | grep -v '^RESULT'
echo "## Python fnmatch baseline (same FQNs, same keys)"
base=$("$py" "$here/plan_baseline.py" "$dump")
echo "$base" | grep -v '^RESULT'

s_res=$(echo "$small" | grep '^RESULT')
b_res=$(echo "$big" | grep '^RESULT')
p_res=$(echo "$base" | grep '^RESULT')
c_match=$(echo "$b_res" | field match_cpu)
c_apply=$(echo "$b_res" | field apply_cpu)
c_build=$(echo "$b_res" | field build_cpu)
w_apply=$(echo "$b_res" | field apply_s)
w_build=$(echo "$b_res" | field build_s)
s_apply=$(echo "$s_res" | field apply_cpu)
s_build=$(echo "$s_res" | field build_cpu)
p_match=$(echo "$p_res" | field match_cpu)
c_matched=$(echo "$b_res" | sed -n 's/.* matched=\([0-9]*\).*/\1/p')
p_matched=$(echo "$p_res" | sed -n 's/.*matched=\([0-9]*\).*/\1/p')
echo "## summary (1M tensors, tp=8 x dp_shard=8; CPU seconds, wall in brackets)"
awk -v cm="$c_match" -v ca="$c_apply" -v cb="$c_build" -v sa="$s_apply" \
    -v sb="$s_build" -v pm="$p_match" -v cn="$c_matched" -v pn="$p_matched" \
    -v wa="$w_apply" -v wb="$w_build" '
BEGIN {
  printf "  apply (match + placements + FSDP + per-rank bytes): %.3f s [%.3f s] (target < 1 s)\n", ca, wa
  printf "  build (model from the builder API): %.3f s [%.3f s]; build + apply %.3f s\n", cb, wb, cb + ca
  printf "  key matching: C %.4f s, Python fnmatch %.3f s: %.0fx (target >= 100x)\n", cm, pm, pm / cm
  printf "  whole apply vs Python matching alone: %.0fx\n", pm / ca
  printf "  10x tensors: apply %.2fx, build + apply %.2fx the time (target <= 12x)\n", ca / sa, (cb + ca) / (sb + sa)
  printf "  matched modules: C %d, Python %d (%s)\n", cn, pn, cn == pn ? "same" : "DIFFERENT"
}'
