#!/bin/sh
# tools/gpu-deps/fetch.sh — re-download the Debian 12 (bookworm) packages
# tools/gpu-deps/bootstrap.sh unpacks on a machine that lacks them (the
# lent GPU machines: no network, no jansson / check / pkg-config). Run on
# a Debian 12 amd64 machine with network; replaces the .debs beside it.
# See tools/gpu-deps/README.md for what each one is for.
set -eu
cd "$(dirname "$0")"
rm -f ./*.deb
apt-get download libjansson4 libjansson-dev check libsubunit0 \
  libsubunit-dev pkgconf-bin libpkgconf3 libxxhash0 libxxhash-dev
ls -l ./*.deb
