#!/usr/bin/env bash
# Layer profiles of memsim's recorded H200 models (traces/data/batches-h200) and Harmony's search on them for four
# GPUs, in two settings (README.md). Usage: run.sh [MEMSIM] [OUT]  (defaults: build/release/experiments/memsim,
# experiments/harmony/memsim-models). Writes OUT/<model>.layers.json and prints the Top-1 of each search.
set -euo pipefail
cd "$(dirname "$0")/../../.."
memsim=${1:-build/release/experiments/memsim}
out=${2:-experiments/harmony/memsim-models}
data=traces/data/batches-h200
# Host memory bandwidth of the update roofline: AdamW's ops touch 21 bytes per weight byte in these traces; 43.8 GB/s
# makes that Harmony's own measured CPU update of a BertLayer (bert_96 profile: 0.02416 s for 50.38 MB of weights).
host_bandwidth=43.8e9
declare -A batches=([bert]="6 12 24 36 48" [gpt]="2 5 10 15 20" [resnet50]="48 96 192 288 384")
for model in bert gpt resnet50; do
  traces=()
  for batch in ${batches[$model]}; do traces+=(--trace "$data/$model-b$batch-h200.trace.json.gz"); done
  "$memsim" harmony profile "${traces[@]}" --model "$model" --machine 4x1080ti-pcie-tree \
    --host-memory-bandwidth "$host_bandwidth" -o "$out/$model.layers.json"
done
# D = 4 x the largest recorded batch (one recorded batch per GPU).
declare -A minibatch=([bert]=192 [gpt]=80 [resnet50]=1536)
for model in bert gpt resnet50; do
  for mode in pp dp; do
    echo "== $model $mode, Harmony's 4x1080ti server (its sched_args defaults, 10 GiB cap)"
    "$memsim" harmony search --profile "$out/$model.layers.json" --gpus 4 --minibatch "${minibatch[$model]}" \
      --mode "$mode" 2>&1
    echo "== $model $mode, 4x H200 on PCIe 5.0 (bw_swap 4 x 50 GB/s, p2p 50 GB/s, 130 GiB cap)"
    "$memsim" harmony search --profile "$out/$model.layers.json" --gpus 4 --minibatch "${minibatch[$model]}" \
      --mode "$mode" --bw-swap 200e9 --bw-p2p 50e9 --memory-cap 139586437120 2>&1
  done
done
