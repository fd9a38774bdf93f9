# Shared preamble of the experiments/harmony scripts (sourced, not run).
# Harmony's per-layer profiles (the authors' GTX 1080 Ti profiles, converted) are not in users' clones: scripts take
# their directory as an argument, by default ../shared/data/harmony-profiles beside the repository.
# harmony_setup PROFILE_DIR MEMSIM sets:
#   harmony_root      the repository root
#   harmony_profiles  the profile directory (checked: it must hold bert_96.json)
#   harmony_memsim    the memsim binary (default: build/release/experiments/memsim of this checkout, else memsim on PATH)
#   harmony_work      a temporary directory removed on exit
harmony_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

harmony_setup() {
  local profiles=${1:-} memsim=${2:-}
  [ -n "$profiles" ] || profiles="$harmony_root/../shared/data/harmony-profiles"
  if [ ! -f "$profiles/bert_96.json" ]; then
    echo "error: no Harmony profiles in '$profiles' (expected bert_96.json there); pass the directory of the" \
      "converted profiles (shared/data/harmony-profiles) as the first argument" >&2
    exit 2
  fi
  harmony_profiles=$(cd "$profiles" && pwd)
  if [ -z "$memsim" ]; then
    memsim="$harmony_root/build/release/experiments/memsim"
    [ -x "$memsim" ] || memsim=memsim
  fi
  harmony_memsim=$memsim
  harmony_work=$(mktemp -d)
  trap 'rm -rf "$harmony_work"' EXIT
}

# harmony_layer_chain MODEL U MACHINE: prints the path of the layer-chain trace of MODEL's profile at microbatch U,
# generated once per (model, u) in the work directory.
harmony_layer_chain() {
  local model=$1 u=$2 machine=$3
  local trace="$harmony_work/$model-u$u.trace.json"
  [ -f "$trace" ] || "$harmony_memsim" gen layer-chain --profile "$harmony_profiles/$model.json" --microbatch "$u" \
    --machine "$machine" --out "$trace" >/dev/null
  echo "$trace"
}

# harmony_search MODEL MODE N D CAP [PACKING_FWD PACKING_BWD]: runs Harmony's configuration search (packing methods:
# the paper's unless given, e.g. `authors authors`) and sets search_u_fwd, search_u_bwd, search_methods (fwd/bwd of
# the Top-1), search_packs_fwd, search_packs_bwd, search_estimate (seconds, full precision), search_count and
# search_time_s, and
# search_params: the planner params of the Top-1 on a trace at u = U_B (U_F != U_B adds u_fwd, u_bwd and the profile
# the forward chain at U_F is built from).
harmony_search() {
  local model=$1 mode=$2 n=$3 d=$4 cap=$5 packing_fwd=${6:-paper} packing_bwd=${7:-paper} out
  out=$("$harmony_memsim" harmony search --profile "$harmony_profiles/$model.json" --gpus "$n" --minibatch "$d" \
    --mode "$mode" --memory-cap "$cap" --packing-fwd "$packing_fwd" --packing-bwd "$packing_bwd" \
    2>"$harmony_work/search.err")
  search_time_s=$(sed -n 's/^search time \([0-9.]*\) s$/\1/p' "$harmony_work/search.err")
  search_u_fwd=$(sed -n '1s/.* u_fwd=\([0-9]*\) .*/\1/p' <<<"$out")
  search_u_bwd=$(sed -n '1s/.* u_bwd=\([0-9]*\) .*/\1/p' <<<"$out")
  search_count=$(sed -n '1s/.*best of \([0-9]*\) configurations.*/\1/p' <<<"$out")
  search_methods=$(sed -n '1s/.* |P_F|=[0-9]* (\([a-z_]*\)) .* |P_B|=[0-9]* (\([a-z_]*\))$/\1\/\2/p' <<<"$out")
  search_estimate=$(sed -n 's/^iteration_s //p' <<<"$out")
  search_packs_fwd=$(sed -n 's/^packs_fwd *//p' <<<"$out")
  search_packs_bwd=$(sed -n 's/^packs_bwd *//p' <<<"$out")
  search_memory_mib=$(sed -n 's/^memory_mib //p' <<<"$out")
  search_params=(--param pack_fwd="$search_packs_fwd" --param pack_bwd="$search_packs_bwd")
  [ "$search_u_fwd" = "$search_u_bwd" ] || search_params+=(--param u_fwd="$search_u_fwd" \
    --param u_bwd="$search_u_bwd" --param profile="$harmony_profiles/$model.json")
}

# harmony_cell_row TRACE MACHINE MODEL PLANNER RECOMPUTE GPUS D U_FWD U_BWD SEARCH_ESTIMATE [PARAM...]: plans PLANNER
# on TRACE (gpus, minibatch and the PARAMs), simulates the plan on $engine (default fast) and writes its cell_row.py
# row to $harmony_work/row. When the planner fails, the row says so (its message, commas dropped) and it returns 1.
harmony_cell_row() {
  local trace=$1 machine=$2 model=$3 planner=$4 recompute=$5 gpus=$6 d=$7 u_fwd=$8 u_bwd=$9 search_estimate=${10}
  shift 10
  local plan="$harmony_work/cell.plan.json" sim="$harmony_work/cell.sim.json"
  if ! "$harmony_memsim" plan --trace "$trace" --machine "$machine" --planner "$planner" --param gpus="$gpus" \
    --param minibatch="$d" "$@" --out "$plan" >/dev/null 2>"$harmony_work/plan.err"; then
    echo "$model,$planner,$recompute,$gpus,$d,$u_fwd,$u_bwd,,,false,,,,$search_estimate,,,,,,,,plan failed:" \
      "$(head -c 200 "$harmony_work/plan.err" | tr ',\n' ';  ')" >"$harmony_work/row"
    return 1
  fi
  "$harmony_memsim" simulate --trace "$trace" --machine "$machine" --plan "$plan" --engine "${engine:-fast}" \
    --json >"$sim"
  /usr/bin/python3 "$harmony_root/experiments/harmony/cell_row.py" "$trace" "$plan" "$sim" model="$model" \
    planner="$planner" recompute="$recompute" gpus="$gpus" minibatch="$d" u_fwd="$u_fwd" u_bwd="$u_bwd" \
    search_estimate_s="$search_estimate" >"$harmony_work/row"
}

# harmony_pack_count PACKS: the number of packs in a list like 0-3,4-7 (0 for an empty list).
harmony_pack_count() {
  if [ -z "$1" ]; then echo 0; else tr ',' '\n' <<<"$1" | wc -l; fi
}
