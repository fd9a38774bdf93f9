// dp-swap: Harmony's "DP Swap" baseline (spec §1.9) as a static plan over a layer-chain trace: PyTorch DDP with a
// per-GPU swap of every layer's tensors (an LMS emulation at layer granularity). Every GPU runs m = D / (N u)
// microbatches one at a time with gradient accumulation through the host: forward per layer h2d W, compute, d2h
// of what the backward needs, free; backward in reverse per layer h2d W, the saved tensors and (from the second
// microbatch) dW, compute, d2h dW, free. After the last microbatch, per layer: h2d dW, all-reduce, h2d W and K,
// the optimizer step on the GPU, d2h W and K. Weight traffic per GPU is (4m + 2)|W| (W and dW, in and out).
// recompute=true swaps out only each layer's input and recomputes the layer's forward before its backward.
#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/traces/layer_chain.hpp"

#include <fmt/format.h>

#include <map>
#include <tuple>

namespace memsim {
namespace {

struct DpSwapOptions {
  int gpus = 0;      // 0: the machine's GPU count
  int minibatch = 0; // samples per iteration (D)
  bool recompute = false;
};

using Deps = std::vector<StepId>;

class DpSwapEmitter {
public:
  DpSwapEmitter(const LayerChainIds& chain, int gpus, int microbatches, bool recompute, Plan& plan)
      : chain_(chain), gpus_(gpus), microbatches_(microbatches), recompute_(recompute), build_(plan),
        computes_(static_cast<std::size_t>(gpus)), swapped_out_(static_cast<std::size_t>(gpus))
  {
  }

  void run()
  {
    for (int i = 0; i < microbatches_; ++i)
      for (int gpu = 0; gpu < gpus_; ++gpu) {
        forward(gpu, gpu * microbatches_ + i);
        backward(gpu, gpu * microbatches_ + i, i > 0);
      }
    update();
  }

private:
  // Loads wait for the compute before the previous one on their GPU (one layer of lookahead).
  Deps lookahead(int gpu) const
  {
    const std::vector<StepId>& done = computes_[static_cast<std::size_t>(gpu)];
    return done.size() >= 2 ? Deps{done[done.size() - 2]} : Deps{};
  }

  // Computes also wait for the swap-out before the previous one to finish (LMS stalls when memory runs out; a
  // static plan bounds what is in flight instead).
  StepId compute(OpId op, Deps deps, int gpu, int instance, bool again = false)
  {
    const std::vector<StepId>& out = swapped_out_[static_cast<std::size_t>(gpu)];
    if (out.size() >= 2)
      deps.push_back(out[out.size() - 2]);
    const StepId step = again ? build_.recompute(op, std::move(deps), gpu, instance)
                              : build_.compute(op, std::move(deps), gpu, instance);
    computes_[static_cast<std::size_t>(gpu)].push_back(step);
    return step;
  }

  // A free that a later load of the same tensor on the GPU waits for (no double allocation).
  StepId release(TensorId tensor, Deps deps, const std::string& stream, int gpu, int instance = 0)
  {
    const StepId step = build_.free(tensor, std::move(deps), stream, gpu, instance);
    freed_[{tensor, instance, gpu}] = step;
    return step;
  }

  // Swapped out, then dropped from the GPU.
  void swap_out(TensorId tensor, Deps after, int gpu, int instance)
  {
    const StepId offload = build_.offload(tensor, std::move(after), gpu, instance);
    host_[{tensor, instance, gpu}] = offload;
    swapped_out_[static_cast<std::size_t>(gpu)].push_back(release(tensor, {offload}, "d2h", gpu, instance));
  }

  StepId swap_in(TensorId tensor, int gpu, int instance)
  {
    Deps deps = lookahead(gpu);
    if (const auto copy = host_.find({tensor, instance, gpu}); copy != host_.end())
      deps.push_back(copy->second);
    if (const auto free = freed_.find({tensor, instance, gpu}); free != freed_.end())
      deps.push_back(free->second);
    return build_.prefetch(tensor, deps, gpu, instance);
  }

  void forward(int gpu, int instance)
  {
    StepId input = swap_in(chain_.x[0], gpu, instance); // the data, from the host
    for (std::size_t l = 0; l < chain_.layers(); ++l) {
      Deps deps{input};
      if (chain_.w[l])
        deps.push_back(swap_in(*chain_.w[l], gpu, 0));
      const StepId made = compute(chain_.forward[l], deps, gpu, instance);
      StepId last = made;
      if (chain_.save[l]) { // reads x.l and w.l as the forward does
        last = compute(*chain_.save[l], {made}, gpu, instance);
        if (recompute_)
          release(*chain_.saved[l], {last}, "compute", gpu, instance);
        else
          swap_out(*chain_.saved[l], {last}, gpu, instance);
      }
      if (chain_.w[l])
        release(*chain_.w[l], {last}, "compute", gpu);
      // The layer's input is needed by its backward: swapped out once (the data is already on the host).
      if (l == 0)
        release(chain_.x[0], {last}, "compute", gpu, instance);
      else
        swap_out(chain_.x[l], {last}, gpu, instance);
      input = made;
    }
    const TensorId loss = chain_.output(chain_.layers() - 1);
    if (recompute_)
      release(loss, {input}, "compute", gpu, instance);
    else
      swap_out(loss, {input}, gpu, instance);
  }

