#!/bin/sh
# output.sh TRAIN FIXTURES — what tpx-train writes reaches its reader whole,
# or the run fails saying so (issue 28 B7, C11, C12, item 18):
# - --dump-params / --dump-grads on a "full disk" (RLIMIT_FSIZE, SIGXFSZ
#   ignored) exit 1 naming the file, leave nothing at a new final name and
#   an existing one as it was, and no temporary behind; a dump that works
#   replaces the file (through a link: the file it names, the link kept);
# - a finite loss that rises above --diverge-factor x step 0's stops the
#   run (exit 1, naming the step, the loss and the threshold); 0 disables;
# - the log (text, JSON, --help) on /dev/full or a full disk exits 1 with
#   "cannot write output: REASON";
# - a bad value is one line with the reason and "see tpx-train --help".
set -u
train=$1 fix=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
std="--model $fix/llama --tokens $fix/tokens.bin --batch 4 --seq 16 --steps 2 --lr 1e-3"
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; [ -f "$tmp/err" ] && head -5 "$tmp/err"; fails=$((fails + 1)); }
# run WANT_RC NAME ARGS...: tpx-train ARGS, stdout $tmp/out, stderr $tmp/err
run() {
  want=$1 name=$2
  shift 2
  "$train" "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  if [ $rc -eq "$want" ]; then ok "$name (exit $rc)"; else bad "$name: exit $rc, want $want"; fi
}
has() { # FILE NEEDLE NAME
  if grep -qF -- "$2" "$tmp/$1"; then ok "$3"; else bad "$3: $1 lacks '$2'"; fi
}
# full_disk BLOCKS STDOUT NAME ARGS...: tpx-train ARGS where no file may
# grow past BLOCKS x 512 bytes (a "full disk": SIGXFSZ ignored, so the
# write fails with EFBIG), stdout to STDOUT, stderr $tmp/err; want exit 1
full_disk() {
  blocks=$1 dest=$2 name=$3
  shift 3
  (
    trap '' XFSZ
    ulimit -f "$blocks"
    exec "$train" "$@" > "$dest" 2> "$tmp/err"
  )
  rc=$?
  [ $rc -eq 1 ] && ok "$name: exit 1" || bad "$name: exit $rc, want 1"
}
no_temps() { # DIR NAME
  if ls -A "$1" | grep -q '\.tmp-'; then bad "$2: a temporary was left: $(ls -A "$1")"; else ok "$2"; fi
}

# ---- B7: dumps on a full disk (files over 51200 bytes cannot be written:
# the dumps are ~860 KB, the log goes to /dev/null) ----
mkdir -p "$tmp/d"
echo old > "$tmp/d/params.st"
full_disk 100 /dev/null "--dump-params on a full disk" $std --dump-params "$tmp/d/params.st"
has err "params.st: cannot write: File too large" "the error names the file and the reason"
[ "$(cat "$tmp/d/params.st")" = old ] && ok "the existing file is as it was" ||
  bad "the existing file was overwritten ($(wc -c < "$tmp/d/params.st") bytes)"
no_temps "$tmp/d" "no temporary left (params)"
full_disk 100 /dev/null "--dump-grads on a full disk" $std --dump-grads "$tmp/d/grads.st"
has err "grads.st: cannot write: File too large" "the error names the file and the reason"
[ -e "$tmp/d/grads.st" ] && bad "a partial file is at the final name ($(wc -c < "$tmp/d/grads.st") bytes)" ||
  ok "nothing at the final name"
no_temps "$tmp/d" "no temporary left (grads)"
# a dump that works: written whole, over the old file; through a link, the
# file it names is replaced and the link stays a link
run 0 "dumps" $std --dump-params "$tmp/d/params.st" --dump-grads "$tmp/d/grads.st"
[ "$(wc -c < "$tmp/d/params.st")" -gt 800000 ] && ok "the params dump replaced the old file" || bad "params.st: $(wc -c < "$tmp/d/params.st") bytes"
[ "$(wc -c < "$tmp/d/grads.st")" -gt 800000 ] && ok "the grads dump is whole" || bad "grads.st: $(wc -c < "$tmp/d/grads.st") bytes"
echo old > "$tmp/d/target.st"
ln -s target.st "$tmp/d/link.st"
run 0 "dump through a link" $std --dump-params "$tmp/d/link.st"
[ -L "$tmp/d/link.st" ] && ok "the link is kept" || bad "the link was replaced"
cmp -s "$tmp/d/target.st" "$tmp/d/params.st" && ok "the file it names holds the dump" || bad "target.st is not the dump"
no_temps "$tmp/d" "no temporary left (working dumps)"

# ---- C11: a loss that rises far above its start, staying finite ----
run 1 "--lr 10 diverges" --model "$fix/llama" --tokens "$fix/tokens.bin" --batch 4 --seq 16 --steps 20 --lr 10
has err "step 1: the loss is " "names the step and the loss"
has err ", above 4 x step 0's loss " "and the threshold"
has err "training diverged (--diverge-factor" "and the option"
has out "step 0 " "step 0 was printed first"
run 0 "--diverge-factor 0 turns the check off" --model "$fix/llama" --tokens "$fix/tokens.bin" --batch 4 --seq 16 --steps 3 --lr 10 --diverge-factor 0
run 0 "--diverge-factor 1000 lets it rise" --model "$fix/llama" --tokens "$fix/tokens.bin" --batch 4 --seq 16 --steps 3 --lr 10 --diverge-factor 1000
run 2 "--diverge-factor -1 is refused" $std --diverge-factor -1
has err "--diverge-factor: '-1' (must be >= 0)" "says why"

# ---- C12: output that cannot be written ----
if [ -w /dev/full ]; then
  for f in text json; do
    "$train" $std --format $f > /dev/full 2> "$tmp/err"
    rc=$?
    [ $rc -eq 1 ] && ok "--format $f on /dev/full: exit 1" || bad "--format $f on /dev/full: exit $rc, want 1"
    has err "tpx-train: cannot write output: No space left on device" "says why"
  done
  "$train" --help > /dev/full 2> "$tmp/err"
  rc=$?
  [ $rc -eq 1 ] && ok "--help on /dev/full: exit 1" || bad "--help on /dev/full: exit $rc, want 1"
else
  echo "skip: no /dev/full"
fi
# the JSON log on a full disk (512 bytes allowed: the log is longer, the
# message on stderr shorter)
full_disk 1 "$tmp/log.json" "the JSON log on a full disk" $std --steps 6 --format json
has err "tpx-train: cannot write output: File too large" "says why"

# ---- item 18: a bad value is one line, not the usage ----
run 2 "--tp 0" $std --tp 0
[ "$(wc -l < "$tmp/err")" -eq 1 ] && ok "one line" || bad "$(wc -l < "$tmp/err") lines on stderr"
has err "bad value for --tp: '0' (must be > 0); see tpx-train --help" "the reason and where to look"
run 2 "an unknown option" $std --tpp 2
[ "$(wc -l < "$tmp/err")" -eq 1 ] && ok "one line" || bad "$(wc -l < "$tmp/err") lines on stderr"
run 2 "no arguments" 
has err "usage: tpx-train" "no arguments: the usage"
exit $fails
