#!/bin/bash
# On a GPU box: calibrate the GPU and run the runtime's fixture plans (spin and gemm kernels) and its GPU
# tests. Needs only the carried binaries (memsim-cuda, optionally runtime_gpu_tests) and tests/runtime.
# Usage (from the repository root): runtime/scripts/gpu_smoke.sh BIN_DIR OUT_DIR [MACHINE_NAME]
# With python3 it also runs a 2000-layer pipeline (about 14k steps of 20-40 us ops, 1 MB tensors).
# Writes OUT_DIR/MACHINE_NAME.yaml (+ .calibration.json), OUT_DIR/gpu_smoke.log and OUT_DIR/runs.tar.gz
# (per plan: raw event timings, timeline, Perfetto trace; `memsim-cuda assemble` rebuilds timelines).
set -u
bin=$1
out=$2
name=${3:-gpu-calibrated}
data=tests/runtime
mkdir -p "$out/runs"
{
  nvidia-smi
  ldd "$bin/memsim-cuda"
  "$bin/memsim-cuda" calibrate --out "$out/$name.yaml" --name "$name"
  echo "calibrate exit $?"
  specs=("$data/chain chain spin" "$data/chain oom spin" "$data/pipeline pipeline spin" "$data/pipeline pipeline gemm")
  if command -v python3 >/dev/null; then
    python3 "$data/make_pipeline_fixture.py" --layers 2000 --activation-bytes 1000000 --weight-bytes 100000 \
      --forward-s 20e-6 --budget-bytes 300000000 --out "$out/large" &&
      specs+=("$out/large $out/large spin")
  fi
  for spec in "${specs[@]}"; do
    set -- $spec
    plan_name=$(basename "$2")
    echo "=== $plan_name ($3 kernels)"
    plan_file="$2.plan.json"
    [ -f "$plan_file" ] || plan_file="$data/$2.plan.json"
    "$bin/memsim-cuda" run --trace "$1.trace.json" --plan "$plan_file" --kernels "$3" \
      --warmup 2 --iterations 5 --raw-timings "$out/runs/$plan_name-$3.raw.json" \
      --timeline "$out/runs/$plan_name-$3.timeline.json" --perfetto "$out/runs/$plan_name-$3.perfetto.json"
    echo "run exit $?"
  done
  if [ -x "$bin/runtime_gpu_tests" ]; then
    MEMSIM_CUDA_EXE="$bin/memsim-cuda" MEMSIM_RUNTIME_TEST_DATA="$PWD/$data" "$bin/runtime_gpu_tests"
  fi
} 2>&1 | tee "$out/gpu_smoke.log"
tar -czf "$out/runs.tar.gz" -C "$out" runs && rm -rf "$out/runs" "$out/large.trace.json" "$out/large.plan.json"
