#!/bin/sh
# The lent GPU machines' bare image (no jansson, xxhash, check or pkg-config), on a
# CPU: tools/gpu-deps/bootstrap.sh unpacks the committed .debs where the
# machine's own pkg-config sees nothing (PKG_CONFIG_LIBDIR = an empty
# folder), then a CPU-only tree (-Dcuda=disabled) is configured against
# them, one library + one Check test built and run with the bootstrap's
# LD_LIBRARY_PATH; the test's libjansson must resolve into the unpacked
# folder. No network. --quick: only the unpack and pkg-config part
# (seconds; the meson test gpu-deps-bootstrap).
# usage: .ci/extra-gpu-deps.sh [BUILD_DIR] [--quick]
#        (BUILD_DIR is ignored: own tree, build-gpudeps)
set -eu
cd "$(dirname "$0")/.."
quick=
for a in "$@"; do [ "$a" = --quick ] && quick=1; done
dir=${TPX_GPU_DEPS_BUILD:-build-gpudeps}
fail() {
  echo "FAIL gpu-deps: $*"
  exit 1
}
mkdir -p "$dir"
rm -rf "$dir/deps" "$dir/empty"
mkdir -p "$dir/empty"
# the bare image: the machine's pkg-config finds nothing
PKG_CONFIG_LIBDIR=$(cd "$dir/empty" && pwd)
export PKG_CONFIG_LIBDIR
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists jansson; then
  fail "the machine's pkg-config still sees jansson"
fi
. tools/gpu-deps/bootstrap.sh
TPX_GPU_DEPS=force gpu_deps_bootstrap "$dir/deps" || fail "bootstrap"
deps=$(cd "$dir/deps" && pwd)
[ "$(command -v pkg-config)" = "$deps/usr/bin/pkg-config" ] ||
  fail "pkg-config is $(command -v pkg-config), not the unpacked one"
for m in jansson check libsubunit; do
  [ "$(pkg-config --variable=prefix $m)" = "$deps/usr" ] ||
    fail "$m's prefix is not $deps/usr"
done
pkg-config --atleast-version=2.11 jansson || fail "jansson < 2.11"
case $(pkg-config --cflags --libs check jansson) in
*-lcheck_pic*-lsubunit*-ljansson*) ;;
*) fail "pkg-config --libs check jansson: $(pkg-config --libs check jansson)" ;;
esac
echo "gpu-deps: unpack + pkg-config OK"
[ -n "$quick" ] && exit 0

# a CPU-only tree against them, as tools/gpu-check.sh configures (less CUDA)
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" -Dcuda=disabled -Dnccl=disabled -Dmpi=auto \
    >"$dir.setup.log" 2>&1 || { tail -30 "$dir.setup.log"; fail "meson setup"; }
fi
grep -q "$deps/usr/bin/pkg-config" "$dir/meson-logs/meson-log.txt" ||
  fail "meson did not use the unpacked pkg-config"
meson compile -C "$dir" tests/unit/base/test_error >"$dir.compile.log" 2>&1 ||
  { tail -30 "$dir.compile.log"; fail "compile"; }
exe=$dir/tests/unit/base/test_error
ldd "$exe" | grep -q "libjansson.so.4 => $deps/" ||
  fail "libjansson is not the unpacked one: $(ldd "$exe" | grep jansson)"
meson test -C "$dir" --no-rebuild --suite base error >"$dir.test.log" 2>&1 ||
  { cat "$dir.test.log"; fail "the Check test"; }
grep -E '^(Ok|Fail):' "$dir.test.log"
echo "gpu-deps: CPU-only build against the unpacked deps: Check test passed"
