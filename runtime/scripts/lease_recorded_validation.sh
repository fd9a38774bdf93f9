#!/bin/bash
# One GPU lease, one command (issues 8 and 9): calibrate the GPU (transfers, launch, peak FLOP/s and the
# efficiency sweeps), rerun the POFO plan that failed from fragmentation under both arenas, record the shipped
# models at five fractions of their batch, run the recorded-trace validation sweep (spin kernels, default
# arena), then every planned cell once more with `--allocator pool` (arena = budget) for feasibility and peak.
# Usage (repository root, on the GPU box): runtime/scripts/lease_recorded_validation.sh DIR OUT TAG DEVICE_MODEL
#   DIR  carried folder: memsim-cuda, lib/ (its shared libraries), rec/ (`memsim validate --prepare` of
#        validation-h100-recorded.yaml), frag/ (vgg16-b32.trace.json and vgg16-b32.pofo.f0.5.plan.json of
#        validation-h100.yaml's --prepare)
#   OUT  where the results go (7 files: session.log, calibrated.yaml, calibrated.calibration.json,
#        fragmentation.tar.gz, batches.tar.gz, measured.tar.gz, pool.tar.gz)
#   TAG, DEVICE_MODEL  file tag and source.device of the recorded traces (h100 H100-80GB-SXM, h200 H200-141GB)
# Each stage has its own time cap so that the whole command ends inside 8 minutes.
source "$(dirname "$0")/lease_common.sh"
mkdir -p "$out/fragmentation" "$out/pool"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv
  uname -r
  ldd "$bin"

  stamp "calibrate"
  timeout 120 "$bin" calibrate --out "$out/calibrated.yaml" --name "$tag-calibrated"
  stamp "calibrate exit $?"

  for arena in default pool; do
    flags=()
    [ "$arena" = pool ] && flags=(--allocator pool)
    stamp "fragmentation case, arena $arena"
    timeout 60 "$bin" run --trace "$dir/frag/vgg16-b32.trace.json" --plan "$dir/frag/vgg16-b32.pofo.f0.5.plan.json" \
      --kernels spin --warmup 2 --iterations 5 "${flags[@]}" \
      --timeline "$out/fragmentation/$arena.measured.json" --raw-timings "$out/fragmentation/$arena.raw.json"
    stamp "run exit $?"
  done

  stamp "record the shipped models at 1/8, 1/4, 1/2, 3/4 and 1 of their batch"
  PYTHONUNBUFFERED=1 timeout 170 python3 traces/tools/record_shipped_traces.py --device cuda --tag "$tag" \
    --device-model "$device_model" --out-dir "$out/batches" --date "$(date -u +%F)" --warmup 2 --repeat 5 \
    --fractions 0.125,0.25,0.5,0.75,1 --budget-s 150
  stamp "record exit $?"

  stamp "validation sweep (spin, default arena)"
  MEMSIM_SWEEP_RUN_TIMEOUT=60 runtime/scripts/validation_sweep.sh "$bin" "$dir/rec" "$out" 170
  stamp "sweep done"
  # Keep the raw event timings and drop the assembled timelines (runtime/scripts/assemble_measured.sh rebuilds
  # them), so the archive stays within what a lease can send back.
  mkdir -p "$out/unpacked" && tar -xzf "$out/measured.tar.gz" -C "$out/unpacked" &&
    rm -f "$out/unpacked/measured/"*.measured.json && tar -czf "$out/measured.tar.gz" -C "$out/unpacked" measured
  rm -rf "$out/unpacked"

  stamp "every planned cell with --allocator pool (arena = budget): feasibility and peak"
  while read -r cell workload kernels; do
    [ "$kernels" = spin ] || continue
    if [ $(($(date +%s) - start)) -ge 440 ]; then
      echo "=== $cell: skipped (time)"
      continue
    fi
    echo "=== $cell pool"
    timeout 40 "$bin" run --trace "$dir/rec/workloads/$workload.trace.json" --plan "$dir/rec/plans/$cell.plan.json" \
      --kernels spin --warmup 1 --iterations 1 --allocator pool --timeline "$out/pool/$cell.pool.measured.json"
    echo "run exit $?"
  done <"$dir/rec/cells.txt"
  stamp "all done"
} 2>&1 | tee "$out/session.log"
tar -czf "$out/fragmentation.tar.gz" -C "$out" fragmentation && rm -rf "$out/fragmentation"
tar -czf "$out/pool.tar.gz" -C "$out" pool && rm -rf "$out/pool"
[ -d "$out/batches" ] && tar -czf "$out/batches.tar.gz" -C "$out" batches && rm -rf "$out/batches"
ls -la "$out"
