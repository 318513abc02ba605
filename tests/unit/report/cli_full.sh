#!/bin/sh
# cli_full.sh TPX SOURCE_DIR PLUGIN — every `tpx` command whose output
# cannot be written (stdout on /dev/full) exits 1 and says so on stderr
# ("cannot write output to standard output: REASON"), and exits 0 when it
# can (issue 28 C12; docs/tpx.1 EXIT STATUS). `tpx shard` and `tpx merge`
# print their result on stderr: only their --help goes to stdout.
set -u
TPX=$1 SRC=$2 PLUGIN=$3
[ -w /dev/full ] || { echo "no /dev/full: skipped"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpx-full.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
fails=0
L=$SRC/tests/data/configs/Llama-3.2-1B/config.json
# check NAME ARGS...: `tpx ARGS` exits 0 with stdout on /dev/null, 1 with
# stdout on /dev/full and the reason on stderr: No space left on device,
# or (reason=any) whatever it is where the library's own flush of stdout
# around plugin calls met the failure first and kept no errno
reason="No space left on device"
check() {
  name=$1
  shift
  "$TPX" "$@" > /dev/null 2> "$WORK/err"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL $name: exit $rc with stdout on /dev/null"; head -3 "$WORK/err"
    fails=$((fails + 1)); return
  fi
  "$TPX" "$@" > /dev/full 2> "$WORK/err"
  rc=$?
  if [ $rc -ne 1 ]; then
    echo "FAIL $name: exit $rc with stdout on /dev/full, want 1"; fails=$((fails + 1))
  elif ! grep -q "^tpx[a-z -]*: cannot write output to standard output: $reason\$" "$WORK/err"; then
    echo "FAIL $name: stderr lacks the reason:"; cat "$WORK/err"; fails=$((fails + 1))
  else
    echo "PASS $name"
  fi
}
check "tpx --help" --help
check "tpx --version" --version
check "tpx plan --help" plan --help
check "tpx plan (text)" plan --config "$L" --tp 2
check "tpx plan (json)" plan --config "$L" --tp 2 --format json
check "tpx plan --summary" plan --config "$L" --tp 2 --summary
check "tpx plan --gpus" plan --config "$L" --gpus 8
reason=".*"
check "tpx plugins" plugins
check "tpx check-plugin" check-plugin "$PLUGIN"
reason="No space left on device"
check "tpx plugins --help" plugins --help
check "tpx check-plugin --help" check-plugin --help
check "tpx shard --help" shard --help
check "tpx merge --help" merge --help
# a command that fails anyway keeps its own exit code
"$TPX" plan --config "$WORK/nothing.json" > /dev/full 2> "$WORK/err"
rc=$?
if [ $rc -eq 2 ]; then echo "PASS a missing config on /dev/full: exit 2"; else
  echo "FAIL a missing config on /dev/full: exit $rc, want 2"; fails=$((fails + 1)); fi
exit $fails