  void backward(int gpu, int instance, bool accumulate)
  {
    StepId gradient = -1; // bwd of layer l+1 (dY resident)
    for (std::size_t l = chain_.layers(); l-- > 0;) {
      Deps deps;
      if (gradient >= 0)
        deps.push_back(gradient);
      if (chain_.w[l])
        deps.push_back(swap_in(*chain_.w[l], gpu, 0));
      deps.push_back(swap_in(chain_.x[l], gpu, instance));
      if (accumulate && chain_.dw[l])
        deps.push_back(swap_in(*chain_.dw[l], gpu, 0));
      StepId last = -1;
      if (recompute_) {
        last = compute(chain_.forward[l], deps, gpu, instance, true);
        if (chain_.save[l])
          last = compute(*chain_.save[l], {last}, gpu, instance);
        deps = {last};
      } else {
        deps.push_back(swap_in(chain_.output(l), gpu, instance));
        if (chain_.saved[l])
          deps.push_back(swap_in(*chain_.saved[l], gpu, instance));
      }
      gradient = compute(chain_.backward[l], deps, gpu, instance);
      for (TensorId done : {chain_.x[l], chain_.output(l)})
        release(done, {gradient}, "compute", gpu, instance);
      if (chain_.saved[l])
        release(*chain_.saved[l], {gradient}, "compute", gpu, instance);
      if (l + 1 < chain_.layers())
        release(*chain_.dx[l + 1], {gradient}, "compute", gpu, instance);
      if (chain_.w[l])
        release(*chain_.w[l], {gradient}, "compute", gpu);
      if (chain_.dw[l])
        swap_out(*chain_.dw[l], {gradient}, gpu, 0);
    }
  }

  // Per layer: every GPU brings dW back, the ring all-reduces it, every GPU steps its optimizer on its replica.
  void update()
  {
    for (std::size_t l = 0; l < chain_.layers(); ++l) {
      if (!chain_.update[l])
        continue;
      Deps loaded;
      for (int gpu = 0; gpu < gpus_; ++gpu)
        loaded.push_back(swap_in(*chain_.dw[l], gpu, 0));
      Deps reduced = loaded;
      if (gpus_ > 1) {
        Step step;
        step.kind = StepKind::allreduce;
        step.tensor = *chain_.dw[l];
        step.device = 0;
        step.stream = "coll";
        step.deps = loaded;
        for (int g = 0; g < gpus_; ++g)
          step.group.push_back(g);
        reduced = {build_.add(step)};
      }
      for (int gpu = 0; gpu < gpus_; ++gpu) {
        Deps deps = reduced;
        deps.push_back(swap_in(*chain_.w[l], gpu, 0));
        if (chain_.k[l])
          deps.push_back(swap_in(*chain_.k[l], gpu, 0));
        const StepId stepped = compute(*chain_.update[l], deps, gpu, 0);
        swap_out(*chain_.w[l], {stepped}, gpu, 0);
        if (chain_.k[l])
          swap_out(*chain_.k[l], {stepped}, gpu, 0);
        release(*chain_.dw[l], {stepped}, "compute", gpu);
      }
    }
  }

  const LayerChainIds& chain_;
  int gpus_;
  int microbatches_;
  bool recompute_;
  PlanBuilder build_;
  std::vector<std::vector<StepId>> computes_;
  std::vector<std::vector<StepId>> swapped_out_; // per GPU, the frees that end its swap-outs
  // (tensor, instance, GPU) -> the offload that made its host copy (each GPU waits for its own).
  std::map<std::tuple<TensorId, int, int>, StepId> host_;
  std::map<std::tuple<TensorId, int, int>, StepId> freed_; // the last free of (tensor, instance, GPU)
};

Plan plan_dp_swap(const Trace& trace, const Machine& machine, const PlanRequest&, const DpSwapOptions& options)
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
  Plan plan;
  plan.initial_placement = {{TensorKind::weight, std::nullopt, Placement::host, std::nullopt},
                            {TensorKind::optimizer_state, std::nullopt, Placement::host, std::nullopt},
                            {TensorKind::input, std::nullopt, Placement::host, std::nullopt}};
  plan.shared_across_instances = {TensorKind::weight, TensorKind::weight_grad, TensorKind::optimizer_state};
  const int microbatches = options.minibatch / (gpus * u);
  DpSwapEmitter(chain, gpus, microbatches, options.recompute, plan).run();
  plan.params["configuration"] = {
      {"gpus", gpus}, {"minibatch", options.minibatch}, {"microbatch", u}, {"microbatches_per_gpu", microbatches}};
  return plan;
}

} // namespace

MEMSIM_REGISTER_PLANNER(dp_swap, "dp-swap",
                        "DP Swap (Harmony's baseline): data parallel, every GPU swaps each layer's tensors in and out "
                        "per microbatch, dW accumulated through the host, all-reduce and GPU update per layer; "
                        "workload: memsim gen layer-chain",
                        {param("gpus", &DpSwapOptions::gpus, "GPUs N (0: the machine's)", {.min = 0}),
                         param("minibatch", &DpSwapOptions::minibatch, "samples per iteration D", {.min = 0}),
                         param("recompute", &DpSwapOptions::recompute,
                               "swap out only each layer's input and recompute its forward before the backward")},
                        plan_dp_swap);

} // namespace memsim
