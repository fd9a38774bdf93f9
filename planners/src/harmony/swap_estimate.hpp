#pragma once
// The `estimate` of the swap baselines (dp-swap, gpipe-swap, pipedream2bw-swap): analytic, with Harmony's
// estimator bandwidths (EstimatorSettings: each of N GPUs gets bw_swap/N of the host link per direction, p2p and
// the all-reduce ring run at bw_p2p), as the harmony planners' own estimates and zero_planners' are. Within one
// pass of a stage over one microbatch, each layer takes max(compute, swap-in, swap-out): the emitter's one layer of
// lookahead overlaps a layer's transfers with its compute. Passes compose by the schedule (compose_* below).
#include "swap_emitter.hpp"

#include "memsim/traces/trace.hpp"

#include <vector>

namespace memsim::harmony {

// One microbatch through one stage, and the stage's update, in seconds.
struct StagePassTimes {
  double forward = 0;
  double backward_first = 0;        // the first microbatch: dW goes out
  double backward_accumulating = 0; // later ones: dW also comes back in to accumulate
  double update = 0;                // per layer: dW, W, K in; all-reduce over the replicas; the step; W, K out
};

StagePassTimes stage_pass_times(const Trace& trace, const LayerChainIds& chain, const SwapStage& stage,
                                Recompute recompute, int gpus, int replicas);

// DP: every GPU runs its m microbatches one after another, then the update.
double compose_data_parallel(const StagePassTimes& replica, int microbatches);
// GPipe: all forwards through the pipeline (fill, then the slowest stage per microbatch), then all backwards, then
// each stage's update in parallel.
double compose_gpipe(const std::vector<StagePassTimes>& stages, int microbatches);
// 1F1B: the first microbatch through every stage and back, then the slowest stage's forward + backward per further
// microbatch, then the updates.
double compose_one_forward_one_backward(const std::vector<StagePassTimes>& stages, int microbatches);

// The model in words, recorded in plan.params["estimate_model"].
extern const char* const kSwapEstimateModel;

} // namespace memsim::harmony
