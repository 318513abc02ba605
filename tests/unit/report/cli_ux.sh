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

run 2 "config and weights of different models" plan --config "$L" --weights "$SRC/examples/ckpt/" --tp 2
has err "describe different models: tensor 'model.embed_tokens.weight' is [256, 64] in the weights but [128256, 2048] from the config" "names the tensor and both shapes"
run 0 "config and weights of one model" plan --config "$SRC/examples/ckpt/config.json" --weights "$SRC/examples/ckpt/" --tp 8
lacks out "skeleton-fallback" "no fallback when they agree"

# The error that matters is on the first screen; --summary is that screen.
run 1 "verdict first" plan --config "$L" --tp 3
if head -n 8 "$WORK/out" | grep -q "error \[heads-not-divisible\]" &&
   head -n 1 "$WORK/out" | grep -qx "Verdict: NOT OK (1 error)"; then
  echo "PASS the head error is on the first screen"; else
  echo "FAIL the head error is not on the first screen"; head -10 "$WORK/out"; fails=$((fails + 1)); fi
has out "uneven-shard warnings follow from it" "the uneven shards fold under it"
if grep -q "^  warning \[uneven-shard\]" "$WORK/out"; then
  echo "FAIL an uneven-shard warning stands alone"; fails=$((fails + 1)); else
  echo "PASS no uneven-shard warning stands alone"; fi
run 1 "--summary" plan --config "$L" --tp 3 --summary
lines=$(wc -l < "$WORK/out")
[ "$lines" -le 24 ] && echo "PASS --summary is $lines lines" ||
  { echo "FAIL --summary is $lines lines"; fails=$((fails + 1)); }
lacks out "Parameters (identical layers collapsed)" "--summary prints only the verdict"
has out "per rank  parameters" "--summary shows per-rank memory"
run 0 "--summary ok" plan --config "$CFG/Qwen3-0.6B/config.json" --tp 4 --summary
has out "Verdict: OK" "--summary of a good plan"
run 2 "--summary with json" plan --config "$L" --summary --format json
has err "--summary is a text view" "--summary refuses json"

# Mixtral with --weights: "closest existing" names only modules that exist.
python3 - "$CFG/Mixtral-8x7B-v0.1/config.json" "$WORK/mixtral" <<'PY'
import json, os, struct, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=64, intermediate_size=96, num_hidden_layers=2, vocab_size=128)
os.makedirs(sys.argv[2])
json.dump(c, open(os.path.join(sys.argv[2], "config.json"), "w"))
H, I, V, E = 64, 96, 128, c["num_local_experts"]
D = H // c["num_attention_heads"]
t = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H], "lm_head.weight": [V, H]}
for l in range(2):
    p = "model.layers.%d." % l
    t.update({p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [c["num_key_value_heads"] * D, H],
              p + "self_attn.v_proj.weight": [c["num_key_value_heads"] * D, H], p + "self_attn.o_proj.weight": [H, H],
              p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
              p + "block_sparse_moe.gate.weight": [E, H]})
    for e in range(E):
        q = p + "block_sparse_moe.experts.%d." % e
        t.update({q + "w1.weight": [I, H], q + "w2.weight": [H, I], q + "w3.weight": [I, H]})
off, h = 0, {}
for n, shp in t.items():
    h[n] = {"dtype": "BF16", "shape": shp, "data_offsets": [off, off + 2 * shp[0] * (shp[1] if len(shp) > 1 else 1)]}
    off = h[n]["data_offsets"][1]
