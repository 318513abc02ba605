#!/bin/sh
# blas_kernel.sh TRAIN CHECK FIXTURES [mpi] — issue 30: an OpenBLAS fallback
# kernel is said and fixed. TPX_TEST_FAKE_COREDETECT pretends OpenBLAS
# chose Prescott on an Intel AVX2 CPU: tpx-train must say so on stderr,
# run itself again with OPENBLAS_CORETYPE=Haswell (the header's kernel),
# and train to torch's losses; an OPENBLAS_CORETYPE set by the user and
# TPX_BLAS_FIX=0 are left alone; the header and --blas-info name the BLAS.
# With "mpi": the same under mpirun -np 2 (tp 2): each rank runs again,
# rank 0 alone says so. Skipped (77) on a CPU without AVX2 + FMA (the Haswell kernel would not
# run) or off x86.
set -u
train=$1 check=$2 fix=$3 mpi=${4:-}
grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo ||
  { echo "SKIP no AVX2 + FMA here"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset OPENBLAS_CORETYPE TPX_BLAS_FIX TPX_BLAS_FIXED_FROM
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
pass() { echo "PASS $1"; }
has() { # FILE TEXT WHAT
  if grep -qF -- "$2" "$1"; then pass "$3"; else fail "$3: no '$2' in:"; cat "$1"; fi
}
hasnt() {
  if grep -qF -- "$2" "$1"; then fail "$3: '$2' in:"; cat "$1"; else pass "$3"; fi
}
common="--model $fix/llama --tokens $fix/tokens.bin --batch 4 --seq 16 --steps 3 --lr 1e-3 --clip 1.0 --weight-decay 0.01"
fake='Prescott;intel 6 60 avx,avx2,fma'
line="tpx-train: OpenBLAS 0.3.21 chose its Prescott kernel on a CPU with AVX2 (family 6 model 60); running with OPENBLAS_CORETYPE=Haswell"
ver=$("$train" --blas-info | sed -n 's/^blas: OpenBLAS \([^,]*\),.*/\1/p')
[ -n "$ver" ] || { fail "--blas-info: $("$train" --blas-info)"; exit 1; }
line=$(echo "$line" | sed "s/0\.3\.21/$ver/")

# the fallback, fixed: said once, the re-run on Haswell, torch's losses
TPX_TEST_FAKE_COREDETECT=$fake "$train" $common --format json > "$tmp/out.json" 2> "$tmp/err" ||
  { fail "run failed"; cat "$tmp/err"; exit 1; }
has "$tmp/err" "$line" "the fallback is said"
[ "$(grep -c 'chose its' "$tmp/err")" = 1 ] && pass "said once" || fail "said $(grep -c 'chose its' "$tmp/err") times"
has "$tmp/out.json" '"kernel":"Haswell","chosen_by":"OPENBLAS_CORETYPE=Haswell set by tpx-train: OpenBLAS chose Prescott"' "json: the re-run's kernel"
"$check" steps "$tmp/out.json" "$fix/expected.json" llama 1e-5 && pass "losses as torch's" || fail "losses"

TPX_TEST_FAKE_COREDETECT=$fake "$train" $common > "$tmp/out.txt" 2>&1 || fail "text run failed"
has "$tmp/out.txt" "blas: OpenBLAS $ver, kernel Haswell (OPENBLAS_CORETYPE=Haswell set by tpx-train: OpenBLAS chose Prescott)" "text header"

# TPX_BLAS_FIX=0: said, not fixed
TPX_BLAS_FIX=0 TPX_TEST_FAKE_COREDETECT=$fake "$train" $common > "$tmp/out.txt" 2> "$tmp/err" || fail "TPX_BLAS_FIX=0 run failed"
has "$tmp/err" "TPX_BLAS_FIX=0: left as it is (OPENBLAS_CORETYPE=Haswell would run the right one)" "TPX_BLAS_FIX=0 said"
has "$tmp/out.txt" "(detected)" "TPX_BLAS_FIX=0: the detected kernel"

# the user's OPENBLAS_CORETYPE is never overridden
OPENBLAS_CORETYPE=Sandybridge TPX_TEST_FAKE_COREDETECT=$fake "$train" $common > "$tmp/out.txt" 2> "$tmp/err" || fail "user CORETYPE run failed"
hasnt "$tmp/err" "chose its" "the user's OPENBLAS_CORETYPE: nothing said"
has "$tmp/out.txt" "blas: OpenBLAS $ver, kernel Sandybridge (OPENBLAS_CORETYPE=Sandybridge)" "the user's kernel kept"

# no fallback: nothing said, the header names the detected kernel
"$train" $common > "$tmp/out.txt" 2> "$tmp/err" || fail "plain run failed"
hasnt "$tmp/err" "chose its" "no fallback here: nothing said"
grep -Eq "^blas: OpenBLAS $ver, kernel [A-Za-z0-9_]+ \(detected\), [0-9]+ threads? per rank$" "$tmp/out.txt" &&
  pass "header line" || { fail "header line"; cat "$tmp/out.txt"; }
# under mpirun: every rank re-runs itself (before MPI_Init), one line said
if [ "$mpi" = mpi ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpirun -np 2 -x TPX_TEST_FAKE_COREDETECT="$fake" "$train" $common --tp 2 --backend mpi \
    --format json > "$tmp/out.json" 2> "$tmp/err" || { fail "mpirun run failed"; cat "$tmp/err"; }
  [ "$(grep -c 'chose its' "$tmp/err")" = 1 ] && pass "mpirun: said once" ||
    { fail "mpirun: said $(grep -c 'chose its' "$tmp/err") times"; cat "$tmp/err"; }
  has "$tmp/out.json" '"kernel":"Haswell"' "mpirun: rank 0 on Haswell"
  "$check" steps "$tmp/out.json" "$fix/expected.json" llama 1e-5 && pass "mpirun: losses as torch's" || fail "mpirun: losses"
fi
[ $fails = 0 ]
