#!/usr/bin/env bash
# Fig. 8 of Harmony (BERT-Large, D = 600, 4 GPUs, Harmony PP): large packs (7 layers, U_F = 20, U_B = 10, what a
# greedy fill gives) against smaller ones (4 layers, U_F = 30, U_B = 15), the two schedules of the authors'
# run_bert_large__fig8.sh (results/bert_large/sched/D600_vPP_N4_Ufwd{20,30}_Ubwd{10,15}_P{7,4}: manual_pack, constant
# pack sizes from the end, P_F = P_B minus its last pack), estimated by `memsim harmony estimate` (Harmony's
# estimator, its default bandwidths). Idle = 1 - compute / iteration per GPU (compute: the FWD, REC and BWD events).
# Usage: run.sh [PROFILE_DIR] [MEMSIM] (defaults in ../common.sh). Writes results.csv beside this script and prints it.
set -euo pipefail
source "$(dirname "$0")/../common.sh"
harmony_setup "${1:-}" "${2:-}"
here=$(cd "$(dirname "$0")" && pwd)
# name u_fwd u_bwd packs_fwd packs_bwd
runs=(
  "packs_of_7 20 10 0-6,7-13,14-20 0-6,7-13,14-20,21-27"
  "packs_of_4 30 15 0-3,4-7,8-11,12-15,16-19,20-23 0-3,4-7,8-11,12-15,16-19,20-23,24-27"
)
echo "schedule,u_fwd,u_bwd,packs_fwd,packs_bwd,iteration_s,compute_s_per_gpu,idle_max,idle_mean" >"$here/results.csv"
for run in "${runs[@]}"; do
  read -r name u_fwd u_bwd packs_fwd packs_bwd <<<"$run"
  out=$("$harmony_memsim" harmony estimate --profile "$harmony_profiles/bert_large.json" --gpus 4 --minibatch 600 \
    --mode pp --u-fwd "$u_fwd" --u-bwd "$u_bwd" --packs-fwd "$packs_fwd" --packs-bwd "$packs_bwd" \
    --events "$harmony_work/events.csv")
  iteration=$(sed -n 's/^iteration_s //p' <<<"$out")
  /usr/bin/python3 - "$harmony_work/events.csv" "$iteration" "$name" "$u_fwd" "$u_bwd" "$packs_fwd" "$packs_bwd" \
    >>"$here/results.csv" <<'PY'
import csv, sys
events, iteration, fields = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
compute = {}
for row in csv.DictReader(open(events)):
    if row["stream"] == "Compute" and row["kind"] in ("FWD", "REC", "BWD"):
        rank = int(row["rank"])
        compute[rank] = compute.get(rank, 0.0) + float(row["end_s"]) - float(row["begin_s"])
idle = [1 - c / iteration for c in compute.values()]
csv.writer(sys.stdout, lineterminator="\n").writerow(
    fields + ["%.3f" % iteration, " ".join("%.3f" % compute[r] for r in sorted(compute)), "%.3f" % max(idle),
              "%.3f" % (sum(idle) / len(idle))])
PY
done
cat "$here/results.csv"
