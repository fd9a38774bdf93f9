#!/usr/bin/env bash
# Harmony's configuration search (`memsim harmony search`, flags of the paper's scripts: forward packing
# balanced_time + reuse, backward balanced_time, Top-1, fit ranked normally) on the converted profiles.
# Usage: search.sh [PROFILE_DIR] [MEMSIM] (defaults in ../common.sh). Prints the README's search table; search times go to the last column
# (wall clock of this machine, not deterministic).
set -euo pipefail
source "$(dirname "$0")/../common.sh"
harmony_setup "${1:-}" "${2:-}"
gib10=10737418240
# model mode N D memory_cap expected(U_F/|P_F|/U_B/|P_B| and seconds, from the authors' results)
runs=(
  "bert_96 pp 2 32 $gib10 8/9/8/10 17.874"
  "bert_96 dp 2 32 $gib10 8/4/8/10 19.421"
  "gpt2_xl pp 2 32 $gib10 2/4/1/4 42.298"
  "gpt2_xl dp 2 32 $gib10 2/4/2/8 43.927"
  "vgg416 pp 2 32 $gib10 8/5/8/16 10.590"
  "vgg416 dp 2 32 $gib10 8/5/8/16 11.878"
  "bert_96 pp 4 64 9e9 16/24/16/25 -"
  "gpt2_xl pp 4 64 9e9 4/10/4/17 -"
  "vgg416 pp 4 64 $gib10 8/15/8/16 -"
)
echo "| model | mode | N | D | memory_cap (B) | Harmony's Top-1 | its estimate (s) | memsim search Top-1 | memsim estimate (s) | candidates | search time (s) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  read -r model mode n d cap expected seconds <<<"$run"
  harmony_search "$model" "$mode" "$n" "$d" "$cap"
  found="$search_u_fwd/$(harmony_pack_count "$search_packs_fwd")/$search_u_bwd/$(harmony_pack_count "$search_packs_bwd")"
  count=$search_count
  estimate=$search_estimate
  time_s=$search_time_s
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %.3f | %s | %s |\n' "$model" "$mode" "$n" "$d" "$cap" "$expected" \
    "$seconds" "$found" "$estimate" "$count" "$time_s"
done
