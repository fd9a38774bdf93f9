#!/usr/bin/env bash
# Harmony's committed estimates (D=32, N=2) recomputed by `memsim harmony estimate` from the converted profiles.
# Usage: reproduce.sh [PROFILE_DIR] [MEMSIM]   (PROFILE_DIR holds bert_96.json, gpt2_xl.json, vgg416.json; defaults in
# ../common.sh)
# Prints the README's markdown table. The configurations are the Top-1 ones in msr-fiddle/harmony
# results/<model>/sched/D32_<mode>_N2_Summary.txt (commit 5fd838f), found by the paper's packing flags.
set -euo pipefail
source "$(dirname "$0")/../common.sh"
harmony_setup "${1:-}" "${2:-}"
profiles=$harmony_profiles
memsim=$harmony_memsim

bert_bwd=0-9,10-19,20-28,29-38,39-47,48-57,58-67,68-76,77-86,87-99
vgg_fwd=0-50,51-110,111-184,185-262,263-353
vgg_bwd=0-14,15-30,31-45,46-61,62-76,77-98,99-122,123-146,147-171,172-199,200-228,229-256,257-284,285-312,313-353,354-416
# model mode committed_s committed_MB u_fwd u_bwd packs_fwd packs_bwd
runs=(
  "bert_96 pp 17.874 10185 8 8 0-9,10-19,20-28,29-38,39-47,48-57,58-67,68-76,77-86 $bert_bwd"
  "bert_96 dp 19.421 10185 8 8 0-21,22-42,43-64,65-86 $bert_bwd"
  "gpt2_xl pp 42.298 10172 2 1 0-9,10-18,19-27,28-37 0-12,13-24,25-37,38-51"
  "gpt2_xl dp 43.927 9759 2 2 0-10,11-21,22-32,33-43 0-6,7-12,13-18,19-24,25-31,32-37,38-43,44-51"
  "vgg416 pp 10.590 10437 8 8 $vgg_fwd $vgg_bwd"
  "vgg416 dp 11.878 10437 8 8 $vgg_fwd $vgg_bwd"
)
echo "| model | mode | U_F/\|P_F\|/U_B/\|P_B\| | Harmony committed (s) | memsim port (s) | memsim, full precision | Harmony memory (MiB) | memsim memory (MiB) |"
echo "|---|---|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  read -r model mode committed committed_mb u_fwd u_bwd packs_fwd packs_bwd <<<"$run"
  out=$("$memsim" harmony estimate --profile "$profiles/$model.json" --gpus 2 --minibatch 32 --mode "$mode" \
    --u-fwd "$u_fwd" --u-bwd "$u_bwd" --packs-fwd "$packs_fwd" --packs-bwd "$packs_bwd")
  full=$(sed -n 's/^iteration_s //p' <<<"$out")
  memory=$(sed -n 's/^memory_mib \([0-9]*\) .*/\1/p' <<<"$out")
  nf=$(tr ',' '\n' <<<"$packs_fwd" | wc -l)
  nb=$(tr ',' '\n' <<<"$packs_bwd" | wc -l)
  printf '| %s | %s | %s/%s/%s/%s | %s | %.3f | %s | %s | %s |\n' "$model" "$mode" "$u_fwd" "$nf" "$u_bwd" "$nb" \
    "$committed" "$full" "$full" "$committed_mb" "$memory"
done
