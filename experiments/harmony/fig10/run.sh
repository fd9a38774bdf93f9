#!/usr/bin/env bash
# Figures 10/11 of Harmony (PVLDB 2022): throughput and swap volume of Harmony PP / DP and the per-GPU-swap
# baselines (DP Swap, GP Swap, 2BW Swap, each with and without recompute) on 4 GPUs at the paper's minibatches,
# simulated by memsim's fast engine. Usage:
#   run.sh [PROFILE_DIR] [MEMSIM] [MACHINE] [OUT_CSV]
# (defaults: ../shared/data/harmony-profiles, build/release/experiments/memsim, 4x1080ti-pcie-1switch,
# experiments/harmony/fig10/results.csv). MODELS="bert_96 vgg416" and MINIBATCHES="16 64" cut the grid (the
# baselines' u cap comes from the searches of the D run); ENGINE=simgrid simulates with SimGrid instead of fast.
# Per cell (README.md "Method"): Harmony's search picks <U_F, P_F, U_B, P_B> (memory cap as Table 1's scripts), the
# plan runs it on a trace at u = U_B (U_F != U_B: the forward chain at U_F comes from the profile); each baseline runs at the largest power-of-two u that divides D / N (dp-swap: its
# samples per GPU; the pipelines: at least N microbatches), is at most the largest microbatch Harmony's searches pick for the model (over both modes and every D), and
# simulates feasible. A progress line per simulated cell goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../common.sh"
harmony_setup "${1:-}" "${2:-}"
machine=${3:-4x1080ti-pcie-1switch}
out=${4:-$here/results.csv}
gpus=4
engine=${ENGINE:-fast}
models=${MODELS:-bert_96 gpt2_xl vgg416 bert_large gpt2_10b}
minibatches=${MINIBATCHES:-16 64 256}
declare -A memory_cap=([bert_96]=9e9 [gpt2_xl]=9e9 [bert_large]=9e9 [gpt2_10b]=9e9 [vgg416]=10737418240)
row_tool="$here/../cell_row.py"

# simulate_cell MODEL PLANNER RECOMPUTE D U_FWD U_BWD SEARCH_ESTIMATE PARAM...: plans and simulates one cell at
# u = U_BWD and appends its CSV row to $harmony_work/row. Returns 1 when the plan does not simulate feasible.
simulate_cell() {
  local model=$1 planner=$2 recompute=$3 d=$4 u_fwd=$5 u_bwd=$6 search_estimate=$7
  shift 7
  local trace start=$SECONDS
  trace=$(harmony_layer_chain "$model" "$u_bwd" "$machine")
  if ! harmony_cell_row "$trace" "$machine" "$model" "$planner" "$recompute" "$gpus" "$d" "$u_fwd" "$u_bwd" \
    "$search_estimate" "$@"; then
    echo "  $model D=$d $planner recompute=$recompute u=$u_bwd: plan failed" >&2
    return 1
  fi
  local feasible seconds
  feasible=$(cut -d, -f10 "$harmony_work/row")
  seconds=$(cut -d, -f11 "$harmony_work/row")
  echo "  $model D=$d $planner recompute=$recompute u=$u_bwd: feasible=$feasible ${seconds:+iteration ${seconds} s}" \
    "($((SECONDS - start)) s)" >&2
  [ "$feasible" = true ]
}

/usr/bin/python3 "$row_tool" --header >"$out"
for model in $models; do
  cap=${memory_cap[$model]}
  largest_u=1
  for d in $minibatches; do
    for mode in pp dp; do
      harmony_search "$model" "$mode" "$gpus" "$d" "$cap"
      for u in "$search_u_fwd" "$search_u_bwd"; do [ "$u" -gt "$largest_u" ] && largest_u=$u; done
    done
  done
  for d in $minibatches; do
    for mode in pp dp; do
      harmony_search "$model" "$mode" "$gpus" "$d" "$cap"
      simulate_cell "$model" "harmony-$mode" "" "$d" "$search_u_fwd" "$search_u_bwd" "$search_estimate" \
        "${search_params[@]}" || true
      cat "$harmony_work/row" >>"$out"
    done
    for planner in dp-swap gpipe-swap pipedream2bw-swap; do
      for recompute in false true; do
        # dp-swap runs D / N samples per GPU; the pipelines need at least N microbatches to fill (one microbatch
        # would run the N stages one after another), so u <= D / N there too.
        samples=$((d / gpus))
        u=1
        while [ $((u * 2)) -le "$largest_u" ]; do u=$((u * 2)); done
        while [ "$u" -ge 1 ]; do
          if [ $((samples % u)) -eq 0 ]; then
            simulate_cell "$model" "$planner" "$recompute" "$d" "$u" "$u" "" --param recompute="$recompute" && break
            # GPipe's flush keeps every microbatch's activations until the backward: the host must hold all D
            # samples' worth whatever u, so a smaller u cannot make it fit.
            [ "$planner/$recompute" = gpipe-swap/false ] && grep -q ',host_out_of_memory$' "$harmony_work/row" && break
          fi
          u=$((u / 2))
        done
        cat "$harmony_work/row" >>"$out"
      done
    done
  done
done
echo "wrote $out" >&2
