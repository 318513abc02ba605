# cli_lib.sh — the checks shared by the checkpoint CLI tests (sourced by
# cli_shard_merge.sh, cli_split.sh, cli_transposed.sh, cli_fp8.sh; not a
# test of its own). The sourcing script sets $work (its scratch directory)
# before calling any of these; each check's output lands in $work/log, and
# a failed check prints the first 20 lines of it. $n counts the checks,
# $fails the failed ones; finish prints both and is the script's verdict.
n=0
fails=0
ok() { n=$((n + 1)); echo "ok: $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL: $1"; sed 's/^/    /' "$work/log" | head -20; }

# run WHAT CMD...: the command must succeed
run() {
  what=$1
  shift
  if "$@" >"$work/log" 2>&1; then ok "$what"; else bad "$what"; fi
}

# refused WHAT TEXT...: the last command (its output in $work/log, its
# exit status in $rc) failed naming each TEXT
refused() {
  what=$1
  shift
  good=1
  [ "$rc" -ne 0 ] || good=0
  for t in "$@"; do grep -qF -- "$t" "$work/log" || good=0; done
  if [ $good = 1 ]; then ok "$what"; else echo "    (exit $rc)" >>"$work/log"; bad "$what"; fi
}

# shard_merge WHAT SRC RANKS CHECKER CHECK_WHAT [SHARD FLAG...]: `tpx
# shard` of the checkpoint in SRC (with the flags) into RANKS, the rank
# files' slices checked by the python3 script CHECKER (SRC RANKS), `tpx
# merge` of them into RANKS.merged byte-identical to SRC/model.safetensors
# (RANKS.merged removed after; RANKS left to the caller). Reads $tpx.
shard_merge() {
  sm_what=$1
  sm_src=$2
  sm_ranks=$3
  sm_checker=$4
  sm_check=$5
  shift 5
  run "$sm_what: shard" "$tpx" shard --weights "$sm_src" "$@" --out "$sm_ranks"
  run "$sm_what: $sm_check" python3 "$sm_checker" "$sm_src" "$sm_ranks"
  run "$sm_what: merge" "$tpx" merge --in "$sm_ranks" --out "$sm_ranks.merged"
  run "$sm_what: merged file byte-identical" cmp "$sm_src/model.safetensors" \
    "$sm_ranks.merged/model.safetensors"
  rm -rf "$sm_ranks.merged"
}

# finish: the summary line; the script's exit status (0 when none failed)
finish() {
  echo "$n checks, $fails failed"
  [ "$fails" -eq 0 ]
}
