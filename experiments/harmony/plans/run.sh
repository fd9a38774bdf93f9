#!/usr/bin/env bash
# harmony-pp / harmony-dp plans for Harmony's committed D=32, N=2 configurations, and the ZeRO
# baselines (zero-infinity, zero-offload) at the same D, microbatch and recompute packs (Harmony's P_B, spec §1.9),
# at N = 2 and 4 (and gpt2_xl at D = 128), simulated on both engines.
# Usage: run.sh [PROFILE_DIR] [MEMSIM] [MACHINE]   (PROFILE_DIR holds bert_96, gpt2_xl, gpt2_10b, vgg416 .json;
# defaults in ../common.sh)
# Prints the README's markdown table; per-GPU volumes are read from the plan (static: every copy is a plan step).
# RUNS_MATCHING=REGEX runs only the rows whose "model planner N D u" matches.
set -euo pipefail
source "$(dirname "$0")/../common.sh"
harmony_setup "${1:-}" "${2:-}"
memsim=$harmony_memsim
machine=${3:-4x1080ti-pcie-1switch}
work=$harmony_work

bert_fwd_pp=0-9,10-19,20-28,29-38,39-47,48-57,58-67,68-76,77-86
bert_fwd_dp=0-21,22-42,43-64,65-86
bert_bwd=0-9,10-19,20-28,29-38,39-47,48-57,58-67,68-76,77-86,87-99
vgg_fwd=0-50,51-110,111-184,185-262,263-353
vgg_bwd=0-14,15-30,31-45,46-61,62-76,77-98,99-122,123-146,147-171,172-199,200-228,229-256,257-284,285-312,313-353,354-416
# gpt2_xl: the committed dp configuration 2/4/2/8 (used for pp too, and for ZeRO), and the committed pp one
# 2/4/1/4 (U_F = 2, U_B = 1: the trace at u = 1, the forward chain at u = 2 from the profile).
gpt2_fwd=0-10,11-21,22-32,33-43
gpt2_bwd=0-6,7-12,13-18,19-24,25-31,32-37,38-43,44-51
gpt2_pp_fwd=0-9,10-18,19-27,28-37
gpt2_pp_bwd=0-12,13-24,25-37,38-51
# model planner N D u P_F P_B ("-": none); u is U_F:U_B where they differ
runs=(
  "vgg416 harmony-pp 2 32 8 $vgg_fwd $vgg_bwd"
  "vgg416 harmony-dp 2 32 8 $vgg_fwd $vgg_bwd"
  "gpt2_xl harmony-pp 2 32 2:1 $gpt2_pp_fwd $gpt2_pp_bwd"
)
# ZeRO at Harmony's D, u and P_B; zero-offload also with a checkpoint at every layer (P_B "-").
for n in 2 4; do
  runs+=(
    "bert_96 harmony-pp $n 32 8 $bert_fwd_pp $bert_bwd"
    "bert_96 harmony-dp $n 32 8 $bert_fwd_dp $bert_bwd"
    "bert_96 zero-infinity $n 32 8 - $bert_bwd"
    "bert_96 zero-offload $n 32 8 - $bert_bwd"
    "bert_96 zero-offload $n 32 8 - -"
    "gpt2_xl harmony-pp $n 32 2 $gpt2_fwd $gpt2_bwd"
    "gpt2_xl harmony-dp $n 32 2 $gpt2_fwd $gpt2_bwd"
    "gpt2_xl zero-infinity $n 32 2 - $gpt2_bwd"
    "gpt2_xl zero-offload $n 32 2 - $gpt2_bwd"
    "gpt2_xl zero-offload $n 32 2 - -"
  )
done
# A model whose weights do not fit one GPU: zero-offload is Infeasible, zero-infinity runs (no Harmony config here).
runs+=("gpt2_10b zero-infinity 4 32 1 - -" "gpt2_10b zero-offload 4 32 1 - -")
# A larger minibatch: ZeRO's weight traffic grows with the micro-steps m = D / (N u), Harmony's does not.
for planner in harmony-pp harmony-dp zero-infinity; do
  runs+=("gpt2_xl $planner 4 128 2 $([ $planner = zero-infinity ] && echo - || echo "$gpt2_fwd") $gpt2_bwd")
