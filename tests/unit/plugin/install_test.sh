#!/bin/sh
# install_test.sh BUILD_DIR NUM_PLUGINS — an installed tpx is self-contained:
# `meson install --destdir` the built tree (no rebuild), then, with the build
# tree still present and no LD_LIBRARY_PATH:
#   - the installed tpx starts (its rpath finds the installed libtpx);
#   - it loads exactly the NUM_PLUGINS bundled plugins, all from the
#     installed <libdir>/tpx/plugins, none from the build tree, and prints no
#     duplicate-architecture warning;
#   - `tpx plan` works from the installed tree;
#   - the man page and the bash completion were installed.
set -u
BUILD=$(cd "$1" && pwd)
WANT=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpx-install-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
fails=0
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

meson install -C "$BUILD" --destdir "$WORK/root" --no-rebuild --quiet || {
  echo "FAIL meson install"; exit 1; }
TPX=$(find "$WORK/root" -path '*/bin/tpx' -type f | head -n 1)
[ -x "$TPX" ] || { echo "FAIL tpx was not installed"; exit 1; }
unset LD_LIBRARY_PATH TPX_PLUGIN_PATH

out=$("$TPX" plugins --format json 2>"$WORK/err")
rc=$?
[ $rc -eq 0 ] && ok "installed tpx runs without LD_LIBRARY_PATH" || {
  bad "installed tpx plugins: exit $rc"; cat "$WORK/err"; }
n=$(printf '%s\n' "$out" | grep -c '"path": ".*\.so"')
[ "$n" -eq "$WANT" ] && ok "$n plugins loaded" || bad "$n plugins loaded, want $WANT"
if printf '%s\n' "$out" | grep '"path": ' | grep -v '"build_tree"' | grep -qv "\"path\": \"$WORK/root/"; then
  bad "a plugin came from outside the installed tree"
  printf '%s\n' "$out" | grep '"path": ' | grep -v "$WORK/root/"
else
  ok "every plugin from the installed tree"
fi
printf '%s\n' "$out" | grep -q '/tpx/plugins/' && ok "from <libdir>/tpx/plugins" ||
  bad "plugins not under <libdir>/tpx/plugins"
if printf '%s\n' "$out" | grep -q duplicate-architecture; then
  bad "duplicate-architecture warnings"
else
  ok "no duplicate-architecture warning"
fi
printf '%s\n' "$out" | grep -q '"build_tree": false' && ok "default_dir is not the build tree" ||
  bad "default_dir says build tree"
"$TPX" plugins --help | grep -q "installed plugin directory: $WORK/root/" &&
  ok "help names the installed plugin directory" ||
  bad "help does not name the installed plugin directory"

SRC=$(cd "$(dirname "$0")/../../.." && pwd)
"$TPX" plan --config "$SRC/tests/data/configs/Llama-3.2-1B/config.json" \
  --tp 2 --dp-shard 2 > "$WORK/plan.txt" 2>&1 && grep -q "^Plan: plugin" "$WORK/plan.txt" &&
  ok "installed tpx plan" || { bad "installed tpx plan"; head "$WORK/plan.txt"; }

find "$WORK/root" -path '*/man1/tpx.1' | grep -q . && ok "man page installed" ||
  bad "man page not installed"
find "$WORK/root" -path '*/bash-completion/completions/tpx' | grep -q . &&
  ok "bash completion installed" || bad "bash completion not installed"

# A relative --destdir puts the installed tree inside the build directory:
# that tpx is still an installed one and loads its own plugins.
STAGE=qa-install-stage.$$
meson install -C "$BUILD" --destdir "$STAGE" --no-rebuild --quiet || {
  echo "FAIL meson install --destdir $STAGE"; exit 1; }
TPX2=$(find "$BUILD/$STAGE" -path '*/bin/tpx' -type f | head -n 1)
out=$("$TPX2" plugins --format json 2>/dev/null)
n=$(printf '%s\n' "$out" | grep "\"path\": \"$(cd "$BUILD" && pwd -P)/$STAGE/" | grep -c '\.so"')
[ "$n" -eq "$WANT" ] && ok "installed below the build tree: its own $n plugins" ||
  bad "installed below the build tree: $n of $WANT plugins from $BUILD/$STAGE"
rm -rf "${BUILD:?}/$STAGE"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
