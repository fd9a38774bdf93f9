#!/usr/bin/env bash
# harmony-pp / harmony-dp plans for Harmony's committed D=32, N=2 configurations (U_F = U_B only), simulated on both
# engines. Usage: run.sh [PROFILE_DIR] [MEMSIM] [MACHINE]   (PROFILE_DIR holds bert_96.json and vgg416.json; defaults
# in ../common.sh)
# Prints the README's markdown table; per-GPU volumes are read from the plan (static: every copy is a plan step).
set -euo pipefail
source "$(dirname "$0")/../common.sh"
harmony_setup "${1:-}" "${2:-}"
memsim=$harmony_memsim
machine=${3:-4x1080ti-pcie-1switch}
work=$harmony_work

bert_bwd=0-9,10-19,20-28,29-38,39-47,48-57,58-67,68-76,77-86,87-99
vgg_fwd=0-50,51-110,111-184,185-262,263-353
vgg_bwd=0-14,15-30,31-45,46-61,62-76,77-98,99-122,123-146,147-171,172-199,200-228,229-256,257-284,285-312,313-353,354-416
runs=(
  "bert_96 pp 8 0-9,10-19,20-28,29-38,39-47,48-57,58-67,68-76,77-86 $bert_bwd"
  "bert_96 dp 8 0-21,22-42,43-64,65-86 $bert_bwd"
  "vgg416 pp 8 $vgg_fwd $vgg_bwd"
  "vgg416 dp 8 $vgg_fwd $vgg_bwd"
)
echo "| model | mode | U/\|P_F\|/\|P_B\| | Harmony estimate (s) | simulated fast (s) | simulated SimGrid (s) | peak GPU (GiB) | Harmony memory (GiB) | W in per GPU (GB) | W in total (GB) | dW out (GB) | h2d / d2h / p2p total (GB) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  read -r model mode u packs_fwd packs_bwd <<<"$run"
  trace=$(harmony_layer_chain "$model" "$u" "$machine")
  plan="$work/$model-$mode.plan.json"
  "$memsim" plan --trace "$trace" --machine "$machine" --planner "harmony-$mode" --param gpus=2 \
    --param minibatch=32 --param pack_fwd="$packs_fwd" --param pack_bwd="$packs_bwd" --out "$plan" >/dev/null
  for engine in fast simgrid; do
    "$memsim" simulate --trace "$trace" --machine "$machine" --plan "$plan" --engine "$engine" --json \
      >"$work/$engine.json"
  done
  /usr/bin/python3 - "$trace" "$plan" "$work/fast.json" "$work/simgrid.json" "$model" "$mode" "$u" <<'PY'
import json, sys
trace, plan, fast, simgrid = (json.load(open(p)) for p in sys.argv[1:5])
model, mode, u = sys.argv[5:8]
tensors = {t["id"]: t for t in trace["tensors"]}
w_in, dw_out = {}, 0
for step in plan["steps"]:
    t = tensors.get(step.get("tensor"))
    if t is None:
        continue
    if step["kind"] == "prefetch" and t["kind"] == "weight":
        w_in[step.get("device", 0)] = w_in.get(step.get("device", 0), 0) + t["bytes"]
    if step["kind"] == "offload" and t["kind"] == "weight_grad":
        dw_out += t["bytes"]
for run in (fast, simgrid):
    assert run["feasible"], run
config = plan["params"]["configuration"]
nf = len(config["pack_fwd"].split(",")) if config["pack_fwd"] else 0
nb = len(config["pack_bwd"].split(","))
gb, gib = 1e9, 2.0**30
per_gpu = " / ".join(f"{w_in[d] / gb:.2f}" for d in sorted(w_in))
print(f"| {model} | {mode} | {u}/{nf}/{nb} | {plan['estimate']['iteration_time_s']:.3f} | "
      f"{fast['iteration_time_s']:.3f} | {simgrid['iteration_time_s']:.3f} | {fast['peak_device_bytes'] / gib:.2f} | "
      f"{plan['estimate']['peak_bytes'] / gib:.2f} | {per_gpu} | {sum(w_in.values()) / gb:.2f} | {dw_out / gb:.2f} | "
      f"{fast['h2d_bytes'] / gb:.2f} / {fast['d2h_bytes'] / gb:.2f} / {fast['p2p_bytes'] / gb:.2f} |")
PY
done
