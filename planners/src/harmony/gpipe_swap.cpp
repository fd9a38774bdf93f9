// gpipe-swap: Harmony's "GP Swap" baseline (spec §1.9) as a static plan over a layer-chain trace: GPipe with a
// per-GPU swap of every layer's tensors (swap_emitter.hpp, as dp-swap). The chain is split into N contiguous stages
// balanced by compute, stage s on GPU s; all m = D / u microbatches run forward through the pipeline, then all run
// backward (the flush), Y and dX crossing stage boundaries by send/recv; after the flush each GPU updates its
// stage's layers (h2d dW, W, K, the optimizer step on the GPU, d2h W and K). Each stage's weight traffic is
// (4m + 2)|W_s| on its GPU, (4m + 2)|W| in all. recompute=true swaps out only each stage's input per microbatch and
// recomputes the stage's forward (W swapped in again) before its backward: (5m + 2)|W_s|; the recomputed
// activations stay on the GPU while they fit half of it, the earliest layers' are swapped out and back in.
// pipedream2bw-swap: "2BW Swap", the same stages and swapping in PipeDream's 1F1B order, `iterations` minibatches
// back to back without a flush (PipeDream-2BW's steady state): one 1F1B sequence per stage over all iterations x m
// microbatches, each stage's update of minibatch t right after its last backward of t, its next forwards (already
// of t + 1 on all but the last stage, the warm-up ones) not waiting for the other stages' updates. Two weight
// versions (weight_versions.hpp): a forward uses the version its stage has, its backward the same one (weight
// stashing), the update writes the other; the second version is a second host copy of W per stage, swapped like W,
// so the bytes per iteration equal one iteration's. Steps carry the minibatch's `iteration`, so the core reports
// iteration_times_s and steady_iteration_time_s (the mean from the second). The default of 4 iterations: the first
// pays the pipeline's fill, the last runs its drain without the next minibatch's forwards beside it (on a contended
// host link it comes out shorter: bert_96 D = 16, 16.7 s against 20.2-20.4 s), the two between are the steady
// state (experiments take their mean from iteration_times_s; the core's steady time also averages the last).
// iterations = 1 is one iteration with the updates after the drain and one weight version (the plan before the
// steady state).
#include "swap_emitter.hpp"
#include "swap_estimate.hpp"
#include "weight_versions.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/estimator.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>
#include <string>

