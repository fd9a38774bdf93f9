#!/bin/bash
# Planning time of `mu-two` per N (memsim plan, process included, wall clock) and the worst gap between the §6.5
# estimate and the fast engine's steady iteration time over every partition it tried. Writes planning.csv.
# Usage: planning.sh [MEMSIM] [OUT_CSV]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
memsim=${1:-$here/../../../build/release/experiments/memsim}
out=${2:-$here/planning.csv}
traces=$here/../../../traces/data/fused-h200
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "workload,models,planning_s,partition,partitions_tried,partitions_feasible,worst_estimate_gap" > "$out"
for workload in bert-b16 gpt-b8 resnet101-b48; do
  for models in 2 4 6 8 12; do
    echo "planning $workload N=$models" >&2
    start=$(date +%s.%N)
    "$memsim" plan --trace "$traces/$workload-k1-h200.trace.json.gz" --machine a100-40gb-pcie4-p4d --planner mu-two \
      --param "models=$models" --out "$work/plan.json" > /dev/null
    end=$(date +%s.%N)
    /usr/bin/python3 - "$work/plan.json" "$workload" "$models" "$start" "$end" >> "$out" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
tried = plan["params"]["candidates"]
gaps = [abs(c["estimate_s"] - c["steady_iteration_time_s"]) / c["steady_iteration_time_s"]
        for c in tried if "estimate_s" in c]
print(f"{sys.argv[2]},{sys.argv[3]},{float(sys.argv[5]) - float(sys.argv[4]):.2f},{plan['params']['partition']},{len(tried)},"
      f"{len(gaps)},{max(gaps):.3g}")
PY
  done
done
