#!/bin/sh
# cli_shard_merge.sh — `tpx shard` + `tpx merge` end to end on checkpoints
# generated for shrunken variants of the bundled configs
# (tests/data/ckpt/*/config.json; tpx-ckpt-test gen writes deterministic
# bytes): every rank file holds exactly its layout slice, the merge is
# byte-identical to the source (whole files, also sharded with an index),
# on uneven meshes (tp=3 x dp_shard=3, ...); bad inputs fail naming the
# file, leave nothing under a final name, and never modify the source.
# Usage: cli_shard_merge.sh TPX TPX_CKPT_TEST SOURCE_DIR
set -u
tpx=$1
tool=$2
src=$3
data="$src/tests/data/ckpt"
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-ckpt-cli.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT INT TERM
. "$src/tests/unit/checkpoint/cli_lib.sh"

# fails_with DESCRIPTION TEXT CMD...: the command must exit ${want:-1}
# and print TEXT
fails_with() {
  what=$1
  text=$2
  shift 2
  "$@" >"$work/log" 2>&1
  rc=$?
  if [ "$rc" -eq "${want:-1}" ] && grep -qF -- "$text" "$work/log"; then
    ok "$what"
  else
    echo "    (exit $rc, wanted ${want:-1} and '$text')"
    bad "$what"
  fi
}

# bad_input DESCRIPTION TEXT CMD...: an input that cannot be used exits 2
# (docs/tpx.1 "EXIT STATUS"), naming what is wrong
bad_input() {
  want=2
  fails_with "$@"
  want=1
}

# no_final DIR DESCRIPTION: no model file and no temporary in DIR
no_final() {
  if ls -A "$1" 2>/dev/null | grep -q .; then
    ls -A "$1" >"$work/log"
    bad "$2: nothing left in $1"
  else
    ok "$2: nothing left in $1"
  fi
}

