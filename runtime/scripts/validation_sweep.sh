#!/bin/bash
# On a GPU box: run every prepared validation cell with memsim-cuda and pack the measured timelines.
# Usage (from the repository root): runtime/scripts/validation_sweep.sh MEMSIM_CUDA INPUT_DIR OUT_DIR [SECONDS]
# INPUT_DIR is what `memsim validate --experiment E --prepare INPUT_DIR` wrote: workloads/<w>.trace.json,
# plans/<cell>.plan.json and cells.txt (one "cell workload kernels" per line, spin cells first). Cells start
# only while less than SECONDS (default 420) have passed, so the sweep ends inside a device lease; each run is
# stopped after MEMSIM_SWEEP_RUN_TIMEOUT seconds (default 120; exit 124 in sweep.log).
# Writes OUT_DIR/measured.tar.gz holding measured/<cell>.<kernels>.measured.json (+ .raw.json, the plan that
# ran, and sweep.log), ready for `memsim validate --experiment E --measurements <unpacked>/measured`.
set -u
cuda_bin=$1
input=$2
out=$3
seconds=${4:-420}
# One hung run must not eat the whole lease: each run gets at most this long (seconds).
per_run=${MEMSIM_SWEEP_RUN_TIMEOUT:-120}
mkdir -p "$out/measured"
start=$(date +%s)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  while read -r cell workload kernels; do
    [ -z "$cell" ] && continue
    if [ $(( $(date +%s) - start )) -ge "$seconds" ]; then
      echo "=== $cell $kernels: skipped (time budget of ${seconds}s spent)"
      continue
    fi
    echo "=== $cell $kernels"
    cp "$input/plans/$cell.plan.json" "$out/measured/$cell.plan.json"
    timeout "$per_run" "$cuda_bin" run --trace "$input/workloads/$workload.trace.json" --plan "$input/plans/$cell.plan.json" \
      --kernels "$kernels" --warmup 2 --iterations 5 \
      --timeline "$out/measured/$cell.$kernels.measured.json" --raw-timings "$out/measured/$cell.$kernels.raw.json"
    echo "run exit $? after $(( $(date +%s) - start ))s"
  done < "$input/cells.txt"
} 2>&1 | tee "$out/measured/sweep.log"
tar -czf "$out/measured.tar.gz" -C "$out" measured && rm -rf "$out/measured"
