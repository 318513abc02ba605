#!/bin/sh
# completion.sh TRAIN COMPLETION — the bash completion for tpx-train
# (tools/completion/tpx-train.bash) offers every option `tpx-train --help`
# lists and no other, and completes --backend / --format values.
set -u
train=$1 comp=$2
command -v bash > /dev/null || { echo "no bash: skipped"; exit 77; }
want=$("$train" --help | grep -o -- '--[a-z][a-z-]*' | sort -u)
got=$(bash -c '. "$1"; COMP_WORDS=(tpx-train --); COMP_CWORD=1; _tpx_train
  printf "%s\n" "${COMPREPLY[@]}"' sh "$comp" | grep -v '^--help$' | sort -u)
want=$(printf '%s\n' "$want" | grep -v '^--help$')
if [ "$want" != "$got" ]; then
  echo "FAIL options differ (< --help, > completion):"
  printf '%s\n' "$want" > "${TMPDIR:-/tmp}/want.$$"
  printf '%s\n' "$got" | diff "${TMPDIR:-/tmp}/want.$$" -
  rm -f "${TMPDIR:-/tmp}/want.$$"
  exit 1
fi
echo "PASS $(printf '%s\n' "$want" | wc -l) options"
for v in "--backend:local mpi" "--format:text json" "--cp-layout:head-tail contiguous"; do
  got=$(bash -c '. "$1"; COMP_WORDS=(tpx-train "$2" ""); COMP_CWORD=2; _tpx_train
    printf "%s " "${COMPREPLY[@]}"' sh "$comp" "${v%%:*}")
  [ "$got" = "${v#*:} " ] || { echo "FAIL ${v%%:*} completes to '$got'"; exit 1; }
  echo "PASS ${v%%:*}"
done