namespace memsim {
namespace {

// Layer l's compute in one training step: forward, the activations kept, backward.
double layer_time(const Trace& trace, const LayerChainIds& chain, std::size_t l)
{
  double time = trace.op(chain.forward[l]).time_s + trace.op(chain.backward[l]).time_s;
  if (chain.save[l])
    time += trace.op(*chain.save[l]).time_s;
  return time;
}

// The contiguous split of the chain into `stages` non-empty stages whose slowest stage is fastest (dynamic
// programming over prefixes; ties keep the earliest cut, so the split is deterministic).
std::vector<harmony::LayerPack> balanced_stages(const Trace& trace, const LayerChainIds& chain, std::size_t stages)
{
  const std::size_t layers = chain.layers();
  std::vector<double> prefix(layers + 1, 0);
  for (std::size_t l = 0; l < layers; ++l)
    prefix[l + 1] = prefix[l] + layer_time(trace, chain, l);
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // slowest[k][j]: the best slowest stage over the first j layers in k stages; cut[k][j]: where its last stage starts
  std::vector<std::vector<double>> slowest(stages + 1, std::vector<double>(layers + 1, kNone));
  std::vector<std::vector<std::size_t>> cut(stages + 1, std::vector<std::size_t>(layers + 1, 0));
  slowest[0][0] = 0;
  for (std::size_t k = 1; k <= stages; ++k)
    for (std::size_t j = k; j <= layers; ++j)
      for (std::size_t i = k - 1; i < j; ++i) {
        const double candidate = std::max(slowest[k - 1][i], prefix[j] - prefix[i]);
        if (candidate < slowest[k][j]) {
          slowest[k][j] = candidate;
          cut[k][j] = i;
        }
      }
  std::vector<harmony::LayerPack> result(stages);
  std::size_t end = layers;
  for (std::size_t k = stages; k > 0; --k) {
    result[k - 1] = {cut[k][end], end - 1};
    end = cut[k][end];
  }
  return result;
}

// With recompute, the first layer of the stage whose recomputed activations (its input and saved tensors) stay on
// the GPU until the backward: the latest layers (read first by the backward) while they fit half the budget, the
// other half left to the weights, gradients and workspace in flight.
std::size_t first_kept_layer(const Trace& trace, const LayerChainIds& chain, const harmony::LayerPack& stage,
                             std::uint64_t budget)
{
  std::uint64_t kept = 0;
  for (std::size_t l = stage.last + 1; l-- > stage.first;) {
    kept += trace.tensor(chain.x[l]).bytes;
    if (chain.saved[l])
      kept += trace.tensor(*chain.saved[l]).bytes;
    if (kept > budget / 2)
      return l + 1;
  }
  return stage.first;
}

// One stage's forward or backward of one microbatch, in the global order the plan lists them.
struct Pass {
  int stage = 0;
  int microbatch = 0;
  bool forward = true;
};
using PassOrder = std::vector<Pass> (*)(int stages, int microbatches);
using Composition = double (*)(const std::vector<harmony::StagePassTimes>& stages, int microbatches, int iterations);

double gpipe_composition(const std::vector<harmony::StagePassTimes>& stages, int microbatches, int /*iterations*/)
{
  return harmony::compose_gpipe(stages, microbatches);
}

double one_forward_one_backward_composition(const std::vector<harmony::StagePassTimes>& stages, int microbatches,
                                            int iterations)
{
  return iterations == 1 ? harmony::compose_one_forward_one_backward(stages, microbatches)
                         : harmony::steady_one_forward_one_backward(stages, microbatches);
}

// GPipe: all forwards through the pipeline, then all backwards (the flush).
std::vector<Pass> gpipe_order(int stages, int microbatches)
{
  std::vector<Pass> passes;
  for (int i = 0; i < microbatches; ++i)
    for (int s = 0; s < stages; ++s)
      passes.push_back({s, i, true});
  for (int i = 0; i < microbatches; ++i)
    for (int s = stages; s-- > 0;)
      passes.push_back({s, i, false});
  return passes;
}

// PipeDream's 1F1B: stage s runs N - 1 - s warm-up forwards, then alternates forward and backward, then drains the
// backwards; the stages' sequences are merged into one list where every pass follows the pass it receives from.
std::vector<Pass> one_forward_one_backward_order(int stages, int microbatches)
{
  std::vector<std::vector<Pass>> per_stage(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    std::vector<Pass>& own = per_stage[static_cast<std::size_t>(s)];
    const int warmup = std::min(stages - 1 - s, microbatches);
    int forwards = 0;
    int backwards = 0;
    for (; forwards < warmup; ++forwards)
      own.push_back({s, forwards, true});
    while (backwards < microbatches) {
      if (forwards < microbatches)
        own.push_back({s, forwards++, true});
      own.push_back({s, backwards++, false});
    }
  }
  // done[s][i]: forward (0) / backward (1) of microbatch i listed on stage s
  std::vector<std::vector<std::array<bool, 2>>> done(
      static_cast<std::size_t>(stages), std::vector<std::array<bool, 2>>(static_cast<std::size_t>(microbatches)));
  const auto listed = [&](int s, int i, bool forward) {
    return done[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)][forward ? 0 : 1];
  };
  std::vector<std::size_t> next(static_cast<std::size_t>(stages), 0);
  std::vector<Pass> passes;
  const std::size_t total = 2 * static_cast<std::size_t>(stages) * static_cast<std::size_t>(microbatches);
  while (passes.size() < total) {
    const std::size_t before = passes.size();
    for (int s = 0; s < stages; ++s) {
      std::size_t& at = next[static_cast<std::size_t>(s)];
      if (at == per_stage[static_cast<std::size_t>(s)].size())
        continue;
      const Pass pass = per_stage[static_cast<std::size_t>(s)][at];
      const bool ready =
          pass.forward ? s == 0 || listed(s - 1, pass.microbatch, true)
                       : (s + 1 == stages ? listed(s, pass.microbatch, true) : listed(s + 1, pass.microbatch, false));
      if (!ready)
        continue;
      passes.push_back(pass);
      done[static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.microbatch)][pass.forward ? 0 : 1] = true;
      ++at;
    }
    if (passes.size() == before)
      throw std::logic_error("1F1B order: no stage can proceed");
  }
  return passes;
}

