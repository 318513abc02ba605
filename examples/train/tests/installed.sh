#!/bin/sh
# installed.sh BUILD_DIR FIXTURES — an installed tpx-train runs as the
# installed tpx does: `meson install --destdir` of the built tree (no
# rebuild), then, with no LD_LIBRARY_PATH, the installed tpx-train finds
# the installed libtpx through its rpath ($ORIGIN/../<libdir>) and its
# plugins in <libdir>/tpx/plugins, and trains a step; its bash completion
# was installed beside tpx's.
set -u
build=$(cd "$1" && pwd) fix=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/tpx-train-install.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
meson install -C "$build" --destdir "$work/root" --no-rebuild --quiet || {
  echo "FAIL meson install"; exit 1; }
train=$(find "$work/root" -path '*/bin/tpx-train' -type f | head -n 1)
[ -x "$train" ] || { echo "FAIL tpx-train was not installed"; exit 1; }
unset LD_LIBRARY_PATH TPX_PLUGIN_PATH
"$train" --model "$fix/llama" --tokens "$fix/tokens.bin" --batch 4 --seq 16 \
  --steps 1 --lr 1e-3 > "$work/out" 2>&1 || {
  echo "FAIL the installed tpx-train:"; cat "$work/out"; exit 1; }
grep -q '^step 0 ' "$work/out" || { echo "FAIL no step line"; cat "$work/out"; exit 1; }
echo "PASS installed tpx-train runs without LD_LIBRARY_PATH"
find "$work/root" -path '*/bash-completion/completions/tpx-train' | grep -q . || {
  echo "FAIL bash completion for tpx-train not installed"; exit 1; }
echo "PASS bash completion installed"
