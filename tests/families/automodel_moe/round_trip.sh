#!/bin/sh
# round_trip.sh TPX CKPT_TEST DATA [SHARD_ARGS...]: for every family recorded
# from NeMo Automodel 0.7.0 (DATA/<family>/{config.json,hf_names.json}), a
# checkpoint holding the Hugging Face tensors its state-dict adapter reads
# (per-expert, distinct values) is sharded onto Automodel's module tree
# (grouped experts cut from transposed per-expert tensors) with SHARD_ARGS
# (default --dp-shard 4), merged back, and compared byte for byte. A family
# whose `weights` case is listed in DATA/known_differences.txt (its
# checkpoint cannot be read onto the tree) is skipped, with that line's
# reason.
set -u
tpx=$1 tool=$2 data=$3
shift 3
[ $# -gt 0 ] || set -- --dp-shard 4
ep=$(printf '%s\n' "$@" | sed -n '/^--ep$/{n;p;}')
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-am-rt.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fails=0
for d in "$data"/*/; do
  fam=$(basename "$d")
  [ -f "$d/hf_names.json" ] || continue
  why=$(sed -n "s/^$fam  *weights  *# *//p" "$data/known_differences.txt" 2>/dev/null)
  if [ -n "$why" ]; then
    echo "skip $fam $*: known difference: $why"
    continue
  fi
  w="$work/$fam"
  mkdir -p "$w/src"
  python3 -c '
import json, sys
for name, dtype, shape in json.load(open(sys.argv[1]))["hf_tensors"]:
    print(name, dtype.upper(), *shape)' "$d/hf_names.json" >"$w/list" &&
    "$tool" gen-list "$d/config.json" "$w/list" "$w/src" >"$w/log" 2>&1 &&
    "$tpx" shard --weights "$w/src" --out "$w/ranks" "$@" >>"$w/log" 2>&1 &&
    python3 -c '
# The rank files say tpx-shard/1.1 exactly where an older reader would
# misread them: a parameter the adapter reads from several HF tensors
# (experts cut from transposed per-expert tensors), from one HF tensor of
# another shape (transposed, as the Mistral-4 fused experts; or bigger, as
# the Ling-V2 query_key_value cut into q/k/v), or ep > 1.
import glob, json, os, struct, sys
names, ranks, ep = sys.argv[1], sys.argv[2], sys.argv[3] not in ("", "1")
hf = json.load(open(names))
gold = json.load(open(os.path.join(os.path.dirname(names), "golden.json")))
shape = {p["name"]: p["shape"] for p in gold["cases"]["dp4_ep1"]["parameters"]}
stored = {n: s for n, _, s in hf["hf_tensors"]}
fused = any(len(v) > 1 or stored.get(v[0]) != shape[k]
            for k, v in hf["to_hf"].items() if k in shape)
want = "tpx-shard/1.1" if fused or ep else "tpx-shard/1"
for f in glob.glob(ranks + "/rank-*.safetensors"):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        got = json.loads(fh.read(n))["__metadata__"]["format"]
    if got != want:
        sys.exit("%s: format %s, want %s" % (f, got, want))' \
      "$d/hf_names.json" "$w/ranks" "$ep" >>"$w/log" 2>&1 &&
    "$tpx" merge --in "$w/ranks" --out "$w/merged" >>"$w/log" 2>&1 &&
    cmp "$w/src/model.safetensors" "$w/merged/model.safetensors" >>"$w/log" 2>&1
  if [ $? -eq 0 ]; then
    echo "ok   $fam $*: shard + merge byte-identical"
  else
    echo "FAIL $fam $*:"
    sed 's/^/     /' "$w/log"
    fails=$((fails + 1))
  fi
  rm -rf "$w"
done
[ "$fails" -eq 0 ]
