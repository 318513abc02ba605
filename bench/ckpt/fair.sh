#!/bin/sh
# fair.sh — `tpx shard` and `tpx merge` against the plain copy of the same
# bytes, with the same durability, run fairly (bench/README.md
# "Checkpoints"). A ~1 GB bf16 Llama-shaped checkpoint in two files
# (tpx-ckpt-test gen) is
#   A: sharded at tp 2 x dp_shard 4 by `tpx shard` (which fsyncs every rank
#      file before renaming it), then `sync`;
#   B: copied whole by `cp -r`, then `sync`;
# and the 8 rank files are
#   A: merged back by `tpx merge`, then `sync`;
#   B: concatenated by `cat > file`, then `sync`.
# Besides the wall time, each run's CPU time (user + system of the command
# and its sync, "-cpu" series): the part a loaded machine distorts least.
# PAIRS interleaved A/B pairs each (the page cache warm, the outputs removed
# and synced between runs), medians with min-max, the load average before
# and after ("NOISY" when it exceeds the core count), and the ratios issue
# 19 names: copy time / tpx time (>= 0.9 means tpx runs at >= 0.9x the speed
# of the copy). Disk: ~4 GB in $TMPDIR, removed at the end.
# usage: bench/ckpt/fair.sh [BUILD_DIR] [PAIRS]   (5 pairs)
set -eu
build=${1:-build}
pairs=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
tpx=$build/tools/tpx
gen=$build/tools/tpx-ckpt-test
for b in "$tpx" "$gen"; do
  [ -x "$b" ] || { echo "fair.sh: $b not built" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-bench-ckpt-fair.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
w=$work/weights
mkdir -p "$w"
cat >"$work/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
 "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 7,
 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
 "vocab_size": 32000, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "rms_norm_eps": 1e-05}
JSON
"$gen" gen "$work/config.json" "$w" 600MB >/dev/null
[ -f "$w/config.json" ] || cp "$work/config.json" "$w/config.json"
bytes=$(cat "$w"/*.safetensors | wc -c)
cores=$(nproc)
loadavg() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
rec=$work/records
: >"$rec"
# CPU seconds (user + system) of this shell's children between two
# `times` outputs (a plain builtin: run in this shell, not a subshell).
cpu_between() {
  awk 'FNR == 2 { split($1, u, "m"); split($2, s, "m")
                  t[++n] = u[1] * 60 + u[2] + s[1] * 60 + s[2] }
       END { printf "%.4f", t[2] - t[1] }' "$1" "$2"
}
# This VM hands the memory its guest frees back to the host a few seconds
# after the free (virtio-balloon free page reporting); a kernel copy into
# such a page faults on the host and runs 5-10x slower. A command that
# runs right after another freed 1.1 GB gets warm pages; the one after it
# gets cold ones. So each command's own output of the pair before is
# removed right before it runs: every command frees, then fills, the same
# 1.1 GB (bench/README.md "Checkpoints").
timed() { # series command...
  series=$1
  shift
  times >"$work/times0"
  a=$(now)
  if "$@" >/dev/null 2>"$work/err" && sync; then
    b=$(now)
    times >"$work/times1"
    awk -v a="$a" -v b="$b" -v s="$series" 'BEGIN { printf "%s %.4f\n", s, b - a }' >>"$rec"
    echo "$series-cpu $(cpu_between "$work/times0" "$work/times1")" >>"$rec"
    tail -2 "$rec" | tr '\n' ' ' | sed 's/^/  /; s/ $/\n/'
  else
    echo "$series failed" >>"$rec"
    echo "  $series failed: $(tail -1 "$work/err")"
  fi
}
shard() { "$tpx" shard --config "$w/config.json" --weights "$w" --tp 2 \
            --dp-shard 4 --out "$work/ranks"; }
copy() { cp -r "$w" "$work/copy"; }
merge() { "$tpx" merge --in "$work/ranks" --out "$work/merged"; }
catall() { mkdir -p "$work/cat" && cat "$work/ranks"/*.safetensors >"$work/cat/all"; }
clean() { rm -rf "$@"; sync; }

echo "machine: $cores cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "checkpoint: $bytes bytes in $(ls "$w"/*.safetensors | wc -l) files; tp 2 x dp_shard 4"
cat "$w"/*.safetensors >/dev/null # warm the page cache
load_before=$(loadavg)
echo "load average before: $load_before"
for p in $(seq "$pairs"); do
  clean "$work/ranks"
  timed shard shard
  clean "$work/copy"
  timed cp-r copy
  cat "$work/ranks"/* >/dev/null 2>&1 || true
  clean "$work/merged"
  timed merge merge
  clean "$work/cat"
  timed cat catall
  echo "## pair $p of $pairs done (load $(loadavg))"
done
load_after=$(loadavg)
echo "load average after: $load_after"
if "$gen" cmp "$w" "$work/merged" >/dev/null 2>&1; then
  echo "merged checkpoint: tensor data identical to the source"
fi

echo "## medians (min-max), seconds, each followed by sync; -cpu: CPU seconds"
awk -f "$here/../train/stats.awk" "$rec" | awk '{
  printf "  %-9s %7s s  (%s-%s, %d runs, %d failed)\n", $1, $2, $3, $4, $5, $6
  m[$1] = $2 }
END {
  if (m["shard"] + 0 > 0 && m["cp-r"] != "-")
    printf "  speed of tpx shard / cp -r: %.2fx (target 0.9: %s)\n",
      m["cp-r"] / m["shard"], (m["cp-r"] / m["shard"] >= 0.9) ? "met" : "NOT met"
  if (m["merge"] + 0 > 0 && m["cat"] != "-")
    printf "  speed of tpx merge / cat:   %.2fx (target 0.9: %s)\n",
      m["cat"] / m["merge"], (m["cat"] / m["merge"] >= 0.9) ? "met" : "NOT met"
  if (m["cp-r-cpu"] + 0 > 0 && m["shard-cpu"] != "-")
    printf "  CPU time of tpx shard / cp -r: %.2fx\n", m["shard-cpu"] / m["cp-r-cpu"]
  if (m["cat-cpu"] + 0 > 0 && m["merge-cpu"] != "-")
    printf "  CPU time of tpx merge / cat:   %.2fx\n", m["merge-cpu"] / m["cat-cpu"] }'
noisy=$(awk -v a="$load_before" -v b="$load_after" -v c="$cores" \
  'BEGIN { print (a > c || b > c) ? "NOISY" : "quiet" }')
echo "## machine was $noisy (load $load_before before, $load_after after, $cores cores)"
