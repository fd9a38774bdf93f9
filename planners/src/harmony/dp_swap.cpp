// dp-swap: Harmony's "DP Swap" baseline (spec §1.9) as a static plan over a layer-chain trace: PyTorch DDP with a
// per-GPU swap of every layer's tensors (an LMS emulation at layer granularity). Every GPU runs m = D / (N u)
// microbatches one at a time with gradient accumulation through the host: forward per layer h2d W, compute, d2h
// of what the backward needs, free; backward in reverse per layer h2d W, the saved tensors and (from the second
// microbatch) dW, compute, d2h dW, free. After the last microbatch, per layer: h2d dW, all-reduce, h2d W and K,
// the optimizer step on the GPU, d2h W and K. Weight traffic per GPU is (4m + 2)|W| (W and dW, in and out).
// recompute=true swaps out only each layer's input and recomputes the layer's forward before its backward.
#include "swap_emitter.hpp"
#include "swap_estimate.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

namespace memsim {
namespace {

Plan plan_dp_swap(const Trace& trace, const Machine& machine, const PlanRequest&,
                  const harmony::SwapBaselineOptions& options)
{
  const LayerChainIds chain = layer_chain_ids(trace, trace.name);
  const int gpus = harmony::swap_baseline_gpus(options.gpus, machine);
  const int u = static_cast<int>(trace.source.batch);
  if (options.minibatch <= 0 || options.minibatch % (gpus * u) != 0)
    throw InputError("minibatch", fmt::format("{} samples do not split into {} GPUs x microbatches of {} (the trace's)",
                                              options.minibatch, gpus, u));
  Plan plan;
  harmony::init_swap_plan(plan);
  const int microbatches = options.minibatch / (gpus * u);
  const harmony::Recompute recompute = options.recompute ? harmony::Recompute::per_layer : harmony::Recompute::none;
  harmony::LayerSwapEmitter emit(chain, gpus, recompute, plan);
  std::vector<int> replicas;
  for (int gpu = 0; gpu < gpus; ++gpu)
    replicas.push_back(gpu);
  for (int i = 0; i < microbatches; ++i)
    for (int gpu = 0; gpu < gpus; ++gpu) {
      const harmony::SwapStage whole{0, chain.layers() - 1, gpu, -1, -1};
      emit.forward(whole, gpu * microbatches + i);
      emit.backward(whole, gpu * microbatches + i, i > 0);
    }
  emit.update(0, chain.layers() - 1, replicas);
  const harmony::SwapStage whole{0, chain.layers() - 1, 0, -1, -1};
  plan.estimate.iteration_time_s =
      harmony::compose_data_parallel(harmony::stage_pass_times(trace, chain, whole, recompute, gpus, gpus),
                                     microbatches);
  plan.params["estimate_model"] = harmony::kSwapEstimateModel;
  plan.params["configuration"] = {
      {"gpus", gpus}, {"minibatch", options.minibatch}, {"microbatch", u}, {"microbatches_per_gpu", microbatches}};
  return plan;
}

} // namespace

MEMSIM_REGISTER_PLANNER(
    dp_swap, "dp-swap",
    "DP Swap (Harmony's baseline): data parallel, every GPU swaps each layer's tensors in and out "
    "per microbatch, dW accumulated through the host, all-reduce and GPU update per layer; "
    "workload: memsim gen layer-chain",
    harmony::swap_baseline_params("swap out only each layer's input and recompute its forward before the backward"),
    plan_dp_swap);

} // namespace memsim
