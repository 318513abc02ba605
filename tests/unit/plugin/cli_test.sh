#!/bin/sh
# cli_test.sh TPX GOOD_DIR BROKEN_DIR — `tpx plugins` and `tpx check-plugin`
# end to end: exit codes, the text and JSON outputs, refusals with reasons.
set -u
TPX=$1 GOOD=$2 BROKEN=$3
fails=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpx-cli-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

# expect NAME WANT_RC NEEDLE CMD... : run CMD, check its exit code and that
# its stdout+stderr holds NEEDLE.
expect() {
  name=$1 want=$2 needle=$3
  shift 3
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; echo "$out" | head -20
    fails=$((fails + 1))
  elif ! printf '%s\n' "$out" | grep -qF -- "$needle"; then
    echo "FAIL $name: output lacks '$needle'"; echo "$out" | head -20
    fails=$((fails + 1))
  else
    echo "PASS $name"
  fi
}

# A directory of plugins that fail to load without crashing the loader.
mkdir -p "$WORK/mixed/sub"
for f in no_symbols missing_get_plan abi_too_new not_elf; do
  ln -s "$BROKEN/$f.so" "$WORK/mixed/$f.so"
done
ln -s "$GOOD/libtpxtest_good.so" "$WORK/mixed/sub/libtpxtest_good.so"

expect "plugins --help" 0 "TPX_PLUGIN_PATH" "$TPX" plugins --help
expect "plugins bad option" 2 "unknown argument" "$TPX" plugins --frobnicate
expect "plugins bad format" 2 "unknown format" "$TPX" plugins --format xml
expect "plugins good dir" 0 "tpxtest 1.2.3 (ABI 1.0)" "$TPX" plugins --dir "$GOOD"
expect "plugins duplicate warning" 0 "duplicate-architecture" "$TPX" plugins --dir "$GOOD"
expect "plugins capabilities" 0 "capabilities: get_plan skeleton validate fsdp_units fp32_params strategy" "$TPX" plugins --dir "$GOOD"
expect "plugins named plans" 0 "named plans: tpxtest_named_plan" "$TPX" plugins --dir "$GOOD"
expect "plugins refused" 1 "4 plugin(s) refused" env TPX_PLUGIN_PATH="$WORK/mixed" "$TPX" plugins
expect "plugins refused reason" 1 "missing required symbol 'get_plan'" env TPX_PLUGIN_PATH="$WORK/mixed" "$TPX" plugins
expect "plugins abi reason" 1 "the host speaks 1.0..1.0, the plugin speaks 2.0" env TPX_PLUGIN_PATH="$WORK/mixed" "$TPX" plugins
expect "plugins subdirectory" 1 "$WORK/mixed/sub/libtpxtest_good.so" env TPX_PLUGIN_PATH="$WORK/mixed" "$TPX" plugins
# A plugin others can write runs code as the tpx user: refused as
# plugin-untrusted, naming path, mode and owner; TPX_PLUGIN_TRUST_ANY=1
# loads it anyway (issue 28 A1). A FIFO named .so is never opened (A2).
mkdir -p "$WORK/loose" "$WORK/fifo"
cp "$GOOD/libtpxtest_good.so" "$WORK/loose/lib.so"
chmod 666 "$WORK/loose/lib.so"
expect "plugins refuses a file others can write" 1 "untrusted: the file $WORK/loose/lib.so (mode 0666, owner" "$TPX" plugins --dir "$WORK/loose"
expect "plan names the untrusted plugin" 0 "[plugin-untrusted] plugin $WORK/loose/lib.so refused" env TPX_PLUGIN_PATH="$WORK/loose" "$TPX" plan --config "$TPX_SOURCE_DIR/tests/data/configs/Llama-3.2-1B/config.json"
expect "plan --summary shows the refusal" 0 "  warning [plugin-untrusted] plugin $WORK/loose/lib.so refused: untrusted" env TPX_PLUGIN_PATH="$WORK/loose" "$TPX" plan --summary --config "$TPX_SOURCE_DIR/tests/data/configs/Llama-3.2-1B/config.json"
expect "TPX_PLUGIN_TRUST_ANY=1 loads it" 0 "tpxtest 1.2.3 (ABI 1.0)" env TPX_PLUGIN_TRUST_ANY=1 "$TPX" plugins --dir "$WORK/loose"
chmod 644 "$WORK/loose/lib.so"
chmod 1777 "$WORK/loose"
expect "plugins refuses a sticky world-writable directory" 1 "untrusted: the directory $WORK/loose (mode 1777" "$TPX" plugins --dir "$WORK/loose"
chmod 700 "$WORK/loose"
mkfifo "$WORK/fifo/p.so"
expect "plugins skips a FIFO" 1 "not a regular file (a FIFO); not opened" timeout 5 "$TPX" plugins --dir "$WORK/fifo"