b = json.dumps(h).encode()
with open(os.path.join(sys.argv[2], "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(b)) + b)
    f.truncate(8 + len(b) + off)
PY
# Per-expert tensors fold onto the moe plugin's fused experts; the default
# plan's MLP keys are optional there (torch warns), with one warning.
# The text folds those infos into one line (issue 18 item 12); each one,
# with its hint, is in the JSON report.
run 0 "mixtral --weights" plan --config "$WORK/mixtral/config.json" --weights "$WORK/mixtral" --tp 8
has out "optional keys for other checkpoint variants (e.g. fused projections) matched nothing, as expected: 'model.layers.*.self_attn.qkv_proj'" "optional keys folded into one line"
has out "moe-experts-replicated" "the replicated experts are named"
run 0 "mixtral --weights json" plan --config "$WORK/mixtral/config.json" --weights "$WORK/mixtral" --tp 8 --format json
has out "closest existing: 'model.layers.*.mlp.experts', 'model.layers.*.mlp.gate'" "hints name existing modules"
has out "moe-experts-replicated" "the replicated experts are named (json)"
lacks out "block_sparse_moe.up_proj" "no hint names a module that does not exist"
lacks out "self_attn.up_proj" "no hint names a module that does not exist (2)"

# --plan also takes a Hugging Face tp_plan, or says why it cannot.
run 0 "--plan with a HF tp_plan" plan --config "$SRC/examples/ckpt/config.json" --tp 8 --plan "$SRC/examples/hf-tp-plan.json"
has out "is a Hugging Face tp_plan: 1 key(s) from the model's root used as given, 7 relative to the base model prefixed with 'model.'" "the trace says how it was read"
has out "model.layers.*.mlp.down_proj                       rowwise" "translated keys in the plan"
printf '{"layers.*.mlp.up_proj": "local_packed_rowwise"}' > "$WORK/hf-bad.json"
run 2 "--plan with an untranslatable HF string" plan --config "$SRC/examples/ckpt/config.json" --tp 2 --plan "$WORK/hf-bad.json"
has err "'local_packed_rowwise' has no faithful translation" "explains why not"
has err "$WORK/hf-bad.json" "names the file"

# A million ranks: per_rank groups identical ranks, as the text does.
run 1 "--tp 1000000 json" plan --config "$L" --tp 1000000 --format json
size=$(wc -c < "$WORK/out")
[ "$size" -lt 1000000 ] && echo "PASS json of a million ranks is $size bytes" ||
  { echo "FAIL json of a million ranks is $size bytes"; fails=$((fails + 1)); }
if python3 -c '
import json, sys
pr = json.load(open(sys.argv[1]))["per_rank"]
assert len(pr) == 5, len(pr)
assert sum(e["num_ranks"] for e in pr) == 1000000
assert pr[0]["ranks"] == [[0, 511]] and pr[-1]["ranks"] == [[128256, 999999]], pr
' "$WORK/out"; then echo "PASS per_rank grouped like the text"; else
  echo "FAIL per_rank grouped like the text"; fails=$((fails + 1)); fi
run 1 "--tp 1000000 text" plan --config "$L" --tp 1000000
has out "ranks 128256-999999" "the text groups the same ranks"
run 0 "grouped per_rank checked independently" plan --config "$CFG/Qwen3-0.6B/config.json" --tp 8 --dp-shard 600 --format json
if python3 "$SRC/tests/robustness/check_report.py" "$WORK/out" --tp 8 --dp-shard 600 >"$WORK/chk" 2>&1; then
  echo "PASS check_report.py accepts the grouped form"; else
  echo "FAIL check_report.py:"; head "$WORK/chk"; fails=$((fails + 1)); fi

# --html that cannot be written: exit 1 naming the path; the page is
# removed only if it is a regular file tpx created (a link to a device is
# left alone: as root, removing /dev/full itself would be the next step)
if [ -c /dev/full ]; then
  ln -s /dev/full "$WORK/full.html"
  run 1 "--html to a link to /dev/full" plan --config "$L" --html "$WORK/full.html"
  has err "--html $WORK/full.html: No space left on device" "names the page and the error"
  if [ -L "$WORK/full.html" ]; then echo "PASS the link is left alone"; else
    echo "FAIL the link to /dev/full was removed"; fails=$((fails + 1)); fi
fi
run 2 "--html to a directory" plan --config "$L" --html "$WORK"
has err "--html $WORK:" "names the directory"
# The page's path is checked before planning: no report first, and no file
# left behind when nothing could be planned.
run 2 "--html in a missing directory" plan --config "$L" --html "$WORK/nope/x.html"
has err "--html $WORK/nope/x.html: No such file or directory" "names the path"
if [ -s "$WORK/out" ]; then echo "FAIL a report was printed before the --html error"; fails=$((fails + 1)); else echo "PASS no report before the --html error"; fi
run 2 "--html with a missing config" plan --config "$WORK/nope.json" --html "$WORK/b.html"
if [ -e "$WORK/b.html" ]; then echo "FAIL an empty page was left behind"; fails=$((fails + 1)); else echo "PASS no page left behind"; fi
echo "old page" > "$WORK/c.html"
run 2 "--html over a page, missing config" plan --config "$WORK/nope.json" --html "$WORK/c.html"
has_file() { grep -q "$2" "$1"; }
if has_file "$WORK/c.html" "old page"; then echo "PASS an existing page is left as it was"; else echo "FAIL an existing page was changed"; fails=$((fails + 1)); fi
run 2 "--gpu-mem without --gpus" plan --config "$L" --gpu-mem 40GiB
has err "add --gpus N" "says what --gpu-mem needs"
run 2 "--html with --gpus" plan --config "$L" --gpus 4 --html "$WORK/a.html"
has err "--html cannot be combined with --gpus" "says --html would be ignored"
if [ -e "$WORK/a.html" ]; then echo "FAIL --gpus wrote a page"; fails=$((fails + 1)); fi

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
