#!/bin/sh
# broken_cli_test.sh TPX BROKEN_DIR — every misbehaving plugin of the broken
# fixtures, alone on the search path, against `tpx plan` (text and JSON),
# `tpx shard`, `tpx plugins` and `tpx check-plugin`: each command survives
# (exit 0 or 1, never a signal, never a silent 0 with no output), stdout
# stays valid JSON, and the output names the plugin's file.
set -u
TPX=$1 BROKEN=$2
fails=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpx-broken-cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

ok() { echo "PASS $1"; }
bad() { echo "FAIL $1"; sed 's/^/    /' "$WORK/out" | head -20; fails=$((fails + 1)); }

# A small model the broken fixtures serve (BrokenForCausalLM): the config and
# a safetensors file with three tensors (header + zero-filled data).
cat >"$WORK/config.json" <<'JSON'
{"architectures": ["BrokenForCausalLM"], "model_type": "qwen2",
 "hidden_size": 64, "num_hidden_layers": 1, "vocab_size": 128,
 "intermediate_size": 96, "num_attention_heads": 8,
 "num_key_value_heads": 8, "torch_dtype": "bfloat16",
 "tie_word_embeddings": false}
JSON
hdr='{"model.embed_tokens.weight":{"dtype":"BF16","shape":[128,64],"data_offsets":[0,16384]},"model.layers.0.self_attn.q_proj.weight":{"dtype":"BF16","shape":[64,64],"data_offsets":[16384,24576]},"lm_head.weight":{"dtype":"BF16","shape":[128,64],"data_offsets":[24576,40960]}}'
len=${#hdr}
printf "\\$(printf %o $((len % 256)))\\$(printf %o $((len / 256)))\\0\\0\\0\\0\\0\\0" \
  >"$WORK/model.safetensors"
printf '%s' "$hdr" >>"$WORK/model.safetensors"
dd if=/dev/zero bs=40960 count=1 2>/dev/null >>"$WORK/model.safetensors"

# survives NAME RC: exit 0 or 1 (not a signal, not a usage error)
survives() {
  if [ "$2" -le 1 ]; then ok "$1: exit $2"; else bad "$1: exit $2"; fi
}
# names NAME NEEDLE: the output (stdout + stderr) holds NEEDLE
names() {
  if grep -qF -- "$2" "$WORK/out"; then ok "$1"; else bad "$1: lacks '$2'"; fi
}

for p in register_exits ctor_crashes dtor_crashes stdout_noise pipe_garbage \
         grandchild abi_too_new; do
  dir="$WORK/plugins-$p"
  mkdir -p "$dir"
  cp "$BROKEN/$p.so" "$dir/"
  file="$dir/$p.so"
  # A refused plugin is named by its refusal; one that loads (stdout_noise,
  # pipe_garbage, grandchild) serves the plan or is named by plugin-failed.
  for fmt in text json; do
    TPX_PLUGIN_PATH="$dir" "$TPX" plan --config "$WORK/config.json" \
      --weights "$WORK/model.safetensors" --tp 2 --format $fmt \
      >"$WORK/stdout" 2>"$WORK/stderr"
    rc=$?
    cat "$WORK/stdout" "$WORK/stderr" >"$WORK/out"
    survives "$p: tpx plan ($fmt)" $rc
    [ -s "$WORK/stdout" ] && ok "$p: tpx plan ($fmt) printed a report" ||
      bad "$p: tpx plan ($fmt) printed nothing"
    if [ $fmt = json ]; then
      if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' \
           "$WORK/stdout" 2>/dev/null; then
        ok "$p: tpx plan json stays valid JSON"
      else
        bad "$p: tpx plan json is not valid JSON"
      fi
    fi
    case $p in
      stdout_noise|grandchild) names "$p: tpx plan ($fmt) plans" "lm_head" ;;
      *) names "$p: tpx plan ($fmt) names the file" "$file" ;;
    esac
  done
  if grep -q "stdout_noise:" "$WORK/stdout"; then
    bad "$p: plugin output reached stdout"
  fi
  TPX_PLUGIN_PATH="$dir" "$TPX" shard --weights "$WORK/model.safetensors" \
    --tp 2 --no-fsdp --out "$WORK/shard-$p" >"$WORK/out" 2>&1
  survives "$p: tpx shard" $?
  case $p in
    stdout_noise|grandchild) ;;
    *) names "$p: tpx shard names the file" "$file" ;;
  esac
  "$TPX" plugins --dir "$dir" >"$WORK/out" 2>&1
  survives "$p: tpx plugins" $?
  names "$p: tpx plugins names the file" "$file"
  "$TPX" check-plugin "$file" --timeout 5 >"$WORK/out" 2>&1
  rc=$?
  if [ $rc -eq 1 ]; then ok "$p: check-plugin fails it"; else bad "$p: check-plugin exit $rc, want 1"; fi
  names "$p: check-plugin names the file" "$file"
done

# The true cause, per fixture.
TPX_PLUGIN_PATH="$WORK/plugins-register_exits" "$TPX" plan \
  --config "$WORK/config.json" --weights "$WORK/model.safetensors" \
  --format json >"$WORK/out" 2>&1
names "register_exits: plugin-failed" "plugin-failed"
names "register_exits: exit() while loading" "exited with status 0 while loading"
TPX_PLUGIN_PATH="$WORK/plugins-dtor_crashes" "$TPX" plugins >"$WORK/out" 2>&1
names "dtor_crashes: blamed on unloading" "crashed with SIGSEGV (signal 11) while unloading"
TPX_PLUGIN_PATH="$WORK/plugins-abi_too_new" "$TPX" plan \
  --config "$WORK/config.json" --weights "$WORK/model.safetensors" \
  --format json >"$WORK/out" 2>/dev/null
names "abi_too_new: a JSON diagnostic" '"plugin-failed"'
names "abi_too_new: the ABI reason" "the plugin speaks 2.0"
TPX_PLUGIN_PATH="$WORK/plugins-pipe_garbage" "$TPX" plan \
  --config "$WORK/config.json" --weights "$WORK/model.safetensors" \
  --tp 2 >"$WORK/out" 2>&1
names "pipe_garbage: junk named as such" "held"

# A config's own tp plan holding NaN: the message quotes NaN, never tpx's
# internal sentinel ("\u0000tpx:nan").
mkdir -p "$WORK/none" "$WORK/nan"
sed 's/"tie_word_embeddings": false}/"tie_word_embeddings": false, "base_model_tp_plan": {"layers.*.self_attn.q_proj": NaN}}/' \
  "$WORK/config.json" >"$WORK/nan/config.json"
TPX_PLUGIN_PATH="$WORK/none" "$TPX" plan --config "$WORK/nan/config.json" \
  --weights "$WORK/model.safetensors" --tp 2 >"$WORK/out" 2>&1
names "NaN in a tp plan: quoted as NaN" "near 'NaN'"
if grep -q 'tpx:nan\|u0000' "$WORK/out"; then bad "NaN sentinel leaked"; else ok "NaN sentinel not leaked"; fi
# A plan file is bounded before it is read.
truncate -s 100M "$WORK/big-plan.json"
"$TPX" plan --config "$WORK/config.json" --weights "$WORK/model.safetensors" \
  --plan "$WORK/big-plan.json" >"$WORK/out" 2>&1
names "a 100 MB plan file is refused" "tpx reads plan files of at most 64 MB"
rm -f "$WORK/big-plan.json"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
