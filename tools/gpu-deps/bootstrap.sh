# tools/gpu-deps/bootstrap.sh — sourced (POSIX sh), not run: provides
# gpu_deps_bootstrap DEPS_DIR, which makes jansson, xxhash, check and pkg-config
# available to a build on a machine that lacks them (the lent GPU
# machines: no network, a different image). When pkg-config, jansson,
# libxxhash or check is missing it unpacks the Debian 12 packages committed beside this
# file into DEPS_DIR (never into /), rewrites their .pc files' prefix to
# that folder and exports PATH, PKG_CONFIG, PKG_CONFIG_PATH,
# LD_LIBRARY_PATH, LIBRARY_PATH and CPATH for the build and the test runs.
# Says on stdout what it did. Returns non-zero only when it cannot unpack.
# TPX_GPU_DEPS=force unpacks and uses them even when the machine has all
# four (the CPU check of this path: .ci/extra-gpu-deps.sh).

gpu_deps_have() { # -> 0 when pkg-config, jansson >= 2.11, libxxhash and check are there
  command -v pkg-config >/dev/null 2>&1 &&
    pkg-config --exists 'jansson >= 2.11' 2>/dev/null &&
    pkg-config --exists libxxhash 2>/dev/null &&
    pkg-config --exists check 2>/dev/null
}

gpu_deps_unpack() { # deb dest: dpkg -x, or ar + tar where dpkg is absent
  if command -v dpkg >/dev/null 2>&1; then
    dpkg -x "$1" "$2"
    return
  fi
  _t=$(mktemp -d) || return 1
  (cd "$_t" && ar x "$1") &&
    tar -xf "$_t"/data.tar.* -C "$2"
  _rc=$?
  rm -rf "$_t"
  return $_rc
}

gpu_deps_bootstrap() { # DEPS_DIR
  if [ "${TPX_GPU_DEPS:-}" != force ] && gpu_deps_have; then
    echo "gpu-deps: pkg-config, jansson, libxxhash and check found on this machine"
    return 0
  fi
  # the .debs beside this file; callers source it from the repository root
  _debs=$(pwd)/tools/gpu-deps
  mkdir -p "$1" || return 1
  _d=$(cd "$1" && pwd) || return 1
  for _deb in "$_debs"/*.deb; do
    gpu_deps_unpack "$_deb" "$_d" || {
      echo "gpu-deps: cannot unpack $_deb"
      return 1
    }
  done
  _lib=$_d/usr/lib/x86_64-linux-gnu
  for _pc in "$_lib"/pkgconfig/*.pc; do
    sed -i "s|^prefix=.*|prefix=$_d/usr|" "$_pc" || return 1
  done
  ln -sf pkgconf "$_d/usr/bin/pkg-config"
  PATH=$_d/usr/bin:$PATH
  PKG_CONFIG=$_d/usr/bin/pkg-config
  PKG_CONFIG_PATH=$_lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  LD_LIBRARY_PATH=$_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  LIBRARY_PATH=$_lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  CPATH=$_d/usr/include${CPATH:+:$CPATH}
  export PATH PKG_CONFIG PKG_CONFIG_PATH LD_LIBRARY_PATH LIBRARY_PATH CPATH
  echo "gpu-deps: unpacked $(find "$_debs" -name '*.deb' | wc -l) committed packages" \
    "(jansson, xxhash, check, pkg-config) into $_d; PATH, PKG_CONFIG(_PATH)," \
    "LD_LIBRARY_PATH, LIBRARY_PATH, CPATH point there"
  echo "gpu-deps: jansson $(pkg-config --modversion jansson)," \
    "check $(pkg-config --modversion check), $(command -v pkg-config)"
}
