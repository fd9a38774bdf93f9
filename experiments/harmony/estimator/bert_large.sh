#!/usr/bin/env bash
# BERT-Large (D=32, N=2, 10 GiB cap) searched with the authors' default packing methods (`authors`: forward
# greedy_reverse_addx, balanced_addx, reuse, balanced_time; backward greedy_reverse_addx, balanced_addx,
# balanced_time), against their committed results/bert_large/sched/D32_{vDP,vPP}_N2_Summary.txt (commit 5fd838f), and
# the same search with the paper's methods (balanced_time, reuse / balanced_time) beside it.
# Usage: bert_large.sh [PROFILE_DIR] [MEMSIM] (defaults in ../common.sh). Prints the README's table; search times go
# to the last column (wall clock of this machine, not deterministic).
set -euo pipefail
source "$(dirname "$0")/../common.sh"
harmony_setup "${1:-}" "${2:-}"
gib10=10737418240
# mode committed Top-1 (U_F/|P_F|/U_B/|P_B|, fwd/bwd method) and seconds; packs_fwd packs_bwd as committed
runs=(
  "dp 16/1/4/2 greedy_reverse_addx/greedy_reverse_addx 4.608 0-5 0-5,6-27"
  "pp 8/1/8/3 greedy_reverse_addx/greedy_reverse_addx 4.399 0-14 0-4,5-14,15-27"
)
echo "| mode | packing | Harmony's Top-1 | its methods | its estimate (s) | memsim Top-1 | memsim methods | memsim estimate (s) | same packs | candidates | search time (s) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  read -r mode expected methods seconds packs_fwd packs_bwd <<<"$run"
  for packing in authors paper; do
    harmony_search bert_large "$mode" 2 32 "$gib10" "$packing" "$packing"
    found="$search_u_fwd/$(harmony_pack_count "$search_packs_fwd")/$search_u_bwd/$(harmony_pack_count "$search_packs_bwd")"
    same=no
    [ "$search_packs_fwd|$search_packs_bwd" = "$packs_fwd|$packs_bwd" ] && same=yes
    printf '| %s | %s | %s | %s | %s | %s | %s | %.3f | %s | %s | %s |\n' "$mode" "$packing" "$expected" "$methods" \
      "$seconds" "$found" "$search_methods" "$search_estimate" "$same" "$search_count" "$search_time_s"
  done
done
