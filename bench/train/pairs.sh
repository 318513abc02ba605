# pairs.sh — the fair-run harness that bench/train/run.sh, bench/cp/run.sh
# and bench/moe/run.sh share (sourced, not run): the model and token batch
# in a temporary directory, tpx-train and torch runs with the same threads
# per rank (cores / world), records of each run, the medians with their
# min-max, ratios, and the load average with its NOISY mark
# (bench/README.md "Training" says what makes a run fair).
# The caller sets build, steps, py (an interpreter with torch) and lib
# (this folder, for stats.awk), then calls bench_init (bench/train's
# random Llama) or bench_setup (a caller that writes its own model).

loadavg() { cut -d' ' -f1 /proc/loadavg; }

# bench_setup NAME [BINARY...]: checks tpx-train and the other binaries
# named (exit 2 when one is not built), makes the temporary $dir (removed
# on exit), sets cores, rec (the records file), have_torch and omp_wait.
bench_setup() {
  train=$build/examples/train/tpx-train
  name=$1
  shift
  for b in "$train" "$@"; do
    [ -x "$b" ] || { echo "$(basename "$0"): $b not built" >&2; exit 2; }
  done
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tpx-bench-$name.XXXXXX")
  trap 'rm -rf "$dir"' EXIT INT TERM
  cores=$(nproc)
  rec=$dir/records
  : >"$rec"
  have_torch=0
  "$py" -c "import torch, transformers" 2>/dev/null && have_torch=1
  # tpx-train runs its products and loops on one OpenMP team per rank
  # (docs/TRAIN.md), so libgomp's default wait is left alone; the caller's
  # setting wins, and the header says which.
  omp_wait=${OMP_WAIT_POLICY:-default}
  return 0
}

# bench_init NAME H L NH KV I V B T: bench_setup, then the random Llama
# and its [B, T+1] batch in $dir.
bench_init() {
  gen=$build/bench/train/tpx-bench-train-model
  bench_setup "$1" "$gen"
  H=$2 L=$3 NH=$4 KV=$5 I=$6 V=$7 B=$8 T=$9
  "$gen" "$dir" "$H" "$L" "$NH" "$KV" "$I" "$V" "$B" "$T" >/dev/null
}

# bench_header TORCH_SIDE: the machine, tpx-train's BLAS (name, version,
# kernel, threads at world 1: `tpx-train --blas-info`, with its stderr line
# when OpenBLAS chose a fallback kernel on this CPU; docs/TRAIN.md), the
# model, the torch side.
bench_header() {
  bench_machine
  echo "model: hidden $H, $L layers, $NH heads ($KV kv), intermediate $I," \
       "vocab $V; batch $B x seq $T; $steps steps per run (first excluded)"
  echo "torch side: $1"
}

# bench_machine: the machine (cores, CPU model) and tpx-train's BLAS line.
bench_machine() {
  echo "machine: $cores cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  OPENBLAS_NUM_THREADS=$cores "$train" --blas-info 2>&1 | sed 's/^/tpx side: /'
}

# tpx_run SERIES WORLD ARGS...: one tpx-train run; records its tokens/s,
# its share of the step in collectives (SERIES-coll) and, when tpx-train's
# throughput line reports it ("cp collectives N%"), the share in cp
# collectives (SERIES-cpcoll), and when it reports an MoE dispatch share
# ("moe dispatch N%", "ep ... N%" or "dispatch N%"), that share
# (SERIES-moe).
tpx_run() {
  series=$1 world=$2
  shift 2
  th=$((cores / world)); [ "$th" -ge 1 ] || th=1
  wait_env=""; [ "$omp_wait" = default ] || wait_env="OMP_WAIT_POLICY=$omp_wait"
  out=$(env $wait_env OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th \
        "$train" --model "$dir" \
        --tokens "$dir/tokens.bin" --batch $B --seq $T --steps "$steps" \
        --lr 1e-4 --clip 1.0 "$@" 2>&1) || { echo "$series failed" >>"$rec"; \
        echo "  $series: failed: $(echo "$out" | tail -1)"; return 0; }
  tok=$(echo "$out" | sed -n 's/^throughput \([0-9.]*\) tokens.*/\1/p')
  coll=$(echo "$out" | sed -n 's/^throughput .* s  collectives \([0-9.]*\)%.*/\1/p')
  cpc=$(echo "$out" | sed -n 's/^throughput .*[ (]cp[a-z ]* \([0-9.]*\)%.*/\1/p')
  moe=$(echo "$out" | sed -n -E \
    's/^throughput .*[ (](moe|ep|dispatch)[a-z -]* ([0-9.]+)%.*/\2/p')
  echo "$series ${tok:-failed}" >>"$rec"
  echo "$series-coll ${coll:-failed}" >>"$rec"
  [ -z "$cpc" ] || echo "$series-cpcoll $cpc" >>"$rec"
  [ -z "$moe" ] || echo "$series-moe $moe" >>"$rec"
  echo "  $series: $tok tokens/s (collectives $coll%${cpc:+, of which cp $cpc%}${moe:+, MoE dispatch $moe%})"
}

