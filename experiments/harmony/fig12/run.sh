#!/usr/bin/env bash
# Figure 12 of Harmony (PVLDB 2022): Harmony DP and PP against ZeRO-Infinity on GPT2 (1.5B, the gpt2_xl profile),
# 4 GPUs, D = 16, 64, 256 (spec §3.1), throughput and host<->GPU swap volume, simulated by memsim's fast engine.
# Usage:
#   run.sh [PROFILE_DIR] [MEMSIM] [MACHINE] [OUT_CSV]
# (defaults: ../shared/data/harmony-profiles, build/release/experiments/memsim, 4x1080ti-pcie-1switch,
# experiments/harmony/fig12/results.csv). MINIBATCHES="16 64" cuts the grid; ENGINE=simgrid simulates with SimGrid.
# Per D: Harmony's search picks <U_F, P_F, U_B, P_B> per mode (memory cap 9e9 as fig10); the Harmony plan runs it at
# u = U_B. ZeRO-Infinity gets "the same configuration as Harmony" (paper §5.3: minibatch, microbatch, recompute
# packs) -- once Harmony DP's and once Harmony PP's (the paper does not say which). ZeRO-Offload (cited only in the
# paper) runs the same two configurations; where Harmony's packs do not fit beside its replicated W it also runs
# with per-layer recompute (config_from = per-layer). The first two columns name the system and whose configuration
# it ran; the rest are cell_row.py's. A progress line per simulated cell goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../common.sh"
harmony_setup "${1:-}" "${2:-}"
machine=${3:-4x1080ti-pcie-1switch}
out=${4:-$here/results.csv}
model=gpt2_xl
gpus=4
cap=9e9
engine=${ENGINE:-fast}
minibatches=${MINIBATCHES:-16 64 256}
row_tool="$here/../cell_row.py"

# simulate_cell SYSTEM CONFIG_FROM PLANNER D U_FWD U_BWD SEARCH_ESTIMATE PARAM...: plans and simulates one cell at
# u = U_BWD and appends its CSV row to $out. Returns 1 when it is not feasible.
simulate_cell() {
  local system=$1 config_from=$2 planner=$3 d=$4 u_fwd=$5 u_bwd=$6 search_estimate=$7
  shift 7
  local trace start=$SECONDS row
  trace=$(harmony_layer_chain "$model" "$u_bwd" "$machine")
  if ! harmony_cell_row "$trace" "$machine" "$model" "$planner" "" "$gpus" "$d" "$u_fwd" "$u_bwd" "$search_estimate" \
    "$@"; then
    echo "$system,$config_from,$(cat "$harmony_work/row")" >>"$out"
    echo "  D=$d $system ($config_from config) u=$u_bwd: plan failed" >&2
    return 1
  fi
  row=$(cat "$harmony_work/row")
  echo "$system,$config_from,$row" >>"$out"
  local feasible seconds
  feasible=$(cut -d, -f10 <<<"$row")
  seconds=$(cut -d, -f11 <<<"$row")
  echo "  D=$d $system ($config_from config) u=$u_bwd: feasible=$feasible ${seconds:+iteration ${seconds} s}" \
    "($((SECONDS - start)) s)" >&2
  [ "$feasible" = true ]
}

echo "system,config_from,$(/usr/bin/python3 "$row_tool" --header)" >"$out"
for d in $minibatches; do
  declare -A u_of=() packs_of=()
  for mode in dp pp; do
    harmony_search "$model" "$mode" "$gpus" "$d" "$cap"
    simulate_cell "harmony-$mode" "harmony-$mode" "harmony-$mode" "$d" "$search_u_fwd" "$search_u_bwd" \
      "$search_estimate" "${search_params[@]}" || true
    u_of[$mode]=$search_u_bwd
    packs_of[$mode]=$search_packs_bwd
  done
  for mode in dp pp; do
    u=${u_of[$mode]}
    simulate_cell zero-infinity "harmony-$mode" zero-infinity "$d" "$u" "$u" "" \
      --param pack_bwd="${packs_of[$mode]}" || true
    simulate_cell zero-offload "harmony-$mode" zero-offload "$d" "$u" "$u" "" \
      --param pack_bwd="${packs_of[$mode]}" ||
      simulate_cell zero-offload per-layer zero-offload "$d" "$u" "$u" "" || true
  done
done
echo "wrote $out" >&2
