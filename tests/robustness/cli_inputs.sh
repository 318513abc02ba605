#!/bin/sh
# cli_inputs.sh TPX SOURCE_DIR — inputs that must be refused at once, never
# waited on (issue 28): a FIFO, a device or a directory where tpx expects a
# file (--config, --weights, an index or its shard, config.json beside the
# weights, --plan, a merge's rank file, a plugin on the search path), an --out that cannot be written
# (exit 2, as tpx.1 says), and a safetensors header of many tensors (linear
# and small, or refused over the limit, naming it). Every command runs
# under `timeout`: a hang is a failure, not a stuck suite.
set -u
TPX=$1 SRC=$2
FIX=$SRC/examples/train/fixtures/llama
W=$(mktemp -d "${TMPDIR:-/tmp}/tpx-inputs.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
fails=0

# run WANT_RC NAME ARGS...: `tpx ARGS` (at most 20 s) into $W/out, $W/err
run() {
  want=$1 name=$2
  shift 2
  timeout 20 "$TPX" "$@" >"$W/out" 2>"$W/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, want $want"
    [ "$rc" -ne 124 ] || echo "  (timed out: it hung)"
    head -5 "$W/err"; fails=$((fails + 1))
  else
    echo "PASS $name"
  fi
}
# has NEEDLE NAME: stderr holds NEEDLE
has() {
  if grep -qF -- "$1" "$W/err"; then echo "PASS $2"; else
    echo "FAIL $2: stderr lacks '$1'"; head -5 "$W/err"; fails=$((fails + 1)); fi
}

C=$FIX/config.json
mkfifo "$W/fifo"
# weights directories with a FIFO in place of one file
mkdir "$W/cfgfifo" "$W/idxfifo" "$W/shardfifo" "$W/ranks" "$W/idxdir"
cp "$FIX/model.safetensors" "$W/cfgfifo/" && mkfifo "$W/cfgfifo/config.json"
mkfifo "$W/idxfifo/model.safetensors.index.json"
echo '{"weight_map": {"lm_head.weight": "s.safetensors"}}' \
  > "$W/shardfifo/model.safetensors.index.json"
mkfifo "$W/shardfifo/s.safetensors"
mkdir "$W/idxdir/model.safetensors.index.json"
mkfifo "$W/ranks/rank-00000-of-00001.safetensors"

run 2 "--config FIFO" plan --config "$W/fifo"
has "$W/fifo: not a regular file (a FIFO)" "--config FIFO: named"
run 2 "--config FIFO with --dtype" plan --config "$W/fifo" --dtype bf16
has "$W/fifo: not a regular file (a FIFO)" "--config FIFO with --dtype: named"
run 2 "--config /dev/zero" plan --config /dev/zero
has "/dev/zero: not a regular file (a character device)" "--config /dev/zero: named"
run 2 "--weights FIFO" plan --config "$C" --weights "$W/fifo"
has "$W/fifo: not a regular file (a FIFO)" "--weights FIFO: named"
run 2 "--weights /dev/zero" plan --config "$C" --weights /dev/zero
has "/dev/zero: not a regular file" "--weights /dev/zero: named"
run 2 "index FIFO" plan --config "$C" --weights "$W/idxfifo"
has "idxfifo/model.safetensors.index.json: not a regular file (a FIFO)" "index FIFO: named"
run 2 "index a directory" plan --config "$C" --weights "$W/idxdir"
has "idxdir/model.safetensors.index.json: not a regular file (a directory)" "index a directory: named"
run 2 "shard of an index FIFO" plan --config "$C" --weights "$W/shardfifo"
has "shardfifo/s.safetensors: not a regular file (a FIFO)" "shard FIFO: named"
run 2 "--plan FIFO" plan --config "$C" --plan "$W/fifo"
has "$W/fifo" "--plan FIFO: named"
run 2 "config.json FIFO beside the weights" shard --weights "$W/cfgfifo" --tp 1 --out "$W/o1"
has "cfgfifo/config.json: not a regular file (a FIFO)" "config.json FIFO: named"
run 2 "shard --weights FIFO" shard --weights "$W/fifo" --config "$C" --tp 1 --out "$W/o2"
has "$W/fifo: not a regular file (a FIFO)" "shard --weights FIFO: named"
run 2 "merge of a FIFO rank file" merge --in "$W/ranks" --out "$W/o3"
has "rank-00000-of-00001.safetensors: not a regular file (a FIFO)" "merge FIFO: named"
run 2 "merge --in FIFO" merge --in "$W/fifo" --out "$W/o4"
has "$W/fifo" "merge --in FIFO: named"

# a FIFO named like a plugin on the search path: refused, not dlopen'ed
mkdir "$W/plugins" && mkfifo "$W/plugins/x.so"
saved=${TPX_PLUGIN_PATH-}
export TPX_PLUGIN_PATH="$W/plugins${saved:+:$saved}"
run 1 "plugin FIFO on TPX_PLUGIN_PATH" plugins
if [ -n "$saved" ]; then TPX_PLUGIN_PATH=$saved; else unset TPX_PLUGIN_PATH; fi
if grep -A1 -F "x.so" "$W/out" "$W/err" | grep -qF "not a regular file (a FIFO)"; then
  echo "PASS plugin FIFO: named"; else
  echo "FAIL plugin FIFO: not named"; fails=$((fails + 1)); fi

# --out that cannot be a directory: exit 2 before any work (tpx.1)
: > "$W/regular"
run 2 "shard --out under a file" shard --weights "$FIX" --tp 1 --out "$W/regular/sub"
has "--out $W/regular/sub" "shard --out under a file: named"
run 2 "shard --out a file" shard --weights "$FIX" --tp 1 --out "$W/regular"
has "not a directory" "shard --out a file: says why"
if [ -d /proc/self ]; then
  run 2 "shard --out /proc/foo" shard --weights "$FIX" --tp 1 --out /proc/foo
  has "--out /proc/foo" "shard --out /proc/foo: named"
  run 2 "merge --out /proc/foo" merge --in "$W/ranks" --out /proc/foo
  has "--out /proc/foo" "merge --out /proc/foo: named"
fi
run 0 "shard into a new directory" shard --weights "$FIX" --tp 1 --out "$W/new"
run 0 "shard into new nested directories" shard --weights "$FIX" --tp 1 --out "$W/new2/a/b"

# Many tensors: 200 000 one-byte tensors in one module took minutes
# (every addition scanned the module's parameters) and the text report
# kept 4 KiB per row; now about a second. Past the limit, refused before
# parsing, naming the file and the limit.
if command -v python3 >/dev/null 2>&1; then
  python3 - "$W" <<'PY'
import struct, sys
def write(path, parts, data):
    h = ("{" + ",".join(parts) + "}").encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"\0" * data)
n = 200000
write(sys.argv[1] + "/many.safetensors",
      ['"m.t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}' % (i, i, i + 1)
       for i in range(n)], n)
write(sys.argv[1] + "/over.safetensors",
      ['"t%d":0' % i for i in range(2000001)], 0)
PY
  # a bounded address space where the system allows one (not under ASan,
  # which reserves terabytes of it)
  lim=""
  case "${ASAN_OPTIONS:-}${LD_PRELOAD:-}" in
  "") lim="ulimit -v 2000000;" ;;
  esac
  timeout 20 sh -c "$lim exec \"\$0\" plan --config \"\$1\" --weights \"\$2\"" \
    "$TPX" "$C" "$W/many.safetensors" >"$W/out" 2>"$W/err"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL 200k tensors: exit $rc (124: over 20 s; 137: over 2 GB)"; tail -3 "$W/err"; fails=$((fails + 1))
  else
    echo "PASS 200k tensors in one module"
  fi
  run 2 "2,000,001 tensors" plan --config "$C" --weights "$W/over.safetensors"
  has "over.safetensors: header lists 2000001 entries, more than the 2000000 tensors" "over the limit: named"
else
  echo "SKIP many tensors: no python3"
fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