# torch_run SERIES SCRIPT ARGS...: one torch run, SCRIPT given the model,
# the batch, B, T, the steps and the cores, then ARGS. Records its tokens/s
# and, when the script prints "CP cp_s=" or "MOE dispatch_s=", the share of
# the step in cp collectives (SERIES-cpcoll) or in the MoE dispatch
# (SERIES-moe).
torch_run() {
  [ "$have_torch" = 1 ] || return 0
  series=$1 script=$2
  shift 2
  out=$("$py" "$script" "$dir" "$dir/tokens.bin" $B $T "$steps" "$cores" "$@" \
        2>&1 || true)
  tok=$(echo "$out" | sed -n 's/^RESULT .*tokens_s=\([0-9.]*\).*/\1/p')
  echo "$series ${tok:-failed}" >>"$rec"
  cpc=$(echo "$out" | awk '/^RESULT/ { for (i = 1; i <= NF; i++)
      if ($i ~ /^step_s=/) s = substr($i, 8) }
    /^CP / { c = substr($2, 6) } END { if (s > 0 && c != "") printf "%.1f", 100 * c / s }')
  [ -z "$cpc" ] || echo "$series-cpcoll $cpc" >>"$rec"
  moe=$(echo "$out" | awk '/^RESULT/ { for (i = 1; i <= NF; i++)
      if ($i ~ /^step_s=/) s = substr($i, 8) }
    /^MOE / { c = substr($2, 12) } END { if (s > 0 && c != "") printf "%.1f", 100 * c / s }')
  [ -z "$moe" ] || echo "$series-moe $moe" >>"$rec"
  [ -n "$tok" ] && echo "  $series: $tok tokens/s${cpc:+ (cp collectives $cpc%)}${moe:+ (MoE dispatch $moe%)}" \
    || echo "  $series: failed: $(echo "$out" | tail -1)"
}

# bench_medians: the medians (min-max) of every series recorded, into
# $dir/stats, printed.
bench_medians() {
  echo "## medians (min-max) over the pairs, tokens/s"
  awk -f "$lib/stats.awk" "$rec" >"$dir/stats"
  awk 'NR == FNR { if (length($1) > w) w = length($1); next }
    { printf "  %-" (w > 14 ? w : 14) "s %9s  (%s-%s, %d runs, %d failed)\n",
        $1, $2, $3, $4, $5, $6 }' "$dir/stats" "$dir/stats"
}
med() { awk -v k="$1" '$1 == k { print $2 }' "$dir/stats"; }

# ratio LABEL A B [TARGET]: A / B, and whether it meets TARGET when given.
ratio() {
  awk -v l="$1" -v a="$2" -v b="$3" -v t="${4:-}" 'BEGIN {
    if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) {
      printf "  %-34s -\n", l; exit }
    r = a / b
    if (t == "") { printf "  %-34s %.2fx\n", l, r; exit }
    printf "  %-34s %.2fx  (target %s: %s)\n", l, r, t, (r >= t + 0) ? "met" : "NOT met" }'
}

# bench_load BEFORE|AFTER: prints the load average and keeps it in
# load_before / load_after.
bench_load() {
  l=$(loadavg)
  eval "load_$1=\$l"
  echo "load average $1: $l"
}

# bench_noisy: whether the load exceeded the cores before or after.
bench_noisy() {
  noisy=$(awk -v a="$load_before" -v b="$load_after" -v c="$cores" \
    'BEGIN { print (a > c || b > c) ? "NOISY" : "quiet" }')
  echo "## machine was $noisy (load $load_before before, $load_after after, $cores cores)"
  [ "$noisy" = quiet ] || echo "   a figure taken on a loaded machine is not a result: run again"
}
