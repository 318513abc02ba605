#!/bin/sh
# cli_ux.sh TPX SOURCE_DIR — what a new user hits first with `tpx plan`
# (issue 12, item 5): limits named in the error, warnings for option
# combinations that do nothing, config and weights of different models, the
# words of the uneven-shard warning, the verdict screen, --summary, grouped
# per_rank entries in JSON, Hugging Face tp_plan files, closest-key hints.
set -u
TPX=$1 SRC=$2
CFG=$SRC/tests/data/configs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpx-ux.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
fails=0

# run WANT_RC NAME ARGS...: run `tpx ARGS` into $WORK/out (stdout) and
# $WORK/err (stderr); check the exit code.
run() {
  want=$1 name=$2
  shift 2
  "$TPX" "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, want $want"; head -5 "$WORK/err"; fails=$((fails + 1))
  else
    echo "PASS $name"
  fi
}
# has FILE NEEDLE NAME / lacks FILE NEEDLE NAME
has() {
  if grep -qF -- "$2" "$WORK/$1"; then echo "PASS $3"; else
    echo "FAIL $3: $1 lacks '$2'"; head -5 "$WORK/$1"; fails=$((fails + 1)); fi
}
lacks() {
  if grep -qF -- "$2" "$WORK/$1"; then
    echo "FAIL $3: $1 holds '$2'"; fails=$((fails + 1)); else echo "PASS $3"; fi
}

L=$CFG/Llama-3.2-1B/config.json
run 2 "--tp beyond the limit" plan --config "$L" --tp 1048577
has err "--tp expects a positive integer of at most 1048576, got '1048577'" "the error says the limit"
run 2 "mesh beyond the limit" plan --config "$L" --tp 1024 --dp-shard 1024 --dp-replicate 2
has err "at most 1048576 ranks" "the mesh error says the limit"

run 0 "--no-fsdp with --dp-shard 2" plan --config "$L" --no-fsdp --dp-shard 2
has err "warning: --no-fsdp with --dp-shard 2" "warns that dp_shard shards nothing"
run 0 "--no-fsdp alone" plan --config "$L" --no-fsdp --tp 2
lacks err "warning" "no warning without dp_shard"

run 1 "uneven shards" plan --config "$L" --tp 3
has out "682 columns (the last ones short or empty)" "dim-1 shards are columns"
has out "682 rows (the last ones short or empty)" "dim-0 shards are rows"

run 1 "config and weights of different models" plan --config "$L" --weights "$SRC/examples/ckpt/" --tp 2
has err "describe different models: tensor 'model.embed_tokens.weight' is [256, 64] in the weights but [128256, 2048] from the config" "names the tensor and both shapes"
run 0 "config and weights of one model" plan --config "$SRC/examples/ckpt/config.json" --weights "$SRC/examples/ckpt/" --tp 8
lacks out "skeleton-fallback" "no fallback when they agree"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
