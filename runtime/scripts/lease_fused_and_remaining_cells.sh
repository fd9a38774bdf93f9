#!/bin/bash
# The second GPU lease of 2026-11-26 (issues 11 and 8): record K = 1..8 fused models (BERT b16, GPT-2 b8,
# ResNet-101 b48; traces/tools/record_fused_traces.py), then the recorded-trace validation cells the first lease
# (lease_recorded_validation.sh) had no time for, with spin kernels and the default arena.
# Usage (repository root, on the GPU box): runtime/scripts/lease_fused_and_remaining_cells.sh DIR OUT TAG DEVICE_MODEL
#   DIR as for lease_recorded_validation.sh, with rec/cells.txt holding only the cells still to run.
# Writes OUT/session.log, OUT/fused.tar.gz and OUT/measured.tar.gz (raw timings and plans; no assembled timelines).
# Ends by about 330 s: the fused recordings start only in the first 150 s, the cells only before 320 s.
source "$(dirname "$0")/lease_common.sh"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv
  stamp "fused recordings"
  PYTHONUNBUFFERED=1 timeout 200 python3 traces/tools/record_fused_traces.py --device cuda --tag "$tag" \
    --device-model "$device_model" --out-dir "$out/fused" --date "$(date -u +%F)" --warmup 1 --repeat 3 --budget-s 150
  stamp "fused exit $?"
  left=$((320 - ($(date +%s) - start)))
  stamp "validation cells, $left s left"
  MEMSIM_SWEEP_RUN_TIMEOUT=40 runtime/scripts/validation_sweep.sh "$bin" "$dir/rec" "$out" "$left"
  stamp "sweep done"
} 2>&1 | tee "$out/session.log"
mkdir -p "$out/unpacked" && tar -xzf "$out/measured.tar.gz" -C "$out/unpacked" &&
  rm -f "$out/unpacked/measured/"*.measured.json && tar -czf "$out/measured.tar.gz" -C "$out/unpacked" measured
rm -rf "$out/unpacked"
[ -d "$out/fused" ] && tar -czf "$out/fused.tar.gz" -C "$out" fused && rm -rf "$out/fused"
ls -la "$out"
