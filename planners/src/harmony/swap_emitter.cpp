// The swapping shared by the swap baselines (swap_emitter.hpp): dp-swap runs the whole chain as one stage per GPU,
// gpipe-swap one stage per GPU with its neighbours' boundaries by send/recv.
#include "swap_emitter.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/machine.hpp"

#include <fmt/format.h>

namespace memsim::harmony {

LayerSwapEmitter::LayerSwapEmitter(const LayerChainIds& chain, int gpus, Recompute recompute, Plan& plan)
    : chain_(&chain), recompute_(recompute), build_(plan), computes_(static_cast<std::size_t>(gpus)),
      swapped_out_(static_cast<std::size_t>(gpus))
{
}

// Loads wait for the compute before the previous one on their GPU (one layer of lookahead).
LayerSwapEmitter::Deps LayerSwapEmitter::lookahead(int gpu) const
{
  const std::vector<StepId>& done = computes_[static_cast<std::size_t>(gpu)];
  return done.size() >= 2 ? Deps{done[done.size() - 2]} : Deps{};
}

// Computes also wait for the swap-out before the previous one to finish (LMS stalls when memory runs out; a static
// plan bounds what is in flight instead).
StepId LayerSwapEmitter::compute(OpId op, Deps deps, int gpu, int instance, bool again)
{
  const std::vector<StepId>& out = swapped_out_[static_cast<std::size_t>(gpu)];
  if (out.size() >= 2)
    deps.push_back(out[out.size() - 2]);
  const StepId step =
      again ? build_.recompute(op, std::move(deps), gpu, instance) : build_.compute(op, std::move(deps), gpu, instance);
  computes_[static_cast<std::size_t>(gpu)].push_back(step);
  return step;
}

// A free that a later load of the same tensor on the GPU waits for (no double allocation).
StepId LayerSwapEmitter::release(TensorId tensor, Deps deps, const std::string& stream, int gpu, int instance)
{
  const StepId step = build_.free(tensor, std::move(deps), stream, gpu, instance);
  freed_[{tensor, instance, gpu}] = step;
  return step;
}

// The host copy a later swap-in on this GPU waits for.
StepId LayerSwapEmitter::copy_out(TensorId tensor, Deps after, int gpu, int instance)
{
  const StepId offload = build_.offload(tensor, std::move(after), gpu, instance);
  host_[{tensor, instance, gpu}] = offload;
  return offload;
}

// Swapped out, then dropped from the GPU.
void LayerSwapEmitter::swap_out(TensorId tensor, Deps after, int gpu, int instance)
{
  const StepId offload = copy_out(tensor, std::move(after), gpu, instance);
  swapped_out_[static_cast<std::size_t>(gpu)].push_back(release(tensor, {offload}, "d2h", gpu, instance));
}

// What a load of `tensor` onto `gpu` waits for: the lookahead, its host copy, and its last free there.
LayerSwapEmitter::Deps LayerSwapEmitter::load_deps(TensorId tensor, int gpu, int instance) const
{
  Deps deps = lookahead(gpu);
  if (const auto copy = host_.find({tensor, instance, gpu}); copy != host_.end())
    deps.push_back(copy->second);
  if (const auto free = freed_.find({tensor, instance, gpu}); free != freed_.end())
    deps.push_back(free->second);
  return deps;
}

StepId LayerSwapEmitter::swap_in(TensorId tensor, int gpu, int instance)
{
  return build_.prefetch(tensor, load_deps(tensor, gpu, instance), gpu, instance);
}

StepId LayerSwapEmitter::send(TensorId tensor, StepId producer, int gpu, int to, int instance)
{
  const StepId sent = build_.send(tensor, to, {producer}, gpu, instance);
  sends_[{tensor, instance}] = sent;
  return sent;
}

// Received as a swap-in would load it: one layer of lookahead on the receiving GPU.
StepId LayerSwapEmitter::receive(TensorId tensor, int gpu, int from, int instance)
{
  Deps deps = load_deps(tensor, gpu, instance);
  deps.push_back(sends_.at({tensor, instance}));
  return build_.recv(tensor, from, std::move(deps), gpu, instance);
}

void LayerSwapEmitter::forward(const SwapStage& stage, int instance)
{
  const int gpu = stage.gpu;
  StepId input = stage.previous < 0 ? swap_in(chain_->x[stage.first], gpu, instance) // the data, from the host
                                    : receive(chain_->x[stage.first], gpu, stage.previous, instance);
  for (std::size_t l = stage.first; l <= stage.last; ++l) {
    Deps deps{input};
    if (chain_->w[l])
      deps.push_back(swap_in(*chain_->w[l], gpu, 0));
    const StepId made = compute(chain_->forward[l], deps, gpu, instance);
    StepId last = made;
    if (chain_->save[l]) { // reads x.l and w.l as the forward does
      last = compute(*chain_->save[l], {made}, gpu, instance);
      if (recompute_ == Recompute::none)
        swap_out(*chain_->saved[l], {last}, gpu, instance);
      else
        release(*chain_->saved[l], {last}, "compute", gpu, instance);
    }
    if (chain_->w[l])
      release(*chain_->w[l], {last}, "compute", gpu);
    // The layer's input is needed by its backward: swapped out once (the data is already on the host); a stage
    // recomputed as a whole keeps only its own input.
    if (l == 0 || (recompute_ == Recompute::per_stage && l != stage.first))
      release(chain_->x[l], {last}, "compute", gpu, instance);
    else
      swap_out(chain_->x[l], {last}, gpu, instance);
    input = made;
  }
  const TensorId output = chain_->output(stage.last);
  if (stage.next >= 0) {
    // Y to the next stage; without recompute this GPU's backward reads it too, so a copy goes to the host.
    Deps after{send(output, input, gpu, stage.next, instance)};
    if (recompute_ == Recompute::none)
      after.push_back(copy_out(output, {input}, gpu, instance));
    release(output, after, "p2p_out", gpu, instance);
  } else if (recompute_ == Recompute::none) {
    swap_out(output, {input}, gpu, instance);
  } else {
    release(output, {input}, "compute", gpu, instance);
  }
}

// The stage's forward again from its swapped-out input, every activation kept for the backward that follows;
// returns, per layer of the stage, the step after which the layer's activations exist.
std::vector<StepId> LayerSwapEmitter::recompute_stage(const SwapStage& stage, int instance)
{
  std::vector<StepId> made_by;
  StepId input = swap_in(chain_->x[stage.first], stage.gpu, instance);
  for (std::size_t l = stage.first; l <= stage.last; ++l) {
    Deps deps{input};
    if (chain_->w[l])
      deps.push_back(swap_in(*chain_->w[l], stage.gpu, 0));
    input = compute(chain_->forward[l], deps, stage.gpu, instance, true);
    StepId last = input;
    if (chain_->save[l]) {
      last = compute(*chain_->save[l], {input}, stage.gpu, instance);
      if (l < stage.keep_saved_from)
        swap_out(*chain_->saved[l], {last}, stage.gpu, instance);
    }
    if (chain_->w[l])
      release(*chain_->w[l], {last}, "compute", stage.gpu);
    made_by.push_back(last);
  }
  return made_by;
}

void LayerSwapEmitter::backward(const SwapStage& stage, int instance, bool accumulate)
{
  const int gpu = stage.gpu;
  // bwd of layer l+1 (dY resident), or dY received from the next stage
  StepId gradient = stage.next >= 0 ? receive(*chain_->dx[stage.last + 1], gpu, stage.next, instance) : -1;
  const std::vector<StepId> recomputed =
      recompute_ == Recompute::per_stage ? recompute_stage(stage, instance) : std::vector<StepId>{};
  for (std::size_t l = stage.last + 1; l-- > stage.first;) {
    Deps deps;
    if (gradient >= 0)
      deps.push_back(gradient);
    if (chain_->w[l])
      deps.push_back(swap_in(*chain_->w[l], gpu, 0));
    if (recompute_ != Recompute::per_stage)
      deps.push_back(swap_in(chain_->x[l], gpu, instance));
    if (accumulate && chain_->dw[l])
      deps.push_back(swap_in(*chain_->dw[l], gpu, 0));
    if (recompute_ == Recompute::per_layer) {
      StepId last = compute(chain_->forward[l], deps, gpu, instance, true);
      if (chain_->save[l])
        last = compute(*chain_->save[l], {last}, gpu, instance);
      deps = {last};
    } else if (recompute_ == Recompute::none) {
      deps.push_back(swap_in(chain_->output(l), gpu, instance));
      if (chain_->saved[l])
        deps.push_back(swap_in(*chain_->saved[l], gpu, instance));
    } else {
      deps.push_back(recomputed[l - stage.first]);
      if (chain_->saved[l] && l < stage.keep_saved_from)
        deps.push_back(swap_in(*chain_->saved[l], gpu, instance));
    }
    gradient = compute(chain_->backward[l], deps, gpu, instance);
    // Swapped-in copies go after use; recomputed activations stay until the layer below has read its output.
    if (recompute_ != Recompute::per_stage || l == stage.first)
      release(chain_->x[l], {gradient}, "compute", gpu, instance);
    release(chain_->output(l), {gradient}, "compute", gpu, instance);
    if (chain_->saved[l])
      release(*chain_->saved[l], {gradient}, "compute", gpu, instance);
    if (l + 1 < chain_->layers())
      release(*chain_->dx[l + 1], {gradient}, "compute", gpu, instance);
    if (chain_->w[l])
      release(*chain_->w[l], {gradient}, "compute", gpu);
    if (chain_->dw[l])
      swap_out(*chain_->dw[l], {gradient}, gpu, 0);
  }
  if (stage.previous >= 0) { // dX to the previous stage
    const TensorId dx = *chain_->dx[stage.first];
    release(dx, {send(dx, gradient, gpu, stage.previous, instance)}, "p2p_out", gpu, instance);
  }
  // The microbatch's activations are dead once the stage's backward is done: drop their host copies, as LMS frees
  // a swapped tensor with its last use (kept, the host would hold every microbatch's activations at once). The
  // host holds one copy per (instance, tensor): without recompute a received stage input is also the previous
  // stage's output, swapped out there too, which that stage drops after its own backward, the later one.
  const bool input_dropped_upstream = stage.previous >= 0 && recompute_ == Recompute::none;
  for (std::size_t l = stage.first; l <= stage.last; ++l) {
    if (l > stage.first || !input_dropped_upstream)
      drop_host_copy(chain_->x[l], gradient, gpu, instance);
    if (chain_->saved[l])
      drop_host_copy(*chain_->saved[l], gradient, gpu, instance);
  }
  drop_host_copy(chain_->output(stage.last), gradient, gpu, instance);
}

// Frees the host copy this GPU swapped out of `tensor` (none: nothing to do), on a host stream of that GPU's own.
void LayerSwapEmitter::drop_host_copy(TensorId tensor, StepId after, int gpu, int instance)
{
  const auto copy = host_.find({tensor, instance, gpu});
  if (copy == host_.end())
    return;
  build_.free(tensor, {after}, fmt::format("host-free{}", gpu), kHostDevice, instance);
  host_.erase(copy);
}

void LayerSwapEmitter::use_weights(const LayerChainIds& chain) { chain_ = &chain; }

void LayerSwapEmitter::update(std::size_t first, std::size_t last, const std::vector<int>& replicas,
                              const LayerChainIds* written)
{
  for (std::size_t l = first; l <= last; ++l) {
    if (!chain_->update[l])
      continue;
    Deps loaded;
    for (int gpu : replicas)
      loaded.push_back(swap_in(*chain_->dw[l], gpu, 0));
    Deps reduced = loaded;
    if (replicas.size() > 1)
      reduced = {build_.collective(StepKind::allreduce, *chain_->dw[l], replicas, loaded)};
    for (int gpu : replicas) {
      Deps deps = reduced;
      deps.push_back(swap_in(*chain_->w[l], gpu, 0));
      if (chain_->k[l])
        deps.push_back(swap_in(*chain_->k[l], gpu, 0));
      const StepId stepped = compute(*chain_->update[l], deps, gpu, 0);
      if (written) { // the step wrote the other version; the one it read stays on the host
        swap_out(*written->w[l], {stepped}, gpu, 0);
        release(*chain_->w[l], {stepped}, "compute", gpu);
      } else {
        swap_out(*chain_->w[l], {stepped}, gpu, 0);
      }
      if (chain_->k[l])
        swap_out(*chain_->k[l], {stepped}, gpu, 0);
      release(*chain_->dw[l], {stepped}, "compute", gpu);
    }
  }
}

ParamList<SwapBaselineOptions> swap_baseline_params(std::string recompute_help, bool multi_iteration)
{
  std::vector<BoundParam<SwapBaselineOptions>> params{
      param("gpus", &SwapBaselineOptions::gpus, "GPUs N (0: the machine's)", {.min = 0}),
      param("minibatch", &SwapBaselineOptions::minibatch, "samples per iteration D", {.min = 0}),
      param("recompute", &SwapBaselineOptions::recompute, std::move(recompute_help))};
  if (multi_iteration)
    params.push_back(param("iterations", &SwapBaselineOptions::iterations,
                           "minibatches run back to back without a flush (1: one iteration, one weight version); "
                           "the core's steady_iteration_time_s averages all but the first",
                           {.min = 1, .max = 1000}));
  return ParamList<SwapBaselineOptions>(std::move(params));
}

int swap_baseline_gpus(int asked, const Machine& machine)
{
  const int gpus = asked == 0 ? static_cast<int>(machine.gpus.size()) : asked;
  if (gpus > static_cast<int>(machine.gpus.size()))
    throw InputError("gpus",
                     fmt::format("{} GPUs asked, machine '{}' has {}", gpus, machine.name, machine.gpus.size()));
  return gpus;
}

void init_swap_plan(Plan& plan)
{
  plan.initial_placement = {{TensorKind::weight, std::nullopt, Placement::host, std::nullopt},
                            {TensorKind::optimizer_state, std::nullopt, Placement::host, std::nullopt},
                            {TensorKind::input, std::nullopt, Placement::host, std::nullopt}};
  plan.shared_across_instances = {TensorKind::weight, TensorKind::weight_grad, TensorKind::optimizer_state};
}

} // namespace memsim::harmony
