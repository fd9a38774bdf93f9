#!/usr/bin/env bash
# The authors' Python configuration search (msr-fiddle/harmony 3_scheduler/scheduler.py, the Table-1 flags of
# run_four_models__tab1.sh) and memsim-harmony-search-bench, back to back, ROUNDS times, on this machine. Prints
# the Python "Search done" wall time and its process CPU time per model, then the bench's table.
# Usage: harmony_search_vs_python.sh HARMONY_CHECKOUT PROFILE_DIR [BENCH] [ROUNDS]
# HARMONY_CHECKOUT: a checkout of msr-fiddle/harmony (commit 5fd838f) with results/{bert_96,gpt2_xl,vgg416};
# needs /usr/bin/python3 with numpy and torch (the pickles hold torch objects).
set -euo pipefail
harmony=${1:?usage: harmony_search_vs_python.sh HARMONY_CHECKOUT PROFILE_DIR [BENCH] [ROUNDS]}
profiles=${2:?usage: harmony_search_vs_python.sh HARMONY_CHECKOUT PROFILE_DIR [BENCH] [ROUNDS]}
bench=${3:-build/release/bench/memsim-harmony-search-bench}
rounds=${4:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for model in bert_96 gpt2_xl vgg416; do # the scheduler writes sched/ next to the profiles: work on a copy
  mkdir -p "$work/$model" && cp -rL "$harmony/harmony/results/$model/prof" "$work/$model/"
done
for round in $(seq "$rounds"); do
  for run in "bert_96 9E9" "gpt2_xl 9E9" "vgg416 -"; do
    read -r model cap <<<"$run"
    cap_flag=()
    [[ $cap != - ]] && cap_flag=(--memory_cap "$cap")
    out=$(cd "$harmony/harmony/3_scheduler" &&
      PYTHONPATH=../4_runtime/viewer:../2_profiler /usr/bin/time -f 'cpu %U %S' /usr/bin/python3 scheduler.py \
        --packing_method_fwd balanced_time reuse --packing_method_bwd balanced_time "${cap_flag[@]}" --topk 1 \
        --rank_fit_normally --module_dir "$work" --module_name "$model" --minibatchsize 64 --mode vPP \
        --num_gpus 4 2>&1)
    search=$(sed -n 's/.*Search done: \([0-9.]*\) sec.*/\1/p' <<<"$out")
    cpu=$(awk '/^cpu /{print $2 + $3}' <<<"$out")
    top=$(grep -m1 '=== Top1' <<<"$out" | sed 's/ (idle.*//')
    echo "round $round python $model: search ${search} s wall, process ${cpu} s CPU (import and profile loading included); $top"
  done
  "$bench" --profiles "$profiles" --repeats 5
done
