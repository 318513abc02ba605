#!/bin/sh
# Compare the dynamic symbols libtpx.so exports with the checked-in list.
# After an intended API change, regenerate the list: tools/update-symbols.sh
set -eu
lib=$1 expected=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRV]$/ {print $3}' | sort -u > "$tmp/actual"
sort -u "$expected" > "$tmp/expected"
if cmp -s "$tmp/expected" "$tmp/actual"; then
  echo "exported symbols match $expected ($(wc -l < "$tmp/actual") symbols)"
  exit 0
fi
echo "exported symbols of $lib differ from $expected (< only in the list, > only in the library):"
diff "$tmp/expected" "$tmp/actual" || true
exit 1
