#pragma once
// The per-GPU, LMS-style swapping that Harmony's baselines DP Swap, GP Swap and 2BW Swap share (spec §1.9), as plan
// steps over a layer-chain trace: a GPU runs a contiguous range of layers (the whole model in dp, a stage in a
// pipeline) one microbatch at a time; each layer's W is swapped in before use and dropped after, what the backward
// needs is swapped out and back in, dW goes out after every backward and comes back to accumulate. Stage boundaries
// (Y forward, dX backward) move by send/recv between neighbouring GPUs. The callers choose the order.
#include "memsim/common/params.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/traces/layer_chain.hpp"

#include <map>
#include <tuple>
#include <vector>

namespace memsim {

struct Machine;

namespace harmony {

// What the forward keeps for the backward: everything (swapped out), each layer's input (the layer is recomputed
// before its backward), or only the stage's input (the whole stage is recomputed before its backward).
enum class Recompute { none, per_layer, per_stage };

// Layers [first, last] on `gpu`; previous / next: the GPUs running the neighbouring stages (-1: none).
struct SwapStage {
  std::size_t first = 0;
  std::size_t last = 0;
  int gpu = 0;
  int previous = -1;
  int next = -1;
  // Recompute::per_stage: the recomputed activations of layers >= keep_saved_from stay on the GPU until their
  // backward; those of the earlier layers are swapped out and back in (LMS swaps what does not fit).
  std::size_t keep_saved_from = 0;
};

class LayerSwapEmitter {
public:
  LayerSwapEmitter(const LayerChainIds& chain, int gpus, Recompute recompute, Plan& plan);

  void forward(const SwapStage& stage, int instance);
  // accumulate: dW of the stage already went out once (swapped back in to accumulate).
  void backward(const SwapStage& stage, int instance, bool accumulate);
  // Per layer of [first, last]: every replica brings dW back, they all-reduce it (when several), each steps its
  // optimizer on the GPU with W and K swapped in, then swaps W and K out. `written`: the chain of the weight version
  // the update ops write (2BW's double buffer; weight_versions.hpp); null: W is updated in place.
  void update(std::size_t first, std::size_t last, const std::vector<int>& replicas,
              const LayerChainIds* written = nullptr);
  // The chain whose W, and the ops that read it, the following passes and updates use (a weight version).
  void use_weights(const LayerChainIds& chain);

private:
  using Deps = std::vector<StepId>;
  Deps lookahead(int gpu) const;
  StepId compute(OpId op, Deps deps, int gpu, int instance, bool again = false);
  StepId release(TensorId tensor, Deps deps, const std::string& stream, int gpu, int instance = 0);
  StepId copy_out(TensorId tensor, Deps after, int gpu, int instance);
  void swap_out(TensorId tensor, Deps after, int gpu, int instance);
  void drop_host_copy(TensorId tensor, StepId after, int gpu, int instance);
  Deps load_deps(TensorId tensor, int gpu, int instance) const;
  StepId swap_in(TensorId tensor, int gpu, int instance);
  StepId send(TensorId tensor, StepId producer, int gpu, int to, int instance);
  StepId receive(TensorId tensor, int gpu, int from, int instance);
  std::vector<StepId> recompute_stage(const SwapStage& stage, int instance);

  const LayerChainIds* chain_;
  Recompute recompute_;
  PlanBuilder build_;
  std::vector<std::vector<StepId>> computes_;
  std::vector<std::vector<StepId>> swapped_out_; // per GPU, the frees that end its swap-outs
  // (tensor, instance, GPU) -> the offload that made its host copy (each GPU waits for its own).
  std::map<std::tuple<TensorId, int, int>, StepId> host_;
  std::map<std::tuple<TensorId, int, int>, StepId> freed_; // the last free of (tensor, instance, GPU)
  std::map<std::pair<TensorId, int>, StepId> sends_;       // (tensor, instance) -> its send
};

// The parameters every swap baseline declares (gpus, minibatch, recompute); recompute_help says what recompute does.
struct SwapBaselineOptions {
  int gpus = 0;      // 0: the machine's GPU count
  int minibatch = 0; // samples per iteration (D)
  bool recompute = false;
  int iterations = 4; // pipedream2bw-swap only: minibatches emitted back to back (gpipe_swap.cpp says why 4)
};
// multi_iteration: also declare `iterations` (pipedream2bw-swap).
ParamList<SwapBaselineOptions> swap_baseline_params(std::string recompute_help, bool multi_iteration = false);

// The GPUs a swap baseline runs on (0: the machine's); throws InputError when the machine has fewer.
int swap_baseline_gpus(int asked, const Machine& machine);
// W, K and the data start on the host; W, dW and K are shared across instances (microbatches).
void init_swap_plan(Plan& plan);

} // namespace harmony
} // namespace memsim