# One directory named 2,000 times is searched once: its plugin listed once.
many=$GOOD
i=0
while [ $i -lt 2000 ]; do many="$many:$GOOD"; i=$((i + 1)); done
n=$(TPX_PLUGIN_PATH="$many" timeout 20 "$TPX" plugins 2>&1 | grep -c "^  path: $GOOD/libtpxtest_good.so\$")
if [ "$n" = 1 ]; then echo "PASS a directory named 2,000 times is listed once"; else echo "FAIL a directory named 2,000 times: listed $n times"; fails=$((fails + 1)); fi

expect "TPX_DEBUG prints the library's log" 0 "tpx: info: loaded plugin 'tpxtest'" env TPX_DEBUG=info "$TPX" plugins --dir "$GOOD"
expect "TPX_DEBUG=1 is info" 0 "tpx: info: loaded plugin 'tpxtest'" env TPX_DEBUG=1 "$TPX" plugins --dir "$GOOD"
expect "TPX_DEBUG=debug is info" 0 "tpx: info: loaded plugin 'tpxtest'" env TPX_DEBUG=debug "$TPX" plugins --dir "$GOOD"
out=$(TPX_DEBUG=loud "$TPX" plugins --dir "$GOOD" 2>&1 >/dev/null)
n=$(printf '%s\n' "$out" | grep -c "^tpx: warn: TPX_DEBUG='loud' is not a log level")
if [ "$n" -eq 1 ]; then echo "PASS TPX_DEBUG unknown value warned once"; else echo "FAIL TPX_DEBUG unknown value warned $n times: $out"; fails=$((fails + 1)); fi
out=$(TPX_DEBUG= "$TPX" plugins --dir "$GOOD" 2>&1 >/dev/null)
if [ -z "$out" ]; then echo "PASS no TPX_DEBUG, no log"; else echo "FAIL no TPX_DEBUG, no log: $out"; fails=$((fails + 1)); fi
expect "plugins survives a crashing plugin" 1 "crashed with SIGSEGV (signal 11) while loading" "$TPX" plugins --dir "$BROKEN"
expect "plugins json" 1 '"reason": "not an ELF file' "$TPX" plugins --dir "$WORK/mixed" --format json
out=$("$TPX" plugins --dir "$WORK/mixed" --format json 2>/dev/null)
if printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["format"]=="tpx-plugins/1"; assert len(d["plugins"])==1 and len(d["refused"])==4; assert d["plugins"][0]["architectures"][0]=="TestForCausalLM"; assert d["default_dir"]["build_tree"] is True and d["default_dir"]["path"].endswith("/plugins")'; then
  echo "PASS plugins json parses"
else
  echo "FAIL plugins json parses"; fails=$((fails + 1))
fi

