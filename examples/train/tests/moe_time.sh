#!/bin/sh
# moe_time.sh TRAIN FIXTURES — tpx-train reports rank 0's time in the MoE
# dispatch over ep (the library's clock, tpx_mesh_comm_time's moe_seconds;
# docs/TRAIN.md "Output"), issue 29's "share of the step in dispatch":
# - an --ep run's throughput line ends with "moe dispatch N% of the step
#   (S s/step)", S > 0, under both dispatchers; --format json's last line
#   has "time" with "moe_dispatch_s" > 0 and "moe_dispatch_share";
# - a run without --ep prints no such figure, and its JSON's
#   "moe_dispatch_s" is 0 (no dispatch collective at ep 1).
set -u
train=$1 fix=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
std="--model $fix/qwen3moe --tokens $fix/tokens.bin --batch 4 --seq 16 --steps 3 --lr 1e-3 --dp-shard 2"
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
pat='moe dispatch [0-9][0-9.]*% of the step ([0-9][0-9.]* s/step)$'
for disp in all-gather all-to-all; do
  if ! "$train" $std --ep 2 --moe-dispatcher $disp > "$tmp/out" 2> "$tmp/err"; then
    bad "--ep 2 $disp: exit $?"; head -5 "$tmp/err"; continue
  fi
  line=$(grep '^throughput ' "$tmp/out")
  if echo "$line" | grep -q -- "$pat"; then ok "$disp: $line"; else bad "$disp: no MoE dispatch share in: $line"; fi
  s=$(echo "$line" | sed -n -E 's/.*moe dispatch [0-9.]+% of the step \(([0-9.]+) s\/step\)$/\1/p')
  awk -v s="${s:-0}" 'BEGIN { exit !(s > 0) }' && ok "$disp: $s s/step > 0" || bad "$disp: dispatch seconds '$s' not > 0"
  "$train" $std --ep 2 --moe-dispatcher $disp --format json > "$tmp/json" 2> "$tmp/err" || bad "$disp json: exit $?"
  last=$(tail -1 "$tmp/json")
  ms=$(echo "$last" | sed -n -E 's/.*"moe_dispatch_s":([0-9.e+-]+).*/\1/p')
  echo "$last" | grep -q '"moe_dispatch_share":' && ok "$disp json: moe_dispatch_share" || bad "$disp json: no moe_dispatch_share in: $last"
  awk -v s="${ms:-0}" 'BEGIN { exit !(s > 0) }' && ok "$disp json: moe_dispatch_s $ms > 0" || bad "$disp json: moe_dispatch_s '$ms' not > 0"
done
"$train" $std > "$tmp/out" 2> "$tmp/err" || bad "no --ep: exit $?"
grep -q 'moe dispatch' "$tmp/out" && bad "no --ep: a dispatch share is printed" || ok "no --ep: no dispatch share"
"$train" $std --format json > "$tmp/json" 2> "$tmp/err" || bad "no --ep json: exit $?"
tail -1 "$tmp/json" | grep -q '"moe_dispatch_s":0,' && ok "no --ep json: moe_dispatch_s 0" || bad "no --ep json: $(tail -1 "$tmp/json")"
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all ok"
