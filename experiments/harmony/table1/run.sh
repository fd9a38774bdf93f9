#!/usr/bin/env bash
# Table 1 of Harmony (PVLDB 2022): the configurations Harmony PP's search picks for 4 GPUs at D = 64, with memsim's
# port of the search, then each configuration planned (harmony-pp) and simulated on both readings of the 4x1080 Ti
# server's PCIe tree. Usage:
#   run.sh [PROFILE_DIR] [MEMSIM] [OUT_CSV]
# (defaults: ../shared/data/harmony-profiles, build/release/experiments/memsim, experiments/harmony/table1/results.csv).
# Writes the CSV (deterministic) and prints the README's markdown table, whose "search time" column is the search's
# wall clock on this machine (not deterministic, so not in the CSV), next to the paper's (Table 1). ResNet1K is left out: its profile has no input
# sizes X (the authors' XMETA blob is missing), so Harmony's estimator cannot run on it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../common.sh"
harmony_setup "${1:-}" "${2:-}"
out=${3:-$here/results.csv}
gpus=4
d=64
# model memory_cap (Table 1's script run_four_models__tab1.sh) paper's U_F/|P_F|/U_B/|P_B| and search time (s)
rows=(
  "bert_96 9e9 16/24/16/25 1.4"
  "gpt2_xl 9e9 4/10/4/17 0.7"
  "vgg416 10737418240 8/15/8/16 17.7"
)
machines="4x1080ti-pcie-1switch 4x1080ti-pcie-tree"
table="$harmony_work/table.md"
echo "machine,memory_cap,paper_config,search_config,candidates,$(/usr/bin/python3 "$here/../cell_row.py" --header)" \
  >"$out"
echo "| model | memory cap (B) | paper (U_F/\|P_F\|/U_B/\|P_B\|) | memsim search | match | Harmony estimate (s) | memory (MiB, per rank) | candidates | search time (s) | paper search time (s) | simulated, 1 switch (s) | simulated, tree (s) | peak GPU (GiB) | swap h2d+d2h per GPU (GB) | p2p (GB) |" >"$table"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" >>"$table"
for row in "${rows[@]}"; do
  read -r model cap paper paper_time <<<"$row"
  harmony_search "$model" pp "$gpus" "$d" "$cap"
  found="$search_u_fwd/$(harmony_pack_count "$search_packs_fwd")/$search_u_bwd/$(harmony_pack_count "$search_packs_bwd")"
  [ "$found" = "$paper" ] && match=yes || match=no
  echo "  $model: search $found (paper $paper), estimate $search_estimate s, $search_count candidates," \
    "${search_time_s} s" >&2
  # The planner runs U_F = U_B only; every Table 1 row has U_F = U_B.
  trace=$(harmony_layer_chain "$model" "$search_u_bwd" 4x1080ti-pcie-1switch)
  declare -A seconds=()
  for machine in $machines; do
    plan="$harmony_work/$model-$machine.plan.json"
    sim="$harmony_work/$model-$machine.sim.json"
    "$harmony_memsim" plan --trace "$trace" --machine "$machine" --planner harmony-pp --param gpus=$gpus \
      --param minibatch=$d --param pack_fwd="$search_packs_fwd" --param pack_bwd="$search_packs_bwd" \
      --out "$plan" >/dev/null
    "$harmony_memsim" simulate --trace "$trace" --machine "$machine" --plan "$plan" --json >"$sim"
    cells=$(/usr/bin/python3 "$here/../cell_row.py" "$trace" "$plan" "$sim" model="$model" planner=harmony-pp \
      gpus=$gpus minibatch=$d u_fwd="$search_u_fwd" u_bwd="$search_u_bwd" search_estimate_s="$search_estimate")
    echo "$machine,$cap,$paper,$found,$search_count,$cells" >>"$out"
    seconds[$machine]=$(cut -d, -f11 <<<"$cells")
    echo "  $model on $machine: simulated ${seconds[$machine]} s" >&2
  done
  # Volumes and peak from the 1-switch run (the plan is the same on both machines).
  /usr/bin/python3 - "$harmony_work/$model-4x1080ti-pcie-1switch.sim.json" "$cells" <<PY >>"$table"
import csv, json, sys
sim = json.load(open(sys.argv[1]))
cells = next(csv.reader([sys.argv[2]]))
h2d, d2h = cells[17].split(";"), cells[18].split(";")
per_gpu = " / ".join(f"{(int(a) + int(b)) / 1e9:.1f}" for a, b in zip(h2d, d2h))
print(f"| $model | $cap | $paper | $found | $match | {float('$search_estimate'):.3f} | $search_memory_mib | "
      f"$search_count | $search_time_s | $paper_time | {float('${seconds[4x1080ti-pcie-1switch]}'):.3f} | "
      f"{float('${seconds[4x1080ti-pcie-tree]}'):.3f} | {sim['peak_device_bytes'] / 2**30:.2f} | {per_gpu} | "
      f"{sim['p2p_bytes'] / 1e9:.2f} |")
PY
  unset seconds
done
cat "$table"
echo "wrote $out" >&2
