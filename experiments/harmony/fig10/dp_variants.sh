#!/usr/bin/env bash
# Harmony DP's weight-update swap in both readings (spec A2): the authors' code all-reduces dW and rank 0 alone swaps
# it out for the CPU update ((2N+1)|W| of weight traffic); the paper counts every GPU swapping out once (3N|W|),
# memsim's `gradient_out=every_rank`. Runs Fig. 10's harmony-dp cells (the same searched configurations) both ways.
# Usage: dp_variants.sh [PROFILE_DIR] [MEMSIM] [MACHINE] [OUT_CSV]
# (defaults as run.sh; OUT_CSV: experiments/harmony/fig10/dp-variants.csv). MODELS and MINIBATCHES cut the grid.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../common.sh"
harmony_setup "${1:-}" "${2:-}"
machine=${3:-4x1080ti-pcie-1switch}
out=${4:-$here/dp-variants.csv}
gpus=4
models=${MODELS:-bert_96 gpt2_xl vgg416 bert_large gpt2_10b}
minibatches=${MINIBATCHES:-16 64 256}
declare -A memory_cap=([bert_96]=9e9 [gpt2_xl]=9e9 [bert_large]=9e9 [gpt2_10b]=9e9 [vgg416]=10737418240)

echo "gradient_out,$(/usr/bin/python3 "$here/../cell_row.py" --header)" >"$out"
for model in $models; do
  for d in $minibatches; do
    harmony_search "$model" dp "$gpus" "$d" "${memory_cap[$model]}"
    trace=$(harmony_layer_chain "$model" "$search_u_bwd" "$machine")
    for variant in updater every_rank; do
      harmony_cell_row "$trace" "$machine" "$model" harmony-dp "" "$gpus" "$d" "$search_u_fwd" "$search_u_bwd" \
        "$search_estimate" "${search_params[@]}" --param gradient_out="$variant" || true
      echo "$variant,$(cat "$harmony_work/row")" >>"$out"
      echo "  $model D=$d harmony-dp gradient_out=$variant: $(cut -d, -f10,11 "$harmony_work/row")" >&2
    done
  done
done
echo "wrote $out" >&2
