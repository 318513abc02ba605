#!/bin/sh
# run.sh — the checkpoint benchmark (issue 10 item 6). Generates a ~1 GiB
# bf16 Llama-shaped checkpoint in two shards (tpx-ckpt-test gen), then with
# a warm page cache: every rank's slice reads at tp=8 and tp=4 x dp_shard=2
# (pread and mmap) against `cat > /dev/null` of the same files, bytes read
# against slice bytes, Python safe_open(...).get_slice when importable, and
# `tpx merge` of tp=8 rank files against `cp` of the same bytes. Prints the
# ratios. Disk: ~4 GiB in $TMPDIR, deleted at the end.
# Usage: bench/ckpt/run.sh [BUILD_DIR]
set -eu
build=${1:-build}
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-bench-ckpt.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
w="$work/weights"
mkdir -p "$w"
cat >"$work/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
 "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 7,
 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
 "vocab_size": 32000, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "rms_norm_eps": 1e-05}
JSON
t() { python3 -c 'import time; print("%.6f" % time.monotonic())'; }
el() { python3 -c "print('%.3f' % ($2 - $1))"; }

"$build/tools/tpx-ckpt-test" gen "$work/config.json" "$w" 600MB
total=$(cat "$w"/*.safetensors | wc -c)
echo "checkpoint: $(ls "$w" | tr '\n' ' ')($total bytes)"

cat "$w"/*.safetensors >/dev/null # warm the page cache
best_cat=999
for i in 1 2 3; do
  a=$(t); cat "$w"/*.safetensors >/dev/null; b=$(t)
  best_cat=$(python3 -c "print(min($best_cat, $b - $a))")
done
raw=$(python3 -c "print('%.0f' % ($total / $best_cat / 1e6))")
echo "raw cat > /dev/null: $total bytes in $(printf %.3f "$best_cat") s = $raw MB/s"

have_py=0
python3 -c 'import safetensors, torch' 2>/dev/null && have_py=1
for mesh in "8 1" "4 2"; do
  set -- $mesh
  echo "== tp=$1 dp_shard=$2"
  for io in pread mmap; do
    out=$("$build/bench/ckpt/tpx-bench-ckpt" "$w" "$1" "$2" --io "$io" \
      --dump-slices "$work/slices.json")
    echo "$out" | grep -E "rank (0|1|7):" || true
    line=$(echo "$out" | tail -1)
    echo "$line"
    mbs=$(echo "$line" | sed 's/.*= \([0-9]*\) MB\/s/\1/')
    echo "  ratio $io / raw cat: $(python3 -c "print('%.2f' % ($mbs / $raw))") (target >= 0.70)"
    [ "$io" = mmap ] && tpx_mbs=$mbs
  done
  if [ "$have_py" = 1 ]; then
    py=$(python3 "$(dirname "$0")/get_slice.py" "$w" "$work/slices.json")
    echo "$py"
    pmbs=$(echo "$py" | sed 's/.*= \([0-9]*\) MB\/s/\1/')
    echo "  ratio tpx(mmap, default) / get_slice: $(python3 -c "print('%.2f' % ($tpx_mbs / $pmbs))") (target >= 3)"
  else
    echo "  (python safetensors/torch not importable: no get_slice baseline)"
  fi
done

echo "== tpx merge vs cp (tp=8 rank files)"
"$build/tools/tpx" shard --weights "$w" --tp 8 --out "$work/ranks" >/dev/null
cat "$work/ranks"/* >/dev/null
sync
a=$(t); "$build/tools/tpx" merge --in "$work/ranks" --out "$work/merged" --max-shard-size 600MB; b=$(t)
merge_s=$(el "$a" "$b")
"$build/tools/tpx-ckpt-test" cmp "$w" "$work/merged" >/dev/null && echo "merged checkpoint: tensors identical to the source"
rm -rf "$work/merged"
sync
# the same bytes copied with the same durability (fsync per file); cp may
# reflink or copy_file_range, so dd it is
a=$(t); mkdir "$work/copy"
for f in "$work/ranks"/*; do
  dd if="$f" of="$work/copy/$(basename "$f")" bs=4M status=none conv=fsync
done
b=$(t)
cp_s=$(el "$a" "$b")
echo "tpx merge: $merge_s s (fsync'd); dd conv=fsync of the same bytes: $cp_s s; ratio merge / copy: $(python3 -c "print('%.2f' % ($merge_s / $cp_s))")"
