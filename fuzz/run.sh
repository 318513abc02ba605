#!/bin/sh
# Run every libFuzzer target for SECONDS each (default 60), seeded from
# tests/data. Fails on any crash, leak, timeout or sanitizer report and keeps
# the reproducer in BUILD/fuzz/artifacts/ (re-run it with
# `BUILD/fuzz/fuzz_<target> <file>`).
# usage: fuzz/run.sh BUILD_DIR [SECONDS]   (BUILD_DIR configured with
#        CC=clang meson setup BUILD_DIR -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false)
set -u
cd "$(dirname "$0")/.."
build=$1
secs=${2:-60}
work=$build/fuzz/work
art=$build/fuzz/artifacts
rm -rf "$work"
mkdir -p "$work" "$art"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# seed TARGET FILE...: copy seed files into the target's corpus.
seed() {
  t=$1; shift
  mkdir -p "$work/$t"
  i=0
  for f in "$@"; do
    [ -f "$f" ] || continue
    i=$((i + 1))
    cp "$f" "$work/$t/seed-$i"
  done
}

seed config $(find tests/data -name '*config*.json')
seed safetensors $(find tests/data -name '*.safetensors' -size -64k)
seed safetensors_index $(find tests/data -name '*.index.json')
seed plan_json $(find tests/data/plan tests/data/plugin tests/data/families -name '*.json' -size -64k) \
  $(find tests/data/plan/bad -type f)
# hf_plan: the first byte picks the key prefix.
mkdir -p "$work/hf_plan"
for f in tests/data/plan/hf/*.json core/src/select/hf_tp_plans/*.json; do
  { printf 'm'; cat "$f"; } > "$work/hf_plan/$(basename "$f")"
done
mkdir -p "$work/placement"
n=0
for p in replicate 'shard(0)' 'shard(-1)' 'partial' 'partial(avg)' 'partial(max)' \
         'strided_shard(0,2)' ' Shard( 1 ) ' colwise rowwise colwise_rep rowwise_rep \
         local_colwise sequence_parallel gather ep_router replicated_with_grad_allreduce; do
  n=$((n + 1))
  printf '%s' "$p" > "$work/placement/seed-$n"
done

# checkpoint: the same safetensors seeds; shard_meta: "MESH\nRANK\nTENSORS"
seed checkpoint $(find tests/data -name '*.safetensors' -size -64k)
mkdir -p "$work/shard_meta"
printf '%s\n%s\n%s' '{"dims":["dp_replicate","dp_shard","tp"],"sizes":[1,3,3]}' 4 \
  '{"a.weight":{"global_shape":[7,5],"offsets":[3,0],"placements":["replicate","shard(0)","shard(0)"]}}' \
  > "$work/shard_meta/seed-1"
printf '%s\n%s\n%s' '{"dims":["dp_shard"],"sizes":[3]}' 0 \
  '{"e.gate_up_proj":{"global_shape":[4,40,48],"offsets":[0,0,0],"placements":["shard(0)"],"fold":[{"name":"e.0.gate_proj.weight","offsets":[0,0,0],"shape":[20,48]},{"name":"e.0.up_proj.weight","offsets":[0,20,0],"shape":[20,48]}]}}' \
  > "$work/shard_meta/seed-2"

status=0
# checkpoint_index: the index seeds; merge and writer decode any bytes
seed checkpoint_index $(find tests/data -name '*.index.json')
mkdir -p "$work/merge" "$work/writer"
printf '\001\002\001\002\010\006\001\002\010\011\012\013\014\015\016\017' \
  > "$work/merge/seed-1"
printf '\003\001\001\002\004\003\002\002\005\000\001\001\002\001' \
  > "$work/writer/seed-1"

# moe: any bytes decode (router options, logits, dispatch perturbations)
mkdir -p "$work/moe"
printf '\010\002\000\001\000\000\000\004\000' > "$work/moe/seed-1"
printf '\010\003\001\001\002\001\377\003\001\000\177\200\000\000' > "$work/moe/seed-2"

for t in config safetensors safetensors_index plan_json hf_plan placement \
         checkpoint shard_meta checkpoint_index merge writer moe; do
  bin=$build/fuzz/fuzz_$t
  if [ ! -x "$bin" ]; then
    echo "FAIL fuzz_$t: $bin not built"
    status=1
    continue
  fi
  log=$build/fuzz/fuzz_$t.log
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$art/$t-" "$work/$t" > "$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  if [ $rc -eq 0 ]; then
    echo "PASS fuzz_$t: ${runs:-?} runs in ${secs}s"
  else
    echo "FAIL fuzz_$t (exit $rc): reproducer in $art/, log $log"
    tail -40 "$log"
    status=1
  fi
done
exit $status