done
echo "| model | planner | N | D | U/\|P_F\|/\|P_B\| | plan estimate (s) | simulated fast (s) | simulated SimGrid (s) | peak GPU (GiB) | Harmony memory (GiB) | W in per GPU (GB) | W in total (GB) | dW out (GB) | h2d / d2h / p2p total (GB) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  read -r model planner n d u packs_fwd packs_bwd <<<"$run"
  [[ -z ${RUNS_MATCHING:-} || "$model $planner $n $d $u" =~ $RUNS_MATCHING ]] || continue
  params=(--param gpus="$n" --param minibatch="$d")
  u_bwd=$u
  if [[ $u == *:* ]]; then
    u_bwd=${u#*:}
    params+=(--param u_fwd="${u%:*}" --param u_bwd="$u_bwd" --param profile="$harmony_profiles/$model.json")
  fi
  trace=$(harmony_layer_chain "$model" "$u_bwd" "$machine")
  plan="$work/plan.json"
  [ "$packs_bwd" = - ] || params+=(--param pack_bwd="$packs_bwd")
  [ "$packs_fwd" = - ] || params+=(--param pack_fwd="$packs_fwd")
  if ! "$memsim" plan --trace "$trace" --machine "$machine" --planner "$planner" "${params[@]}" --out "$plan" \
    >"$work/plan.log" 2>&1; then
    echo "| $model | $planner | $n | $d | $u/-/$packs_bwd | $(tail -1 "$work/plan.log") |"
    continue
  fi
  for engine in fast simgrid; do
    "$memsim" simulate --trace "$trace" --machine "$machine" --plan "$plan" --engine "$engine" --json \
      >"$work/$engine.json"
  done
  /usr/bin/python3 - "$trace" "$plan" "$work/fast.json" "$work/simgrid.json" "$model" "$planner" "$n" "$d" "$u" <<'PY'
import json, sys
trace, plan, fast, simgrid = (json.load(open(p)) for p in sys.argv[1:5])
model, planner, n, d, u = sys.argv[5:10]
tensors = {t["id"]: t for t in trace["tensors"] + plan.get("extra_tensors", [])}
w_in, dw_out = {}, 0
for step in plan["steps"]:
    t = tensors.get(step.get("tensor"))
    if t is None:
        continue
    if step["kind"] == "prefetch" and t["kind"] == "weight":
        w_in[step.get("device", 0)] = w_in.get(step.get("device", 0), 0) + t["bytes"]
    if step["kind"] == "offload" and t["kind"] == "weight_grad":
        dw_out += t["bytes"]
config = plan["params"]["configuration"]
nf = len(config["pack_fwd"].split(",")) if config.get("pack_fwd") else 0
nb = len(config["pack_bwd"].split(","))
gb, gib = 1e9, 2.0**30
per_gpu = " / ".join(f"{w_in[d] / gb:.2f}" for d in sorted(w_in))
for engine, run in (("fast", fast), ("SimGrid", simgrid)):
    if not run["feasible"]:
        print(f"| {model} | {planner} | {n} | {d} | {u} | {engine}: {run['error']['kind']}: {run['error']['message']} |")
        sys.exit(0)
memory = plan["estimate"].get("peak_bytes")
memory = f"{memory / gib:.2f}" if memory else "-"
print(f"| {model} | {planner} | {n} | {d} | {u}/{nf}/{nb} | {plan['estimate']['iteration_time_s']:.3f} | "
      f"{fast['iteration_time_s']:.3f} | {simgrid['iteration_time_s']:.3f} | {fast['peak_device_bytes'] / gib:.2f} | "
      f"{memory} | {per_gpu} | {sum(w_in.values()) / gb:.2f} | {dw_out / gb:.2f} | "
      f"{fast['h2d_bytes'] / gb:.2f} / {fast['d2h_bytes'] / gb:.2f} / {fast['p2p_bytes'] / gb:.2f} |")
PY
done