# Directories that cannot be searched are named, never passed over silently.
: > "$WORK/afile"
expect "plugins --dir missing" 2 "plugin directory '$WORK/nope' cannot be searched: No such file or directory" "$TPX" plugins --dir "$WORK/nope"
expect "plugins --dir not a dir" 2 "'$WORK/afile' cannot be searched: Not a directory" "$TPX" plugins --dir "$WORK/afile"
expect "plugins --dir none usable" 2 "none of the directories given with --dir could be searched" "$TPX" plugins --dir "$WORK/nope"
expect "plugins --dir one of two missing" 1 "'$WORK/nope' cannot be searched" "$TPX" plugins --dir "$WORK/nope" --dir "$GOOD"
expect "plugins --dir missing json" 2 '"code": "plugin-dir-unusable"' "$TPX" plugins --dir "$WORK/nope" --format json
expect "TPX_PLUGIN_PATH entry missing" 1 "tpx plugins: warning: plugin directory '$WORK/gone' cannot be searched" env TPX_PLUGIN_PATH="$WORK/gone" "$TPX" plugins
expect "TPX_PLUGIN_PATH entry missing (plan)" 0 "tpx plan: warning: plugin directory '$WORK/gone' cannot be searched" env TPX_PLUGIN_PATH="$WORK/gone" "$TPX" plan --config "$TPX_SOURCE_DIR/tests/data/configs/Llama-3.2-1B/config.json"
expect "plugins --help names the default dir" 0 "the build tree (this tpx runs from it): $TPX_BUILD_DIR/plugins" "$TPX" plugins --help

expect "check-plugin --help" 0 "usage: tpx check-plugin" "$TPX" check-plugin --help
expect "check-plugin no plugin" 2 "no plugin given" "$TPX" check-plugin
expect "check-plugin bad timeout" 2 "--timeout" "$TPX" check-plugin x.so --timeout -3
expect "check-plugin missing file" 2 "tpx check-plugin: $WORK/nope.so: No such file or directory" "$TPX" check-plugin "$WORK/nope.so"
expect "check-plugin directory" 2 "tpx check-plugin: $WORK: Is a directory" "$TPX" check-plugin "$WORK"
expect "check-plugin one of two missing" 2 "$WORK/nope.so: No such file or directory" "$TPX" check-plugin "$GOOD/libtpxtest_good.so" "$WORK/nope.so"
first=$("$TPX" check-plugin "$GOOD/libtpxtest_good.so" 2>/dev/null | head -n 1)
if [ "$first" = "plugin: $GOOD/libtpxtest_good.so" ]; then
  echo "PASS check-plugin first line names the plugin"
else
  echo "FAIL check-plugin first line: '$first'"; fails=$((fails + 1))
fi
out=$("$TPX" check-plugin "$GOOD/libtpxtest_good.so" "$BROKEN/not_elf.so" 2>&1)
rc=$?
if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$out" | grep -c '^plugin: ')" -eq 2 ] &&
   printf '%s\n' "$out" | grep -qx "plugin: $BROKEN/not_elf.so" &&
   printf '%s\n' "$out" | grep -q "38 passed, 0 failed"; then
  echo "PASS check-plugin several plugins"
else
  echo "FAIL check-plugin several plugins: exit $rc"; printf '%s\n' "$out" | head; fails=$((fails + 1))
fi
out=$("$TPX" check-plugin "$GOOD/libtpxtest_good.so" "$GOOD/libtpxtest_good.so" --format json 2>/dev/null)
if printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert isinstance(d, list) and len(d)==2 and d[0]["failed"]==0'; then
  echo "PASS check-plugin several plugins json"
else
  echo "FAIL check-plugin several plugins json"; fails=$((fails + 1))
fi
expect "check-plugin good" 0 "38 passed, 0 failed" "$TPX" check-plugin "$GOOD/libtpxtest_good.so"
expect "check-plugin hang" 1 "timed out after 1.0 s (killed)" "$TPX" check-plugin "$BROKEN/get_plan_hangs.so" --timeout 1
expect "check-plugin crash" 1 "crashed with SIGSEGV" "$TPX" check-plugin "$BROKEN/register_crashes.so"
expect "check-plugin text .so" 1 "FAIL exports: cannot read exports: not an ELF file" "$TPX" check-plugin "$BROKEN/not_elf.so"
out=$("$TPX" check-plugin "$BROKEN/unknown_style.so" --format json 2>/dev/null)
if printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["failed"]==8 and d["passed"]==8, d; assert any("diagonalwise" in c["detail"] for c in d["checks"])'; then
  echo "PASS check-plugin json"
else
  echo "FAIL check-plugin json"; echo "$out" | head; fails=$((fails + 1))
fi

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
