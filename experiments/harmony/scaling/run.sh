#!/usr/bin/env bash
# Figures 16-18 of Harmony (PVLDB 2022, §5.7): GPT-2 10-100B as the GPUs grow and the model grows to the host-memory
# limit, simulated by memsim's fast engine. Usage:
#   run.sh [PROFILE_DIR] [MEMSIM] [OUT_CSV]
# (defaults: ../shared/data/harmony-profiles, build/release/experiments/memsim, experiments/harmony/scaling/results.csv)
# Two grids, the paper's settings (run_gpt2_billions.sh: --manual_ufwd 1 --manual_ubwd 1 --manual_packsize P):
#   fig17  8x1080ti-pcie-tree (750 GiB host): gpt2_10b..40b, D = 32, U = 1, packs of 2 layers, N in {1,2,4,8};
#          harmony-pp, harmony-dp and zero-infinity (recompute packs = Harmony's backward packs).
#   fig16  dgx2 (1.5 TiB host): gpt2_40b..100b, D = 128, U = 1, packs of 6 layers (PACK16=12 for 12), N in {1..16};
#          harmony-pp and harmony-dp.
# The 20-100B profiles are built from the authors' gpt2_10b profile by gpt2_profile.py (its GPT2Layer entry
# repeated n_layer times: Harmony profiles these models from one 1-layer model too). FIGURES="fig17" or
# MODELS17="gpt2_10b" / MODELS16="gpt2_40b" / GPUS17="1 8" / GPUS16="1 16" cut the grid. A progress line per cell
# goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../common.sh"
harmony_setup "${1:-}" "${2:-}"
out=${3:-$here/results.csv}
engine=${ENGINE:-fast}
figures=${FIGURES:-fig17 fig16}
declare -A n_layer=([gpt2_10b]=50 [gpt2_20b]=100 [gpt2_30b]=150 [gpt2_40b]=200 [gpt2_60b]=300 [gpt2_80b]=400
  [gpt2_100b]=500)
declare -A machine=([fig17]=8x1080ti-pcie-tree [fig16]=dgx2)
declare -A models=([fig17]=${MODELS17:-gpt2_10b gpt2_20b gpt2_30b gpt2_40b}
  [fig16]=${MODELS16:-gpt2_40b gpt2_60b gpt2_80b gpt2_100b})
declare -A gpu_counts=([fig17]=${GPUS17:-1 2 4 8} [fig16]=${GPUS16:-1 2 4 8 16})
declare -A host_memory=([fig17]=$((750 << 30)) [fig16]=$((1536 << 30)))  # the machines' host.memory
declare -A minibatch=([fig17]=32 [fig16]=128)
declare -A pack_size=([fig17]=2 [fig16]=${PACK16:-6})
declare -A planners=([fig17]="harmony-pp harmony-dp zero-infinity" [fig16]="harmony-pp harmony-dp")
row_tool="$here/../cell_row.py"

# packs LAYERS SIZE: the backward packs of SIZE consecutive layers over LAYERS layers (the last one shorter).
packs() {
  local layers=$1 size=$2 first list=""
  for ((first = 0; first < layers; first += size)); do
    list+="${list:+,}$first-$((first + size - 1 < layers - 1 ? first + size - 1 : layers - 1))"
  done
  echo "$list"
}

# simulate_cell FIGURE MODEL PLANNER N TRACE PARAM...: plans and simulates one cell and appends its CSV row to $out.
simulate_cell() {
  local figure=$1 model=$2 planner=$3 n=$4 trace=$5 start=$SECONDS
  shift 5
  local d=${minibatch[$figure]}
  local prefix="$figure,${machine[$figure]},${host_memory[$figure]},$state_bytes,${pack_size[$figure]}"
  if ! harmony_cell_row "$trace" "${machine[$figure]}" "$model" "$planner" "" "$n" "$d" 1 1 "" "$@"; then
    echo "$prefix,$(cat "$harmony_work/row")" >>"$out"
    echo "  $figure $model N=$n $planner: plan failed ($((SECONDS - start)) s)" >&2
    return
  fi
  echo "$prefix,$(cat "$harmony_work/row")" >>"$out"
  local feasible seconds reason
  feasible=$(cut -d, -f10 "$harmony_work/row")
  seconds=$(cut -d, -f11 "$harmony_work/row")
  reason=$(cut -d, -f22 "$harmony_work/row")
  echo "  $figure $model N=$n $planner: feasible=$feasible ${seconds:+iteration ${seconds} s}${reason:+$reason}" \
    "($((SECONDS - start)) s)" >&2
}

echo "figure,machine,host_memory_bytes,model_state_bytes,pack_size,$(/usr/bin/python3 "$row_tool" --header)" >"$out"
for figure in $figures; do
  for model in ${models[$figure]}; do
    profile="$harmony_work/$model.json"
    /usr/bin/python3 "$here/gpt2_profile.py" "$harmony_profiles/gpt2_10b.json" "${n_layer[$model]}" "$model" "$profile"
    layers=$((n_layer[$model] + 4))
    # What the host holds whatever the plan: W, B, dW (and dB) and the optimizer state K of every layer.
    state_bytes=$(/usr/bin/python3 -c 'import json, sys
print(sum(2 * (l["weight_bytes"] + l["buffer_bytes"]) + l["optimizer_state_bytes"]
          for l in json.load(open(sys.argv[1]))["layers"]))' "$profile")
    trace="$harmony_work/$model.trace.json"
    "$harmony_memsim" gen layer-chain --profile "$profile" --microbatch 1 --machine "${machine[$figure]}" \
      --out "$trace" >/dev/null
    pack_bwd=$(packs "$layers" "${pack_size[$figure]}")
    pack_fwd=${pack_bwd%,*}  # the forward covers the layers before the last backward pack (it holds the loss)
    for n in ${gpu_counts[$figure]}; do
      for planner in ${planners[$figure]}; do
        case $planner in
          harmony-*) params=(--param pack_fwd="$pack_fwd" --param pack_bwd="$pack_bwd") ;;
          zero-infinity) params=(--param pack_bwd="$pack_bwd") ;;
        esac
        simulate_cell "$figure" "$model" "$planner" "$n" "$trace" "${params[@]}"
      done
    done
  done
done
echo "wrote $out" >&2
