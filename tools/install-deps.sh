#!/bin/sh
# Install what tpx needs to build and test on Debian 12 (run as root).
# CUDA and NCCL are optional (found under /usr/local/cuda when present).
set -eu
pkgs="build-essential meson ninja-build pkg-config libjansson-dev libxxhash-dev check libopenmpi-dev openmpi-bin valgrind python3 libopenblas-dev clang-format"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
