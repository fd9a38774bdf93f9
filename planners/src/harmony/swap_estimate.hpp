#pragma once
// The `estimate` of the swap baselines (dp-swap, gpipe-swap, pipedream2bw-swap): analytic, with Harmony's
// estimator bandwidths (EstimatorSettings: bw_swap per direction of the host link, p2p and the all-reduce ring at
// bw_p2p), as the harmony planners' own estimates and zero_planners' are. Within one pass of a stage over one
// microbatch, each layer takes max(compute, swap-in, swap-out) at the GPU's share of the link: the emitter's one
// layer of lookahead overlaps a layer's transfers with its compute. Passes compose by the schedule (compose_*).
// DP replicas run in lockstep, so each gets bw_swap/N in both directions all the time. Pipeline stages do not: one
// stage swaps activations out while the next swaps them in, so a static 1/N share would count each direction's
// contention twice (measured: 2x the simulated time on Fig. 10). A pipeline is bounded instead by its composition
// with each GPU at the full bw_swap, and by the host link moving every stage's bytes in each direction.
#include "swap_emitter.hpp"

#include "memsim/traces/trace.hpp"

#include <array>
#include <vector>

namespace memsim::harmony {

// One microbatch through one stage, and the stage's update, in seconds.
struct StagePassTimes {
  double forward = 0;
  double backward_first = 0;        // the first microbatch: dW goes out
  double backward_accumulating = 0; // later ones: dW also comes back in to accumulate
  double update = 0;                // per layer: dW, W, K in; all-reduce over the replicas; the step; W, K out
  double received = 0;              // of forward + backward: the boundary tensors received over p2p
  // Bytes over the host link, {in, out}: a forward, an accumulating backward, the update; the first backward moves
  // the dW in bytes less.
  std::array<double, 2> forward_bytes{};
  std::array<double, 2> backward_bytes{};
  double gradient_bytes = 0; // dW in of an accumulating backward
  std::array<double, 2> update_bytes{};
};

// sharing: how many GPUs share the host link at every moment (the GPU's share is bw_swap / sharing).
StagePassTimes stage_pass_times(const Trace& trace, const LayerChainIds& chain, const SwapStage& stage,
                                Recompute recompute, int sharing, int replicas);

// DP: every GPU runs its m microbatches one after another, then the update.
double compose_data_parallel(const StagePassTimes& replica, int microbatches);
// GPipe: all forwards through the pipeline (fill, then the slowest stage per microbatch), then all backwards, then
// each stage's update in parallel; each phase at least the host link's time for every stage's bytes in it (the
// flush keeps the forwards' swap-outs and the backwards' swap-ins apart). Stages timed at sharing 1.
double compose_gpipe(const std::vector<StagePassTimes>& stages, int microbatches);
// 1F1B, one iteration with a flush: the first microbatch through every stage and back, then the slowest stage's
// forward + backward per further microbatch, then the updates; at least the host link's time. Stages timed at
// sharing 1.
double compose_one_forward_one_backward(const std::vector<StagePassTimes>& stages, int microbatches);

// PipeDream-2BW's steady iteration (1F1B without a flush, pipedream2bw-swap with iterations > 1): every stage runs
// its m forwards, m backwards and its update once per iteration, the fill and drain overlapping the neighbouring
// iterations, so the period is the busiest stage's m F + B_first + (m - 1) B + U, without the p2p receives (they
// overlap the previous pass in the steady state); at least the host link's time for one iteration's bytes.
double steady_one_forward_one_backward(const std::vector<StagePassTimes>& stages, int microbatches);

// The model in words, recorded in plan.params["estimate_model"].
extern const char* const kSwapEstimateModel;
// Appended to it for steady_one_forward_one_backward.
extern const char* const kSteadyEstimateModel;

} // namespace memsim::harmony
