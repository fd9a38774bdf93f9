#!/bin/bash
# The GPU leases of 2026-11-26 afternoon (issue 11): the vmap-fused recordings the morning lease could not make.
#   1. BERT b16 and GPT-2 b8 at K = 1..8 (attention through the math SDPA backend under vmap), and K = 1 through
#      vmap: the baseline that separates vmap's own cost from fusing K models;
#   1b. (MODELS=all) ResNet-101 b48 at K = 1, plain and through vmap (K = 2..8 come from the morning lease; K = 1
#      again shows the lease-to-lease spread);
#   2. with the time left, μ-TWO Table 1's second batch sizes (BERT 24, GPT-2 16, and with MODELS=all ResNet-101 64).
# The first afternoon lease ran MODELS=all before memsim_export's flat_linear(); the second MODELS=transformers.
# Usage (repository root, on the GPU box): runtime/scripts/lease_fused_transformers.sh OUT TAG DEVICE_MODEL MODELS
# Writes OUT/session.log and OUT/fused.tar.gz. Phase 1 starts recordings in its first 200 s, phase 2 only before
# 330 s; each phase is killed at its end, so the lease ends by about 380 s.
set -u
out=$1
tag=$2
device_model=$3
models=$4
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
record() { # seconds-to-kill recording-budget-s args...
  local kill_after=$1 budget=$2
  shift 2
  PYTHONUNBUFFERED=1 timeout "$kill_after" python3 traces/tools/record_fused_traces.py --device cuda --tag "$tag" \
    --device-model "$device_model" --out-dir "$out/fused" --date "$(date -u +%F)" --warmup 1 --repeat 3 \
    --budget-s "$budget" "$@"
  stamp "exit $?"
}
second=bert,gpt
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv
  stamp "phase 1: bert and gpt, first batch, K = 1..8, and K = 1 through vmap"
  record 260 200 --only bert,gpt --batches first --vmap-k1 --models-list 1,2,3,4,5,6,7,8
  if [ "$models" = all ]; then
    second=bert,gpt,resnet101
    stamp "phase 1b: resnet101 b48 K = 1, plain and through vmap"
    record 60 30 --only resnet101 --batches first --vmap-k1 --models-list 1
  fi
  left=$((330 - ($(date +%s) - start)))
  if [ "$left" -gt 20 ]; then
    stamp "phase 2: second batches of $second, $left s left"
    record $((left + 50)) "$left" --only "$second" --batches second --models-list 1,2,3,4,5,6,7,8
  fi
} 2>&1 | tee "$out/session.log"
[ -d "$out/fused" ] && tar -czf "$out/fused.tar.gz" -C "$out" fused && rm -rf "$out/fused"
ls -la "$out"
