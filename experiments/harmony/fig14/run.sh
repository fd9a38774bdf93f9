#!/usr/bin/env bash
# Figure 14 of Harmony (PVLDB 2022): slowdown of Harmony DP and PP on GPT2 (the gpt2_xl profile), 4 GPUs, when one
# optimization is turned off, simulated by memsim's fast engine. Usage:
#   run.sh [PROFILE_DIR] [MEMSIM] [MACHINE] [OUT_CSV]
# (defaults: ../shared/data/harmony-profiles, build/release/experiments/memsim, 4x1080ti-pcie-1switch,
# experiments/harmony/fig14/results.csv). The paper does not give Fig. 14's minibatch: MINIBATCHES (default
# "16 64 256", Fig. 10/12's) picks them; MANUAL_U / MANUAL_K cut the expert grid; ENGINE=simgrid uses SimGrid.
# Per (D, mode), the columns ablation and setting name the run:
#   all-on          Harmony's search config (memory cap 9e9, as fig10), every optimization on
#   no-grouping     group=false: W swapped in again for every microbatch (spec: group size 1)
#   no-prefetch     prefetch=false: a task's W loaded after the previous task's frees, one input at a time
#   no-jit          jit_update=false: CPU updates after the whole backward
#   no-opt-offload  optimizer_offload=false: the update on the GPU after each backward task
#   no-p2p          p2p=false: boundary tensors through host memory
#   equi-fb         P_F = P_B[:-1] at U_F = U_B (§4.3.1's Equi-FB), the search's P_B
#   manual          no configuration search: manual_pack(R, k) (constant k layers per pack from the end, the first
#                   pack short, P_F = P_B[:-1]) at U_F = U_B = u, for each u in MANUAL_U and k in MANUAL_K
#                   (setting u<u>-k<k>); the paper's single "expert" pick is not given, so the grid brackets it
# The rest of a row is cell_row.py's. A progress line per simulated cell goes to stderr.
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
manual_u=${MANUAL_U:-1 2 4 8}
manual_k=${MANUAL_K:-2 3 4 6 8 12}
row_tool="$here/../cell_row.py"

# simulate_cell ABLATION SETTING PLANNER D U SEARCH_ESTIMATE PARAM...: plans and simulates one cell at microbatch U
# and appends its CSV row to $out.
simulate_cell() {
  local ablation=$1 setting=$2 planner=$3 d=$4 u=$5 search_estimate=$6
  shift 6
  local trace start=$SECONDS row
  trace=$(harmony_layer_chain "$model" "$u" "$machine")
  if ! harmony_cell_row "$trace" "$machine" "$model" "$planner" "" "$gpus" "$d" "$u" "$u" "$search_estimate" "$@"; then
    echo "$ablation,$setting,$(cat "$harmony_work/row")" >>"$out"
    echo "  D=$d $planner $ablation $setting u=$u: plan failed" >&2
    return 0
  fi
  row=$(cat "$harmony_work/row")
  echo "$ablation,$setting,$row" >>"$out"
  local seconds
  seconds=$(cut -d, -f11 <<<"$row")
  echo "  D=$d $planner $ablation $setting u=$u: feasible=$(cut -d, -f10 <<<"$row")" \
    "${seconds:+iteration ${seconds} s} ($((SECONDS - start)) s)" >&2
}

# manual_packs LAYERS K: Harmony's manual_pack: packs of K layers counted from the last layer, the first one short.
manual_packs() {
  local layers=$1 k=$2 end packs=""
  for ((end = layers - 1; end >= 0; end -= k)); do
    local first=$((end - k + 1))
    [ "$first" -ge 0 ] || first=0
    packs="$first-$end${packs:+,$packs}"
  done
  echo "$packs"
}

# all_but_last PACKS: the list without its last pack (P_F = P_B[:-1]).
all_but_last() { echo "${1%,*}"; }

echo "ablation,setting,$(/usr/bin/python3 "$row_tool" --header)" >"$out"
for d in $minibatches; do
  for mode in dp pp; do
    planner=harmony-$mode
    harmony_search "$model" "$mode" "$gpus" "$d" "$cap"
    u=$search_u_bwd
    config=("${search_params[@]}")
    simulate_cell all-on search "$planner" "$d" "$u" "$search_estimate" "${config[@]}"
    simulate_cell no-grouping group=false "$planner" "$d" "$u" "" "${config[@]}" --param group=false
    simulate_cell no-prefetch prefetch=false "$planner" "$d" "$u" "" "${config[@]}" --param prefetch=false
    simulate_cell no-jit jit_update=false "$planner" "$d" "$u" "" "${config[@]}" --param jit_update=false
    simulate_cell no-opt-offload optimizer_offload=false "$planner" "$d" "$u" "" "${config[@]}" \
      --param optimizer_offload=false
    simulate_cell no-p2p p2p=false "$planner" "$d" "$u" "" "${config[@]}" --param p2p=false
    simulate_cell equi-fb "P_F=P_B[:-1]" "$planner" "$d" "$u" "" \
      --param pack_fwd="$(all_but_last "$search_packs_bwd")" --param pack_bwd="$search_packs_bwd"
    layers=$((${search_packs_bwd##*-} + 1))
    for mu in $manual_u; do
      # DP splits D over the N GPUs first; either mode needs whole microbatches.
      samples=$d
      [ "$mode" = dp ] && samples=$((d / gpus))
      [ $((samples % mu)) -eq 0 ] || continue
      for k in $manual_k; do
        packs=$(manual_packs "$layers" "$k")
        simulate_cell manual "u$mu-k$k" "$planner" "$d" "$mu" "" --param pack_fwd="$(all_but_last "$packs")" \
          --param pack_bwd="$packs"
      done
    done
  done
done
echo "wrote $out" >&2
