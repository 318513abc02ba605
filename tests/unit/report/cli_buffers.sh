#!/bin/sh
# cli_buffers.sh — issue 26 end to end: `tpx plan` on a checkpoint whose
# module tree keeps saved tensors as buffers (dots1's MoE router
# e_score_correction_bias, tests/data/upstream/dots1) lists them as
# buffers, with their bytes, in the text and JSON reports, never as
# parameters; the per-rank parameter bytes equal upstream's (which do not
# count buffers); and a config written by a newer transformers than the
# conversion table gets the conversion-table-older info.
# Usage: cli_buffers.sh TPX_BINARY SOURCE_DIR
set -u
tpx=$1
src=$2
if ! command -v python3 >/dev/null 2>&1; then
  echo "cli_buffers: no python3, skipped"
  exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/tpx-cli.XXXXXX")
dir=$(mktemp -d "${TMPDIR:-/tmp}/tpx-buf.XXXXXX")
trap 'rm -f "$out"; rm -rf "$dir"' EXIT INT TERM
. "$(dirname "$0")/cli_lib.sh"

data="$src/tests/data/upstream/dots1"
PYTHONDONTWRITEBYTECODE=1 python3 - "$src" "$data" "$dir" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], 'tools', 'upstream'))
import compare
recipe = json.load(open(os.path.join(sys.argv[2], 'recipe.json')))
compare.write_sparse_safetensors(os.path.join(sys.argv[3], 'model.safetensors'),
                                 recipe['tensors'])
cfg = json.load(open(os.path.join(sys.argv[2], 'config.json')))
json.dump(cfg, open(os.path.join(sys.argv[3], 'config.json'), 'w'))
cfg['transformers_version'] = '5.26.0.dev0'
os.mkdir(os.path.join(sys.argv[3], 'newer'))
json.dump(cfg, open(os.path.join(sys.argv[3], 'newer', 'config.json'), 'w'))
PY

expect 0 "dots1 text" -- --config "$dir/config.json" --weights "$dir" \
  --tp 2 --dp-shard 2 --no-isolation
has "Buffers (saved tensors the module tree keeps as buffers: replicated on every rank, never sharded, not in the per-rank parameter bytes):" \
  "text: buffers section"
has "model.layers.1.mlp.gate.e_score_correction_bias" "text: the buffer by name"
has "[4] f32, 16 B" "text: shape, dtype, bytes"
has "1 buffer, 16 B on every rank" "text: total"
has "converted: module tree from transformers 5.25.0" "text: conversion note"
lacks "conversion-table-older" "text: 5.25.0 config, no table note"

expect 0 "dots1 json" -- --config "$dir/config.json" --weights "$dir" \
  --tp 2 --dp-shard 2 --no-isolation --format json
n=$((n + 1))
if python3 - "$out" "$data/golden.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = json.load(open(sys.argv[2]))['cases']['dp2_tp2']
b = r['buffers']
assert b['placement'] == 'replicate', b
assert b['total_bytes'] == 16, b
assert b['items'] == [{'name': 'model.layers.1.mlp.gate.e_score_correction_bias',
                       'shape': [4], 'dtype': 'f32', 'bytes': 16}], b['items']
names = {p['name'] for p in r['parameters']}
assert not any('e_score_correction_bias' in n for n in names)
assert [x[0] for x in g['buffers'] if x[3]] == [i['name'] for i in b['items']]
assert [p['param_bytes'] for p in r['per_rank']] == g['per_rank_param_bytes']
PY
then
  echo "ok: json: buffers section, upstream's buffers and per-rank bytes"
else
  echo "FAIL: json: buffers section or per-rank bytes"
  fails=$((fails + 1))
fi

expect 0 "newer transformers" -- --config "$dir/newer/config.json" \
  --weights "$dir" --tp 2 --no-isolation
has "info [conversion-table-older]" "newer: the info line"
has "transformers 5.26.0.dev0, newer than the 5.25.0" "newer: both versions"
has "docs/CONVERSION.md" "newer: how to regenerate"

echo "cli_buffers: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
