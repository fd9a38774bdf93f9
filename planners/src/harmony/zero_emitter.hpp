#pragma once
// ZeRO (DeepSpeed) data parallelism over a layer-chain trace, the baselines zero-infinity and zero-offload of Harmony
// (spec §1.9, "Static emission recipes"): all N GPUs run in lockstep, one microbatch each per micro-step. Every
// layer's model states are partitioned across the GPUs: rank r owns the shards w.l/shard<r>, dw.l/shard<r> and
// k.l/shard<r> (1/N of the bytes each), all kept in host memory. The full W_l exists on a GPU only as the merge of its
// N shards: the own shard comes in from the host and the others arrive by a ring all-gather, expressed as
// send/recv of the shard tensors (the `allgather` step is in place on a full buffer already resident, so it cannot
// say that every GPU starts with only its shard). Gradients are reduce-scattered with the `reducescatter`
// collective on the full dW_l, split into shards, and only the own shard goes to the host.
#include "memsim/planners/harmony/estimator.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/traces/layer_chain.hpp"

#include <functional>
#include <map>
#include <tuple>
#include <vector>

namespace memsim::harmony {

// zero-infinity: W gathered from the host shards before every use and dropped after. zero-offload: W stays
// replicated on every GPU; after the CPU step each rank's updated shard comes in and is all-gathered.
enum class ZeroStage { infinity, offload };

class ZeroEmitter {
public:
  // `packs`: the recompute packs (checkpoint = the input of each pack); covers every layer.
  ZeroEmitter(const Trace& trace, const LayerChainIds& chain, int gpus, ZeroStage stage, std::vector<LayerPack> packs,
              Plan& plan);

  // One micro-step: every GPU r runs microbatch instance `instances[r]` forward, then backward pack by pack.
  void micro_step(const std::vector<int>& instances);
  // After the last micro-step: CPU Adam per shard on each rank's host stream (and, zero-offload, the new W in).
  void update();

private:
  using Deps = std::vector<StepId>;
  TensorId shard(const std::vector<std::vector<TensorId>>& shards, std::size_t l, int rank) const;
  // Every GPU gets the full W_l: its own shard from the host, the others by the ring; returns per GPU the merge.
  std::vector<StepId> gather(std::size_t l, const std::vector<Deps>& wait);
  // zero-infinity brings W_l in before every forward of layer l (the recompute too); zero-offload keeps it resident.
  bool gathers(std::size_t l) const;
  // What follows layer l's forward `made` on a GPU (frees, offloads, a save op); returns the GPU's new ready step.
  using AfterForward = std::function<StepId(int gpu, int instance, StepId made)>;
  // Layer l's forward (`again`: the recompute before the backward) on every GPU, after ready[gpu] and, when W_l is
  // gathered, its merge there; then `after` on that GPU before the next GPU's forward.
  void forward_layer(std::size_t l, const std::vector<int>& instances, std::vector<StepId>& ready, bool again,
                     const AfterForward& after);
  void forward(const std::vector<int>& instances);
  void backward(const LayerPack& pack, const std::vector<int>& instances);
  // Loads wait for the compute two before on their GPU (one layer of lookahead bounds what is in flight).
  Deps lookahead(int gpu) const;
  StepId compute(OpId op, Deps deps, int gpu, int instance, bool again);

  const LayerChainIds& chain_;
  int gpus_;
  ZeroStage stage_;
  std::vector<LayerPack> packs_;
  Plan& plan_;
  PlanBuilder build_;
  // [layer][rank] -> the extra shard tensors (empty for layers without weights)
  std::vector<std::vector<TensorId>> w_shards_, dw_shards_, k_shards_;
  std::vector<std::vector<StepId>> computes_;              // per GPU, its computes in order
  std::map<std::pair<std::size_t, int>, StepId> dw_out_;   // (layer, rank) -> the last offload of its dW shard
  std::map<std::tuple<TensorId, int, int>, StepId> freed_; // (tensor, instance, GPU) -> its last free
  std::map<std::pair<TensorId, int>, StepId> checkpoints_; // (x.l, instance) -> the offload making the host copy
  std::vector<OpId> cpu_updates_;                          // [layer * N + rank] -> the shard's CPU Adam op
};

// Bytes of shard `rank` of `bytes` split N ways: the first bytes % N shards take one byte more.
std::uint64_t shard_bytes(std::uint64_t bytes, int gpus, int rank);

} // namespace memsim::harmony