sums() { cat "$1"/* | cksum; }

# The meshes below cut heads unevenly on purpose (3 kv heads over tp 2
# or 4: short and empty pieces), which `tpx plan` reports as errors and
# `tpx shard` therefore refuses unless told otherwise: --allow-errors.
# (That refusal is checked on its own further down.)
ae=--allow-errors

# Dense families (the MoE ones follow below).
for fam in Llama-3.2-1B Qwen2.5-0.5B Qwen3-0.6B gemma-3-1b-it phi-2 \
           Falcon-H1-0.5B; do
  s="$work/src-$fam"
  mkdir -p "$s"
  run "$fam: generate" "$tool" gen "$data/$fam/config.json" "$s"
  before=$(sums "$s")
  for mesh in "3 3 1" "2 1 2" "4 2 1"; do
    set -- $mesh
    tag="$fam tp=$1 dp_shard=$2 dp_replicate=$3"
    r="$work/ranks-$fam-$1-$2-$3"
    m="$work/merged-$fam-$1-$2-$3"
    run "$tag: shard" "$tpx" shard $ae --weights "$s" --tp "$1" \
      --dp-shard "$2" --dp-replicate "$3" --out "$r"
    run "$tag: rank files hold their slices" "$tool" check-ranks "$s" "$r" \
      "$1" "$2" "$3"
    run "$tag: merge" "$tpx" merge --in "$r" --out "$m"
    run "$tag: merged file byte-identical" cmp "$s/model.safetensors" \
      "$m/model.safetensors"
    rm -rf "$r" "$m"
  done
  [ "$(sums "$s")" = "$before" ] && ok "$fam: source unchanged" ||
    bad "$fam: source unchanged"
done

# MoE families: the tensors as their HF files name them (H 48, 6 heads of
# 8, 3 kv heads, 4 experts, vocab 101, 2 layers).
moe_list() { # FAMILY -> the tensor list on stdout
  echo "model.embed_tokens.weight BF16 101 48"
  echo "model.norm.weight BF16 48"
  echo "lm_head.weight BF16 101 48"
  for l in 0 1; do
    p="model.layers.$l"
    echo "$p.input_layernorm.weight BF16 48"
    echo "$p.post_attention_layernorm.weight BF16 48"
    echo "$p.self_attn.q_proj.weight BF16 48 48"
    echo "$p.self_attn.k_proj.weight BF16 24 48"
    echo "$p.self_attn.v_proj.weight BF16 24 48"
    echo "$p.self_attn.o_proj.weight BF16 48 48"
    if [ "$1" = Mixtral-8x7B-v0.1 ]; then
      echo "$p.block_sparse_moe.gate.weight BF16 4 48"
      for e in 0 1 2 3; do
        echo "$p.block_sparse_moe.experts.$e.w1.weight BF16 100 48"
        echo "$p.block_sparse_moe.experts.$e.w2.weight BF16 48 100"
        echo "$p.block_sparse_moe.experts.$e.w3.weight BF16 100 48"
      done
    else
      echo "$p.self_attn.q_norm.weight BF16 8"
      echo "$p.self_attn.k_norm.weight BF16 8"
      echo "$p.mlp.gate.weight BF16 4 48"
      for e in 0 1 2 3; do
        echo "$p.mlp.experts.$e.gate_proj.weight BF16 20 48"
        echo "$p.mlp.experts.$e.up_proj.weight BF16 20 48"
        echo "$p.mlp.experts.$e.down_proj.weight BF16 48 20"
      done
    fi
  done
}
# Their family plugin's skeleton holds transformers-5 fused experts
# (mlp.experts.gate_up_proj [E, 2I, H]), which the per-rank reader reads
# from the per-expert tensors (checked element by element in
# test_checkpoint.c): rank files hold the fused parameters' slices (E = 4
# over dp_shard 3 or 5: uneven, empty shards), and `tpx merge` writes the
# per-expert tensors back under their original names, byte-identical.
# (Qwen3-MoE is served by the automodel_moe plugin since issue 27: its
# fused experts are read through the plugin's declared sources, which the
# host serves with skeleton_add_source.)
for fam in Mixtral-8x7B-v0.1; do
  s="$work/src-$fam"
  mkdir -p "$s"
  moe_list "$fam" >"$work/list-$fam"
  run "$fam: generate" "$tool" gen-list "$data/$fam/config.json" \
    "$work/list-$fam" "$s"
  before=$(sums "$s")
  for mesh in "3 3 1" "1 5 1" "2 1 2"; do
    set -- $mesh
    tag="$fam tp=$1 dp_shard=$2 dp_replicate=$3"
    r="$work/ranks-$fam-$1-$2-$3"
    m="$work/merged-$fam-$1-$2-$3"
    run "$tag: shard" "$tpx" shard $ae --weights "$s" --tp "$1" \
      --dp-shard "$2" --dp-replicate "$3" --out "$r"
    # header keys: the fused tensor is stored, expert 0's own tensor not
    e0=model.layers.0.mlp.experts.0.down_proj.weight
    [ "$fam" = Mixtral-8x7B-v0.1 ] &&
      e0=model.layers.0.block_sparse_moe.experts.0.w2.weight
    f0=$(ls "$r"/rank-00000-of-*)
    if grep -qF '"model.layers.0.mlp.experts.down_proj":{"dtype"' "$f0" &&
       grep -qF "\"$e0\":{\"dtype\"" "$s/model.safetensors" &&
       ! grep -qF "\"$e0\":{\"dtype\"" "$f0"; then
      ok "$tag: rank files hold the fused parameters"
    else
      bad "$tag: rank files hold the fused parameters"
    fi
    run "$tag: merge" "$tpx" merge --in "$r" --out "$m"
    run "$tag: merged file byte-identical" cmp "$s/model.safetensors" \
      "$m/model.safetensors"
    rm -rf "$r" "$m"
  done
  [ "$(sums "$s")" = "$before" ] && ok "$fam: source unchanged" ||
    bad "$fam: source unchanged"
done

# Issue 26: a model type whose module tree comes from transformers'
# conversion rules (bailing_hybrid, tests/data/upstream: its tiny config
# and the tensors save_pretrained writes). Parameters the rules fuse are
# read from their checkpoint tensors, whatever their names: the per-expert
# experts.{e}.gate_proj / up_proj / down_proj into experts.gate_up_proj /
# down_proj, and attention.{q,k,v}_conv1d into self_attn.conv1d (a
# Concatenate that is no expert fold); the rank files hold the fused
# pieces with those tensors in their "fold" lists; the router's
# expert_bias, a buffer, is in every rank file whole (replicated); and
# `tpx merge` writes the checkpoint back byte for byte.
if command -v python3 >/dev/null 2>&1; then
  bh="$src/tests/data/upstream/bailing_hybrid"
  s="$work/src-bh"
  mkdir -p "$s"
  python3 -c 'import json, sys
for n, d, s in json.load(open(sys.argv[1]))["tensors"]:
    print(n, d.upper(), *s)' "$bh/recipe.json" >"$work/list-bh"
  run "bailing_hybrid: generate" "$tool" gen-list "$bh/config.json" \
    "$work/list-bh" "$s"
  before=$(sums "$s")
  for mesh in "2 2 1" "1 3 1"; do
    set -- $mesh
    tag="bailing_hybrid tp=$1 dp_shard=$2"
    r="$work/ranks-bh-$1-$2"
    m="$work/merged-bh-$1-$2"
    run "$tag: shard" "$tpx" shard --weights "$s" --tp "$1" --dp-shard "$2" \
      --out "$r"
    f0=$(ls "$r"/rank-00000-of-*)
    fl=$(ls "$r"/rank-* | tail -1)
    if grep -qF '"model.layers.1.self_attn.conv1d.weight":{"dtype"' "$f0" &&
       grep -qF 'model.layers.1.attention.q_conv1d.weight' "$f0" &&
       ! grep -qF '"model.layers.1.attention.q_conv1d.weight":{"dtype"' "$f0" &&
       grep -qF '"model.layers.0.mlp.experts.gate_up_proj":{"dtype"' "$f0" &&
       grep -qF '"model.layers.0.mlp.gate.expert_bias":{"dtype":"F32","shape":[4]' "$fl"; then
      ok "$tag: fused pieces with their sources, the buffer whole"
    else
      bad "$tag: fused pieces with their sources, the buffer whole"
    fi
    run "$tag: merge" "$tpx" merge --in "$r" --out "$m"
    run "$tag: merged file byte-identical" cmp "$s/model.safetensors" \
      "$m/model.safetensors"
    rm -rf "$r" "$m"
  done
  [ "$(sums "$s")" = "$before" ] && ok "bailing_hybrid: source unchanged" ||
    bad "bailing_hybrid: source unchanged"
fi

# A rank file whose "fold" puts a source outside the fused tensor (up rows
# of expert 0 moved from offset 100 to 149 of 200): merge refuses, naming it.
s="$work/src-Mixtral-8x7B-v0.1"
run "moe: shard dp_shard=3" "$tpx" shard --weights "$s" --dp-shard 3 \
  --out "$work/r-fold"
f="$work/r-fold/rank-00000-of-00003.safetensors"
LC_ALL=C sed 's/\\"offsets\\":\[0,100,0\]/\\"offsets\\":[0,149,0]/' "$f" \
  >"$f.bad" && mv "$f.bad" "$f"
bad_input "merge: a fold source outside the fused tensor" '"fold"' \
  "$tpx" merge --in "$work/r-fold" --out "$work/out9"
no_final "$work/out9" "merge with a bad fold"

# Sharded source with an index; sequence parallel; merge re-shards the same.
s="$work/src-sharded"
mkdir -p "$s"
run "sharded source: generate" "$tool" gen "$data/Llama-3.2-1B/config.json" \
  "$s" 20000
run "sharded source: shard --sp" "$tpx" shard --weights \
  "$s/model.safetensors.index.json" --tp 3 --dp-shard 2 --sp --out "$work/r"
run "sharded source: slices" "$tool" check-ranks "$s" "$work/r" 3 2 1 sp
run "sharded source: merge" "$tpx" merge --in "$work/r" --out "$work/m" \
  --max-shard-size 20000
for f in "$s"/model*; do
  run "sharded merge: $(basename "$f") byte-identical" cmp "$f" \
    "$work/m/$(basename "$f")"
done
run "single-file merge of the sharded source: same tensors" sh -c \
  "'$tpx' merge --in '$work/r' --out '$work/m1' && '$tool' cmp '$s' '$work/m1'"

# --rank: one file only
run "shard --rank 4" "$tpx" shard --weights "$s" --tp 3 --dp-shard 2 \
  --rank 4 --out "$work/one"
[ "$(ls "$work/one")" = "rank-00004-of-00006.safetensors" ] &&
  ok "--rank writes one file" || bad "--rank writes one file"

# ---- bad inputs ----
cp -r "$work/r" "$work/r-missing"
rm "$work/r-missing/rank-00003-of-00006.safetensors"
bad_input "merge: a missing rank file" "rank 3" \
  "$tpx" merge --in "$work/r-missing" --out "$work/out1"
no_final "$work/out1" "merge with a missing rank"

cp -r "$work/r" "$work/r-trunc"
f="$work/r-trunc/rank-00002-of-00006.safetensors"
head -c $(($(wc -c <"$f") - 10)) "$f" >"$f.cut" && mv "$f.cut" "$f"
bad_input "merge: a truncated rank file" "rank-00002-of-00006" \
  "$tpx" merge --in "$work/r-trunc" --out "$work/out2"
no_final "$work/out2" "merge with a truncated rank"

# rank files of two different meshes of the same size
run "shard tp=2 dp_shard=3" "$tpx" shard $ae --weights "$s" --tp 2 --dp-shard 3 \
  --out "$work/r23"
cp -r "$work/r" "$work/r-mixed"
cp "$work/r23/rank-00001-of-00006.safetensors" "$work/r-mixed/"
bad_input "merge: rank files of different meshes" "mesh differs" \
  "$tpx" merge --in "$work/r-mixed" --out "$work/out7"
no_final "$work/out7" "merge of mixed meshes"

# a plain checkpoint file posing as a rank file
mkdir -p "$work/r-plain"
cp "$work/m1/model.safetensors" "$work/r-plain/rank-00000-of-00001.safetensors"
bad_input "merge: not a tpx-shard/1 file" "tpx-shard/1" \
  "$tpx" merge --in "$work/r-plain" --out "$work/out8"

# a checkpoint whose tensors disagree with the config
mkdir -p "$work/wrong"
cp "$s"/model* "$work/wrong/"
sed 's/"intermediate_size": 100/"intermediate_size": 64/' \
  "$data/Llama-3.2-1B/config.json" >"$work/wrong/config.json"
bad_input "shard: tensor shape disagrees with the config" "mlp" \
  "$tpx" shard --weights "$work/wrong" --tp 3 --out "$work/out3"
[ -z "$(ls -A "$work/out3" 2>/dev/null)" ] && ok "nothing written" ||
  bad "nothing written"

# a missing shard named in the index
mkdir -p "$work/noshard"
cp "$s"/model* "$s/config.json" "$work/noshard/"
rm "$work/noshard/model-00002-of-"*
bad_input "shard: index names a missing shard" "model-00002-of-" \
  "$tpx" shard --weights "$work/noshard" --tp 3 --out "$work/out4"

# unwritable output directory (/proc takes no new files, even for root)
fails_with "merge: unwritable output directory" "/proc" \
  "$tpx" merge --in "$work/r" --out /proc

# full output: a file-size limit of 64 KiB (EFBIG, as ENOSPC would be); the
# shard names whichever rank file its writing threads hit the limit in first
mkdir -p "$work/out5"
fails_with "merge: file-size limit hit" "model.safetensors" \
  sh -c "ulimit -f 128; exec '$tpx' merge --in '$work/r' --out '$work/out5'"
no_final "$work/out5" "merge over the file-size limit"
fails_with "shard: file-size limit hit" "-of-00003.safetensors" \
  sh -c "ulimit -f 1; exec '$tpx' shard --weights '$s' --tp 3 --out '$work/out6'"
no_final "$work/out6" "shard over the file-size limit"

# ---- shared or hostile directories, mixed and tampered rank files ----
# (each of these once passed silently or wrote a wrong or stale result)
L="$work/src-Llama-3.2-1B"

# a rank file whose q_proj piece is shifted by one row (overlap + hole that
# add up to the right count): refused, naming the file and the tensor
run "tp=3: shard" "$tpx" shard --weights "$L" --tp 3 --out "$work/r-shift"
f="$work/r-shift/rank-00001-of-00003.safetensors"
LC_ALL=C sed 's/q_proj.weight\\":{\\"global_shape\\":\[48,48\],\\"offsets\\":\[16,0\]/q_proj.weight\\":{\\"global_shape\\":[48,48],\\"offsets\\":[17,0]/' \
  "$f" >"$f.bad" && mv "$f.bad" "$f"
bad_input "merge: a piece shifted by one row" "is not the box" \
  "$tpx" merge --in "$work/r-shift" --out "$work/out10"
grep -qF "layers.0.self_attn.q_proj.weight" "$work/log" &&
  ok "merge: the shifted tensor is named" || bad "merge: the shifted tensor is named"
no_final "$work/out10" "merge of a shifted piece"

# a tampered world size and a tampered placement
run "tp=3: shard again" "$tpx" shard --weights "$L" --tp 3 --out "$work/r-ws"
f="$work/r-ws/rank-00002-of-00003.safetensors"
LC_ALL=C sed 's/"tpx.world_size":"3"/"tpx.world_size":"4"/' "$f" >"$f.bad" &&
  mv "$f.bad" "$f"
bad_input "merge: tpx.world_size disagrees with the mesh" "tpx.world_size" \
  "$tpx" merge --in "$work/r-ws" --out "$work/out11"
run "tp=3: shard once more" "$tpx" shard --weights "$L" --tp 3 --out "$work/r-pl"
f="$work/r-pl/rank-00002-of-00003.safetensors"
LC_ALL=C sed 's/o_proj.weight\\":{\\"global_shape\\":\[48,48\],\\"offsets\\":\[0,32\],\\"placements\\":\[\\"replicate\\",\\"shard(0)\\",\\"shard(1)\\"\]/o_proj.weight\\":{\\"global_shape\\":[48,48],\\"offsets\\":[0,32],\\"placements\\":[\\"replicate\\",\\"shard(0)\\",\\"shard(0)\\"]/' \
  "$f" >"$f.bad" && mv "$f.bad" "$f"
bad_input "merge: a placement that differs between ranks" "placement" \
  "$tpx" merge --in "$work/r-pl" --out "$work/out12"

# rank files of two runs (same mesh, same source) do not mix; those of one
# run id (several --rank runs) do; nor do two sources under one run id
mkdir -p "$work/r-runs"
cp "$work/r-ws/rank-00000-of-00003.safetensors" \
  "$work/r-ws/rank-00001-of-00003.safetensors" "$work/r-runs/"
run "tp=3: shard a fourth time" "$tpx" shard --weights "$L" --tp 3 --out "$work/r-4th"
cp "$work/r-4th/rank-00002-of-00003.safetensors" "$work/r-runs/"
bad_input "merge: rank files of two runs" "another tpx shard run" \
  "$tpx" merge --in "$work/r-runs" --out "$work/out13"
for r in 0 1 2; do
  run "--rank $r --run-id" "$tpx" shard --weights "$L" --tp 3 --rank $r \
    --run-id job-7 --out "$work/r-id"
done
run "merge: ranks of one --run-id" "$tpx" merge --in "$work/r-id" --out "$work/m-id"
run "merge of one --run-id: byte-identical" cmp "$L/model.safetensors" \
  "$work/m-id/model.safetensors"
mkdir -p "$work/src-L-sharded"
run "sharded copy of the source" "$tool" gen \
  "$data/Llama-3.2-1B/config.json" "$work/src-L-sharded" 20000
run "--rank 1 of the other source" "$tpx" shard --weights "$work/src-L-sharded" \
  --tp 3 --rank 1 --run-id job-7 --out "$work/r-src"
cp "$work/r-src/rank-00001-of-00003.safetensors" "$work/r-id/"
bad_input "merge: rank files of two sources" "another source checkpoint" \
  "$tpx" merge --in "$work/r-id" --out "$work/out14"
# two checkpoints of one model (two training steps): the same names and
# headers, other values (here the source's last byte); its rank 1 under the
# same --run-id is refused, naming both files (this merged silently when
# tpx.source covered the headers only)
rm -rf "$work/r-id"
for r in 0 1 2; do
  run "--rank $r --run-id, again" "$tpx" shard --weights "$L" --tp 3 \
    --rank $r --run-id job-8 --out "$work/r-id"
done
mkdir -p "$work/src-L-step2"
cp "$L"/* "$work/src-L-step2/"
last=$(($(wc -c <"$L/model.safetensors") - 1))
printf 'x' | dd of="$work/src-L-step2/model.safetensors" bs=1 seek="$last" \
  conv=notrunc 2>/dev/null
run "--rank 1 of the second step" "$tpx" shard --weights "$work/src-L-step2" \
  --tp 3 --rank 1 --run-id job-8 --out "$work/r-step2"
cp "$work/r-step2/rank-00001-of-00003.safetensors" "$work/r-id/"
bad_input "merge: rank files of two checkpoints of one model" \
  "another source checkpoint" \
  "$tpx" merge --in "$work/r-id" --out "$work/out14b"
grep -qF "rank-00001-of-00003.safetensors: cut from another source checkpoint than $work/r-id/rank-00000-of-00003.safetensors" \
  "$work/log" && ok "merge of two steps: both files named" ||
  bad "merge of two steps: both files named"
no_final "$work/out14b" "merge of two steps"
# a re-shard over a complete set that fails on a full disk (a file-size
# limit) leaves that set whole: every file of the earlier run, mergeable
run "tp=3: a complete set" "$tpx" shard --weights "$L" --tp 3 --out "$work/r-full"
before="$(sums "$work/r-full") $(ls -A "$work/r-full" | tr '\n' ' ')"
fails_with "shard over a complete set: file-size limit hit" "-of-00003.safetensors" \
  sh -c "ulimit -f 1; exec '$tpx' shard --weights '$L' --tp 3 --out '$work/r-full'"
[ "$(sums "$work/r-full") $(ls -A "$work/r-full" | tr '\n' ' ')" = "$before" ] &&
  ok "failed re-shard: the earlier set unchanged, no temporary left" ||
  bad "failed re-shard: the earlier set unchanged, no temporary left"
run "failed re-shard: the earlier set merges" "$tpx" merge --in "$work/r-full" \
  --out "$work/m-full"

# errors `tpx plan` reports stop `tpx shard` (3 kv heads over tp 2);
# --allow-errors writes anyway
fails_with "shard: tpx plan errors stop it" "heads-not-divisible" \
  "$tpx" shard --weights "$L" --tp 2 --out "$work/out15"
grep -qF -- "--allow-errors" "$work/log" && ok "shard: names --allow-errors" ||
  bad "shard: names --allow-errors"
no_final "$work/out15" "shard refused for plan errors"

# a missing --weights path is named (not the config.json beside it)
bad_input "shard: missing weights named" "$work/nonexistent" \
  "$tpx" shard --weights "$work/nonexistent" --tp 3 --out "$work/out16"
grep -qF "config.json" "$work/log" && bad "shard: no config.json blamed" ||
  ok "shard: no config.json blamed"

# the merged directory holds the config.json the shards were cut with, and
# both commands say what they wrote when nobody watches a terminal
cmp "$L/config.json" "$work/m-id/config.json" >"$work/log" 2>&1 &&
  ok "merge: config.json written back" || bad "merge: config.json written back"
"$tpx" merge --in "$work/r-4th" --out "$work/m-sum" >"$work/log" 2>&1
grep -q "wrote 1 file, .* MB" "$work/log" && ok "merge: summary line" ||
  bad "merge: summary line"
"$tpx" shard --weights "$L" --tp 3 --out "$work/r-sum" >"$work/log" 2>&1
grep -q "tpx shard: wrote 3 files, .* MB" "$work/log" && ok "shard: summary line" ||
  bad "shard: summary line"

# merging into a directory that holds an older (sharded) checkpoint:
# refused and untouched; with --force replaced, the stale shards and index
# removed (the reader would load them), and said so
cp -r "$work/src-L-sharded" "$work/old"
before=$(sums "$work/old")
fails_with "merge: an older checkpoint in --out" "already holds a checkpoint" \
  "$tpx" merge --in "$work/r-4th" --out "$work/old"
[ "$(sums "$work/old")" = "$before" ] && ok "merge: older checkpoint untouched" ||
  bad "merge: older checkpoint untouched"
run "merge --force over the older checkpoint" "$tpx" merge --force \
  --in "$work/r-4th" --out "$work/old"
grep -q "removed .* older checkpoint" "$work/log" && ok "merge --force: says what it removed" ||
  bad "merge --force: says what it removed"
[ "$(ls "$work/old" | grep -c '^model')" = 1 ] &&
  ok "merge --force: stale shards and index gone" ||
  { ls "$work/old" >"$work/log"; bad "merge --force: stale shards and index gone"; }
run "merge --force: the directory reads as the new checkpoint" "$tool" cmp \
  "$L" "$work/old"

# shard into a directory of rank files of another mesh size: refused
fails_with "shard: rank files of another mesh size" "another mesh size" \
  "$tpx" shard --weights "$L" --tp 3 --dp-shard 3 --out "$work/r-4th"
run "shard --force over rank files of another mesh size" "$tpx" shard \
  --force --weights "$L" --tp 3 --dp-shard 3 --out "$work/r-4th"
grep -q "removed 3 rank files of another mesh size" "$work/log" &&
  ok "shard --force: says what it removed" || bad "shard --force: says what it removed"
[ "$(ls "$work/r-4th" | grep -c 'of-00003')" = 0 ] &&
  [ "$(ls "$work/r-4th" | grep -c 'of-00009')" = 9 ] &&
  ok "shard --force: only the new rank files" ||
  { ls "$work/r-4th" >"$work/log"; bad "shard --force: only the new rank files"; }

# a directory another run is writing into (held here by flock(1)): refused
if command -v flock >/dev/null 2>&1; then
  mkdir -p "$work/busy"
  fails_with "merge: a locked --out" "another tpx shard or tpx merge" \
    flock "$work/busy" "$tpx" merge --in "$work/r-4th" --out "$work/busy"
  no_final "$work/busy" "merge into a locked directory"
  # runs that each write some ranks share the directory (a shared lock):
  # --rank goes ahead beside another --rank run, a whole shard does not
  mkdir -p "$work/busy-r"
  run "shard --rank beside another --rank run" flock -s "$work/busy-r" \
    "$tpx" shard --weights "$L" --tp 3 --rank 1 --run-id j --out "$work/busy-r"
  fails_with "shard: all ranks beside a --rank run" "another tpx shard" \
    flock -s "$work/busy-r" "$tpx" shard --weights "$L" --tp 3 \
    --out "$work/busy-r"
fi

# two concurrent shards into one directory: each either completes or is
# refused; what stands under the final names is always exactly right
for try in 1 2 3; do
  rm -rf "$work/two"
  "$tpx" shard --weights "$L" --tp 3 --dp-shard 3 --out "$work/two" \
    >"$work/two-a.log" 2>&1 &
  pa=$!
  "$tpx" shard --weights "$L" --tp 3 --dp-shard 3 --out "$work/two" \
    >"$work/two-b.log" 2>&1
  rb=$?
  wait $pa
  ra=$?
  okrc=1
  for rc_log in "$ra:$work/two-a.log" "$rb:$work/two-b.log"; do
    rc=${rc_log%%:*}
    lg=${rc_log#*:}
    [ "$rc" -eq 0 ] || grep -qF "another tpx shard" "$lg" || okrc=0
  done
  [ "$okrc" = 1 ] && ok "two shards at once ($try): done or refused" ||
    { cat "$work/two-a.log" "$work/two-b.log" >"$work/log"; bad "two shards at once ($try): done or refused"; }
  if [ "$ra" -eq 0 ] || [ "$rb" -eq 0 ]; then
    run "two shards at once ($try): rank files exact" "$tool" check-ranks "$L" \
      "$work/two" 3 3 1
  fi
done

# a source truncated while it is read: a message naming the file, not
# a death by SIGBUS (the guard `tpx shard` and `tpx merge` read under)
mkdir -p "$work/trunc-src"
run "generate a source to truncate" "$tool" gen "$data/Llama-3.2-1B/config.json" \
  "$work/trunc-src"
fails_with "truncated while read: named, no SIGBUS" \
  "$work/trunc-src/model.safetensors" \
  "$tool" sigbus "$work/trunc-src/model.safetensors"

finish
