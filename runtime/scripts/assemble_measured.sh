#!/bin/bash
# Rebuild the measured timelines of a validation sweep from its raw timings (no GPU needed).
# Usage (from the repository root): runtime/scripts/assemble_measured.sh MEMSIM_CUDA INPUT_DIR MEASURED_DIR
# INPUT_DIR is what `memsim validate --experiment E --prepare INPUT_DIR` wrote (workloads/, plans/, cells.txt);
# MEASURED_DIR holds <cell>.<kernels>.raw.json (from validation_sweep.sh, or --raw-timings) and, where the sweep
# stored it, <cell>.plan.json (the plan that ran; else INPUT_DIR/plans/<cell>.plan.json is used). Writes
# MEASURED_DIR/<cell>.<kernels>.measured.json, the same file `memsim-cuda run --timeline` wrote on the GPU, ready
# for `memsim validate --experiment E --measurements MEASURED_DIR`.
set -u
cuda_bin=$1
input=$2
measured=$3
failed=0
count=0
while read -r cell workload kernels; do
  [ -z "$cell" ] && continue
  raw="$measured/$cell.$kernels.raw.json"
  [ -f "$raw" ] || continue
  plan="$measured/$cell.plan.json"
  [ -f "$plan" ] || plan="$input/plans/$cell.plan.json"
  if "$cuda_bin" assemble --trace "$input/workloads/$workload.trace.json" --plan "$plan" --timings "$raw" \
    --timeline "$measured/$cell.$kernels.measured.json" >/dev/null; then
    count=$((count + 1))
  else
    echo "assemble failed: $cell $kernels" >&2
    failed=1
  fi
done < "$input/cells.txt"
echo "assembled $count measured timelines in $measured"
exit $failed
