#!/bin/sh
# template-test.sh [BUILD_DIR] — the out-of-tree plugin template works
# against an *installed* tpx:
#   1. install tpx into a temporary tree: with BUILD_DIR, the already built
#      tree is installed with `meson install --destdir` (no rebuild);
#      without, tpx is configured, built and installed with -Dprefix=<tmp>;
#   2. build sdk/plugin-template against it, finding the SDK through
#      pkg-config (PKG_CONFIG_PATH);
#   3. load it through TPX_PLUGIN_PATH with `tpx plugins`, and run
#      `tpx check-plugin` on it (synthetic config and the template's
#      example-config.json).
# Exits non-zero on any failure. Also registered as the meson test
# 'template' (suite 'sdk').
set -eu

SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpx-template-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

say() { printf '== %s\n' "$*"; }

if [ $# -ge 1 ] && [ -n "$1" ]; then
  BUILD=$(cd "$1" && pwd)
  say "installing $BUILD into $WORK/destdir"
  meson install -C "$BUILD" --destdir "$WORK/destdir" --no-rebuild --quiet
  ROOT="$WORK/destdir"
  # The .pc files name the configured prefix; the sysroot maps it into the
  # destdir for -I flags.
  export PKG_CONFIG_SYSROOT_DIR="$ROOT"
else
  say "building and installing tpx into $WORK/prefix"
  meson setup "$WORK/build" "$SRC" -Dprefix="$WORK/prefix" -Dlibdir=lib \
    -Dtests=disabled -Dmpi=disabled -Dcuda=disabled -Dnccl=disabled >/dev/null
  ninja -C "$WORK/build" >/dev/null
  meson install -C "$WORK/build" --quiet
  ROOT=""
fi

TREE=${ROOT:-$WORK/prefix}
PC=$(find "$TREE" -name tpx-plugin.pc | head -n 1)
[ -n "$PC" ] || { echo "tpx-plugin.pc was not installed" >&2; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$PC")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
TPX=$(find "$TREE" -path '*/bin/tpx' -type f | head -n 1)
LIBTPX=$(find "$TREE" -name 'libtpx.so*' | head -n 1)
[ -x "$TPX" ] && [ -n "$LIBTPX" ] || { echo "tpx was not installed" >&2; exit 1; }
export LD_LIBRARY_PATH="$(dirname "$LIBTPX")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "SDK: $(pkg-config --cflags tpx-plugin) (plugindir $(pkg-config --variable=plugindir tpx-plugin))"

say "building the template against the installed SDK"
# Copy it out of the source tree: a real out-of-tree build.
cp -R "$SRC/sdk/plugin-template" "$WORK/template"
meson setup "$WORK/template-build" "$WORK/template" >/dev/null
ninja -C "$WORK/template-build"
PLUGIN="$WORK/template-build/libtpx_example.so"
[ -f "$PLUGIN" ] || { echo "the template did not build $PLUGIN" >&2; exit 1; }

say "tpx plugins (TPX_PLUGIN_PATH=$WORK/template-build)"
OUT=$(TPX_PLUGIN_PATH="$WORK/template-build" "$TPX" plugins --format json) || true
printf '%s\n' "$OUT" | grep -q "\"path\": \"$PLUGIN\"" || {
  printf '%s\n' "$OUT"; echo "tpx plugins did not load the template" >&2; exit 1; }
printf '%s\n' "$OUT" | grep -q '"ExampleForCausalLM"' || {
  echo "the template's architecture is not listed" >&2; exit 1; }
TPX_PLUGIN_PATH="$WORK/template-build" "$TPX" plugins | sed -n '/^example /,/^$/p'

say "tpx check-plugin"
"$TPX" check-plugin "$PLUGIN"
"$TPX" check-plugin "$PLUGIN" --config "$WORK/template/example-config.json"
say "template test passed"