// Emits the passes in `order` over `iterations` minibatches of m microbatches (global microbatch index
// t m + i), each step marked with its minibatch. One iteration: the updates after every pass, in place. Several:
// each stage's update of minibatch t after its last backward of t, writing the other weight version, the last
// minibatch's after every pass.
void emit_passes(const Trace& trace, const LayerChainIds& chain, const std::vector<harmony::SwapStage>& stages,
                 harmony::Recompute recompute, PassOrder order, int microbatches, int iterations, Plan& plan)
{
  const int gpus = static_cast<int>(stages.size());
  harmony::LayerSwapEmitter emit(chain, gpus, recompute, plan);
  std::array<LayerChainIds, 2> versions{chain, chain};
  if (iterations > 1)
    versions = harmony::two_weight_versions(trace, chain, plan);
  std::vector<int> updates_done(static_cast<std::size_t>(gpus), 0);
  // version_used[s][k]: the weight version stage s's forward of microbatch k used, for its backward
  std::vector<std::vector<int>> version_used(static_cast<std::size_t>(gpus),
                                             std::vector<int>(static_cast<std::size_t>(microbatches * iterations)));
  const auto mark = [&plan](std::size_t from, int iteration) {
    for (std::size_t i = from; i < plan.steps.size(); ++i)
      plan.steps[i].iteration = iteration;
  };
  const auto update = [&](const harmony::SwapStage& stage, int minibatch) {
    const std::size_t from = plan.steps.size();
    int& done = updates_done[static_cast<std::size_t>(stage.gpu)];
    if (iterations == 1) {
      emit.update(stage.first, stage.last, {stage.gpu});
    } else {
      emit.use_weights(versions[static_cast<std::size_t>(done % 2)]);
      emit.update(stage.first, stage.last, {stage.gpu}, &versions[static_cast<std::size_t>((done + 1) % 2)]);
    }
    ++done;
    mark(from, minibatch);
  };
  for (const Pass& pass : order(gpus, microbatches * iterations)) {
    const harmony::SwapStage& stage = stages[static_cast<std::size_t>(pass.stage)];
    const int minibatch = pass.microbatch / microbatches;
    const int within = pass.microbatch % microbatches;
    int& version = version_used[static_cast<std::size_t>(pass.stage)][static_cast<std::size_t>(pass.microbatch)];
    if (pass.forward)
      version = updates_done[static_cast<std::size_t>(pass.stage)] % 2;
    emit.use_weights(versions[static_cast<std::size_t>(version)]);
    const std::size_t from = plan.steps.size();
    if (pass.forward)
      emit.forward(stage, pass.microbatch);
    else
      emit.backward(stage, pass.microbatch, within > 0);
    mark(from, minibatch);
    if (!pass.forward && within == microbatches - 1 && minibatch + 1 < iterations)
      update(stage, minibatch);
  }
  for (const harmony::SwapStage& stage : stages)
    update(stage, iterations - 1);
}

