// zero-infinity and zero-offload: Harmony's ZeRO baselines (spec §1.9; DeepSpeed ZeRO-3 with CPU offload, and
// ZeRO-Offload) as multi-GPU plans over a layer-chain trace (`memsim gen layer-chain`), emitted by ZeroEmitter.
// Every GPU runs m = D / (N u) micro-steps in lockstep, one microbatch of the trace's u each; the recompute packs
// (Harmony's P_B; default: every layer) checkpoint their inputs to the host. The `estimate` is analytic (see
// analytic_estimate), with Harmony's estimator bandwidths.
#include "zero_emitter.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/params.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace memsim::harmony {
namespace {

struct ZeroOptions {
  int gpus = 0;      // 0: the machine's GPU count
  int minibatch = 0; // samples per iteration (D)
  std::string pack_bwd;
};

constexpr const char* kEstimateModel =
    "analytic: m micro-steps x sum over layers of max(compute: forward + recompute + backward, transfers: shards of "
    "W in (twice) and dW out at bw_swap/N per GPU, ring all-gathers and reduce-scatter of (N-1)/N |W_l| at bw_p2p) "
    "+ the CPU update of one shard per layer (ranks in parallel); zero-offload moves W once, after the update; "
    "bw_swap 11.5 GiB/s, bw_p2p 8.2 GiB/s (Harmony's estimator defaults)";

std::vector<LayerPack> recompute_packs(const std::string& text, std::size_t layers)
{
  if (!text.empty()) {
    std::vector<LayerPack> packs = parse_packs(text, "pack_bwd");
    if (packs.front().first != 0 || packs.back().last + 1 != layers)
      throw InputError("pack_bwd", fmt::format("the packs '{}' must cover layers 0-{}", text, layers - 1));
    return packs;
  }
  std::vector<LayerPack> every_layer;
  for (std::size_t l = 0; l < layers; ++l)
    every_layer.push_back({l, l});
  return every_layer;
}

double analytic_estimate(const Trace& trace, const LayerChainIds& chain, int gpus, int micro_steps, ZeroStage stage)
{
  const EstimatorSettings bandwidth;
  const double n = gpus;
  const double swap_share = bandwidth.bw_swap / n;
  double micro_step = 0;
  double update = 0;
  double refresh = 0; // zero-offload: the updated W in after the step
  for (std::size_t l = 0; l < chain.layers(); ++l) {
    double compute = 2 * trace.op(chain.forward[l]).time_s + trace.op(chain.backward[l]).time_s;
    if (chain.save[l])
      compute += trace.op(*chain.save[l]).time_s;
    double transfers = 0;
    if (chain.w[l]) {
      const double weight = static_cast<double>(trace.tensor(*chain.w[l]).bytes);
      const double shard = weight / n;
      const double ring = (n - 1) / n * weight / bandwidth.bw_p2p;
      transfers = shard / swap_share + ring; // dW: reduce-scatter, own shard out
      if (stage == ZeroStage::infinity)
        transfers += 2 * (shard / swap_share + ring);
      else
        refresh += shard / swap_share + ring;
      const Op& step = trace.op(*chain.update[l]);
      update += step.cpu_time_s.value_or(step.time_s) / n;
    }
    micro_step += std::max(compute, transfers);
  }
  return micro_step * micro_steps + update + refresh;
}

Plan plan_zero(const Trace& trace, const Machine& machine, const PlanRequest& request, const ZeroOptions& options,
               ZeroStage stage)
{
  const LayerChainIds chain = layer_chain_ids(trace, trace.name);
  const int gpus = options.gpus == 0 ? static_cast<int>(machine.gpus.size()) : options.gpus;
  if (gpus > static_cast<int>(machine.gpus.size()))
    throw InputError("gpus",
                     fmt::format("{} GPUs asked, machine '{}' has {}", gpus, machine.name, machine.gpus.size()));
  const int u = static_cast<int>(trace.source.batch);
  if (options.minibatch <= 0 || options.minibatch % (gpus * u) != 0)
    throw InputError("minibatch", fmt::format("{} samples do not split into {} GPUs x microbatches of {} (the trace's)",
                                              options.minibatch, gpus, u));
  const std::vector<LayerPack> packs = recompute_packs(options.pack_bwd, chain.layers());
  if (stage == ZeroStage::offload) {
    // ZeRO-Offload keeps every parameter on every GPU, plus one layer's full gradient before its reduce-scatter.
    std::uint64_t weights = 0;
    std::uint64_t largest_gradient = 0;
    for (std::size_t l = 0; l < chain.layers(); ++l)
      if (chain.w[l]) {
        weights += trace.tensor(*chain.w[l]).bytes;
        largest_gradient = std::max(largest_gradient, trace.tensor(*chain.dw[l]).bytes);
      }
    const std::uint64_t budget = request.budget_bytes > 0 ? request.budget_bytes : machine.gpus.front().memory;
    if (weights + largest_gradient > budget)
      throw Infeasible(fmt::format("zero-offload: the replicated parameters ({} bytes) and the largest layer "
                                   "gradient ({} bytes) exceed the GPU budget ({} bytes)",
                                   weights, largest_gradient, budget));
  }
  const int micro_steps = options.minibatch / (gpus * u);
  Plan plan;
  ZeroEmitter emit(trace, chain, gpus, stage, packs, plan);
  for (int i = 0; i < micro_steps; ++i) {
    std::vector<int> instances;
    for (int r = 0; r < gpus; ++r)
      instances.push_back(r * micro_steps + i);
    emit.micro_step(instances);
  }
  emit.update();
  plan.estimate.iteration_time_s = analytic_estimate(trace, chain, gpus, micro_steps, stage);
  plan.params["estimate_model"] = kEstimateModel;
  plan.params["configuration"] = {{"gpus", gpus},
                                  {"minibatch", options.minibatch},
                                  {"microbatch", u},
                                  {"micro_steps", micro_steps},
                                  {"pack_bwd", format_packs(packs)}};
  return plan;
}

Plan plan_zero_infinity(const Trace& trace, const Machine& machine, const PlanRequest& request,
                        const ZeroOptions& options)
{
  return plan_zero(trace, machine, request, options, ZeroStage::infinity);
}

Plan plan_zero_offload(const Trace& trace, const Machine& machine, const PlanRequest& request,
                       const ZeroOptions& options)
{
  return plan_zero(trace, machine, request, options, ZeroStage::offload);
}

ParamList<ZeroOptions> zero_params()
{
  using O = ZeroOptions;
  return {param("gpus", &O::gpus, "GPUs N (0: the machine's)", {.min = 0}),
          param("minibatch", &O::minibatch, "samples per iteration D (N x m microbatches of the trace's u)",
                {.min = 0}),
          param("pack_bwd", &O::pack_bwd,
                "recompute packs as Harmony's P_B, e.g. 0-3,4-7 (each pack's input is checkpointed to the host and "
                "its forward recomputed before its backward; empty: every layer)")};
}

} // namespace
} // namespace memsim::harmony

namespace memsim {

MEMSIM_REGISTER_PLANNER(zero_infinity, "zero-infinity",
                        "ZeRO-Infinity (Harmony's baseline): data parallel, W, dW and K partitioned across the GPUs "
                        "and kept in host memory; per layer each GPU brings its shard of W and all-gathers, dW "
                        "reduce-scattered and its shard offloaded, checkpoints per pack, CPU Adam per shard; "
                        "workload: memsim gen layer-chain",
                        harmony::zero_params(), harmony::plan_zero_infinity);
MEMSIM_REGISTER_PLANNER(zero_offload, "zero-offload",
                        "ZeRO-Offload: data parallel with W replicated on every GPU, dW reduce-scattered and "
                        "offloaded, K in host memory, CPU Adam per shard, updated shards brought in and all-gathered; "
                        "Infeasible when W does not fit one GPU; workload: memsim gen layer-chain",
                        harmony::zero_params(), harmony::plan_zero_offload);

} // namespace memsim
