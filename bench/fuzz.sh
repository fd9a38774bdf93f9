#!/usr/bin/env bash
# Builds the libFuzzer harnesses (the `fuzz` preset: clang-14, ASan+UBSan) and runs each for SECONDS (default 60),
# one after the other, starting from the committed seeds in fuzz/corpus/<harness>/. Inputs the fuzzer finds
# interesting go to build/fuzz/corpus/<harness>/ (not the repository); a crash, a leak-free abort on an internal
# error, a hang (-timeout) or memory beyond -rss_limit_mb leaves its input in build/fuzz/findings/<harness>/.
#   bench/fuzz.sh [SECONDS] [HARNESS...]      e.g. bench/fuzz.sh 600 trace plan
# Prints one line per harness (runs, seconds, findings); exits 1 when any harness found something.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(trace plan machine experiment import-dtr import-checkmate import-pytorch-eg layer-profile simulate)

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target "${harnesses[@]/#/fuzz-}"

status=0
for harness in "${harnesses[@]}"; do
  corpus=build/fuzz/corpus/$harness
  findings=build/fuzz/findings/$harness
  mkdir -p "$corpus" "$findings"
  log=build/fuzz/$harness.log
  start=$(date +%s)
  set +e
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    "build/fuzz/fuzz/fuzz-$harness" "$corpus" "fuzz/corpus/$harness" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" \
    >"$log" 2>&1
  code=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  found=$(find "$findings" -type f | wc -l)
  echo "fuzz-$harness: ${elapsed}s, $runs runs, exit $code, $found finding(s) in $findings (log: $log)"
  if [ "$code" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
  fi
done
exit $status