Plan plan_pipeline_swap(const Trace& trace, const Machine& machine, const PlanRequest& request,
                        const harmony::SwapBaselineOptions& options, PassOrder order, Composition compose,
                        int iterations)
{
  const LayerChainIds chain = layer_chain_ids(trace, trace.name);
  const int gpus = harmony::swap_baseline_gpus(options.gpus, machine);
  if (static_cast<std::size_t>(gpus) > chain.layers())
    throw InputError("gpus", fmt::format("{} stages asked of a chain of {} layers", gpus, chain.layers()));
  const int u = static_cast<int>(trace.source.batch);
  if (options.minibatch <= 0 || options.minibatch % u != 0)
    throw InputError("minibatch", fmt::format("{} samples do not split into microbatches of {} (the trace's)",
                                              options.minibatch, u));
  const int microbatches = options.minibatch / u;
  const std::vector<harmony::LayerPack> packs = balanced_stages(trace, chain, static_cast<std::size_t>(gpus));
  std::vector<harmony::SwapStage> stages;
  for (int s = 0; s < gpus; ++s) {
    const harmony::LayerPack& pack = packs[static_cast<std::size_t>(s)];
    const std::uint64_t budget =
        request.budget_bytes > 0 ? request.budget_bytes : machine.gpus[static_cast<std::size_t>(s)].memory;
    stages.push_back({pack.first, pack.last, s, s - 1, s + 1 < gpus ? s + 1 : -1,
                      first_kept_layer(trace, chain, pack, budget)});
  }

  // Two weight versions suffice when every microbatch a stage starts before its update of minibatch t (N - 1 - s
  // warm-up forwards) has finished its backward before the update of t + 1: PipeDream-2BW's m >= N.
  if (iterations > 1 && microbatches < gpus)
    throw InputError("minibatch", fmt::format("{} microbatches of {} samples over {} stages: 2BW's steady state "
                                              "needs at least one per stage (m >= N)",
                                              microbatches, u, gpus));

  Plan plan;
  harmony::init_swap_plan(plan);
  const harmony::Recompute recompute = options.recompute ? harmony::Recompute::per_stage : harmony::Recompute::none;
  emit_passes(trace, chain, stages, recompute, order, microbatches, iterations, plan);
  std::vector<harmony::StagePassTimes> times;
  for (const harmony::SwapStage& stage : stages)
    times.push_back(harmony::stage_pass_times(trace, chain, stage, recompute, 1, 1));
  plan.estimate.iteration_time_s = compose(times, microbatches, iterations);
  plan.params["estimate_model"] = iterations == 1
                                      ? std::string(harmony::kSwapEstimateModel)
                                      : std::string(harmony::kSwapEstimateModel) + harmony::kSteadyEstimateModel;
  plan.params["configuration"] = {{"gpus", gpus},
                                  {"minibatch", options.minibatch},
                                  {"microbatch", u},
                                  {"microbatches", microbatches},
                                  {"stages", harmony::format_packs(packs)}};
  if (iterations > 1)
    plan.params["configuration"]["iterations"] = iterations;
  return plan;
}

Plan plan_gpipe_swap(const Trace& trace, const Machine& machine, const PlanRequest& request,
                     const harmony::SwapBaselineOptions& options)
{
  return plan_pipeline_swap(trace, machine, request, options, gpipe_order, gpipe_composition, 1);
}

Plan plan_pipedream2bw_swap(const Trace& trace, const Machine& machine, const PlanRequest& request,
                            const harmony::SwapBaselineOptions& options)
{
  return plan_pipeline_swap(trace, machine, request, options, one_forward_one_backward_order,
                            one_forward_one_backward_composition, options.iterations);
}

} // namespace

MEMSIM_REGISTER_PLANNER(gpipe_swap, "gpipe-swap",
                        "GP Swap (Harmony's baseline): GPipe over N compute-balanced contiguous stages, all forwards "
                        "then all backwards, every GPU swaps its stage's layers in and out per microbatch, boundaries "
                        "by send/recv, GPU update per stage after the flush; workload: memsim gen layer-chain",
                        harmony::swap_baseline_params("swap out only each stage's input and recompute the "
                                                      "stage's forward before its backward"),
                        plan_gpipe_swap);

MEMSIM_REGISTER_PLANNER(pipedream2bw_swap, "pipedream2bw-swap",
                        "2BW Swap (Harmony's baseline): PipeDream-2BW's 1F1B order over gpipe-swap's stages and "
                        "per-GPU swapping, `iterations` minibatches without a flush, each stage's update after its "
                        "last backward of the minibatch into the second weight version (a second host copy of W); "
                        "estimate: the steady iteration; workload: memsim gen layer-chain",
                        harmony::swap_baseline_params("swap out only each stage's input and recompute the "
                                                      "stage's forward before its backward",
                                                      true),
                        plan_pipedream2bw_swap);

} // namespace memsim
