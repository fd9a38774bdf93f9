// ZeRO data parallelism as plan steps (zero_emitter.hpp). Deadlock-free: steps are appended in one global order
// (layer by layer, all GPUs together, ring phase by ring phase), every dependency names an earlier step, and every
// (device, stream) runs its steps in that order.
#include "zero_emitter.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace memsim::harmony {
namespace {

Tensor shard_tensor(const Tensor& whole, int gpus, int rank, TensorId id)
{
  Tensor shard;
  shard.id = id;
  shard.name = fmt::format("{}/shard{}", whole.name, rank);
  shard.bytes = shard_bytes(whole.bytes, gpus, rank);
  shard.kind = whole.kind;
  return shard;
}

} // namespace

std::uint64_t shard_bytes(std::uint64_t bytes, int gpus, int rank)
{
  const auto n = static_cast<std::uint64_t>(gpus);
  return bytes / n + (static_cast<std::uint64_t>(rank) < bytes % n ? 1 : 0);
}

ZeroEmitter::ZeroEmitter(const Trace& trace, const LayerChainIds& chain, int gpus, ZeroStage stage,
                         std::vector<LayerPack> packs, Plan& plan)
    : chain_(chain), gpus_(gpus), stage_(stage), packs_(std::move(packs)), plan_(plan), build_(plan),
      w_shards_(chain.layers()), dw_shards_(chain.layers()), k_shards_(chain.layers()),
      computes_(static_cast<std::size_t>(gpus))
{
  // Every model state lives on the host as N shards; the full tensors are only ever assembled on GPUs (zero-offload:
  // W is replicated on every GPU from the start).
  plan_.initial_placement = {{TensorKind::weight, std::nullopt, Placement::host, std::nullopt},
                             {TensorKind::weight_grad, std::nullopt, Placement::host, std::nullopt},
                             {TensorKind::optimizer_state, std::nullopt, Placement::host, std::nullopt},
                             {TensorKind::input, std::nullopt, Placement::host, std::nullopt}};
  plan_.shared_across_instances = {TensorKind::weight, TensorKind::weight_grad, TensorKind::optimizer_state};
  const auto next_tensor = [&] { return static_cast<TensorId>(trace.tensors.size() + plan_.extra_tensors.size()); };
  const auto add_shards = [&](const std::optional<TensorId>& whole, std::vector<TensorId>& shards, Placement where) {
    if (!whole)
      return;
    plan_.initial_placement.push_back({std::nullopt, *whole, where, std::nullopt});
    for (int r = 0; r < gpus_; ++r) {
      shards.push_back(next_tensor());
      plan_.extra_tensors.push_back(shard_tensor(trace.tensor(*whole), gpus_, r, shards.back()));
    }
  };
  for (std::size_t l = 0; l < chain_.layers(); ++l) {
    add_shards(chain_.w[l], w_shards_[l], stage_ == ZeroStage::offload ? Placement::device : Placement::none);
    add_shards(chain_.dw[l], dw_shards_[l], Placement::none);
    add_shards(chain_.k[l], k_shards_[l], Placement::none);
  }
  // CPU Adam of one shard: 1/N of the layer's update, reading the rank's shards of W, dW and K on the host.
  for (std::size_t l = 0; l < chain_.layers(); ++l) {
    if (!chain_.update[l])
      continue;
    const Op& whole = trace.op(*chain_.update[l]);
    for (int r = 0; r < gpus_; ++r) {
      Op part;
      part.id = static_cast<OpId>(trace.ops.size() + plan_.extra_ops.size());
      part.name = fmt::format("{}/shard{}", whole.name, r);
      part.type = whole.type;
      part.phase = whole.phase;
      part.layer = whole.layer;
      part.inputs = {shard(w_shards_, l, r), shard(dw_shards_, l, r)};
      if (chain_.k[l])
        part.inputs.push_back(shard(k_shards_, l, r));
      part.time_s = whole.time_s / gpus_;
      if (whole.cpu_time_s)
        part.cpu_time_s = *whole.cpu_time_s / gpus_;
      part.split_of = SplitOf{whole.id, r, gpus_, "parameters"};
      cpu_updates_.push_back(part.id);
      plan_.extra_ops.push_back(std::move(part));
    }
  }
}

TensorId ZeroEmitter::shard(const std::vector<std::vector<TensorId>>& shards, std::size_t l, int rank) const
{
  return shards[l][static_cast<std::size_t>(rank)];
}

ZeroEmitter::Deps ZeroEmitter::lookahead(int gpu) const
{
  const std::vector<StepId>& done = computes_[static_cast<std::size_t>(gpu)];
  return done.size() >= 2 ? Deps{done[done.size() - 2]} : Deps{};
}

StepId ZeroEmitter::compute(OpId op, Deps deps, int gpu, int instance, bool again)
{
  const StepId step =
      again ? build_.recompute(op, std::move(deps), gpu, instance) : build_.compute(op, std::move(deps), gpu, instance);
  computes_[static_cast<std::size_t>(gpu)].push_back(step);
  return step;
}

// Ring all-gather of W_l's shards: in phase k GPU r passes shard (r - k) mod N to GPU r + 1, the one it got in the
// phase before (its own in phase 0); after N - 1 phases every GPU holds all N and merges them into W_l.
std::vector<StepId> ZeroEmitter::gather(std::size_t l, const std::vector<Deps>& wait)
{
  const TensorId whole = *chain_.w[l];
  const auto n = static_cast<std::size_t>(gpus_);
  std::vector<Deps> weight_gone(n); // the last free of W_l on each GPU: its shards may arrive again
  std::vector<std::vector<StepId>> holder(n, std::vector<StepId>(n, -1)); // [gpu][shard] -> what made it resident
  std::vector<Deps> sent(n);
  for (int r = 0; r < gpus_; ++r) {
    const auto gpu = static_cast<std::size_t>(r);
    if (const auto free = freed_.find({whole, 0, r}); free != freed_.end())
      weight_gone[gpu].push_back(free->second);
    Deps deps = lookahead(r);
    deps.insert(deps.end(), wait[gpu].begin(), wait[gpu].end());
    deps.insert(deps.end(), weight_gone[gpu].begin(), weight_gone[gpu].end());
    holder[gpu][gpu] = build_.prefetch(shard(w_shards_, l, r), std::move(deps), r);
  }
  for (int phase = 0; phase + 1 < gpus_; ++phase)
    for (int r = 0; r < gpus_; ++r) {
      const int part = ((r - phase) % gpus_ + gpus_) % gpus_;
      const int to = (r + 1) % gpus_;
      Deps deps{holder[static_cast<std::size_t>(r)][static_cast<std::size_t>(part)]};
      deps.insert(deps.end(), weight_gone[static_cast<std::size_t>(to)].begin(),
                  weight_gone[static_cast<std::size_t>(to)].end());
      const StepId send = build_.send(shard(w_shards_, l, part), to, std::move(deps), r);
      sent[static_cast<std::size_t>(r)].push_back(send);
      holder[static_cast<std::size_t>(to)][static_cast<std::size_t>(part)] =
          build_.recv(shard(w_shards_, l, part), r, {send}, to);
    }
  std::vector<StepId> merged;
  for (int r = 0; r < gpus_; ++r) {
    const auto gpu = static_cast<std::size_t>(r);
    Deps deps = holder[gpu];
    deps.insert(deps.end(), sent[gpu].begin(), sent[gpu].end());
    merged.push_back(build_.merge(whole, w_shards_[l], "p2p_in", std::move(deps), r));
  }
  return merged;
}

bool ZeroEmitter::gathers(std::size_t l) const { return stage_ == ZeroStage::infinity && chain_.w[l].has_value(); }

void ZeroEmitter::forward_layer(std::size_t l, const std::vector<int>& instances, std::vector<StepId>& ready,
                                bool again, const AfterForward& after)
{
  const bool gathered = gathers(l);
  const std::vector<StepId> weights =
      gathered ? gather(l, std::vector<Deps>(static_cast<std::size_t>(gpus_))) : std::vector<StepId>{};
  for (int r = 0; r < gpus_; ++r) {
    const auto gpu = static_cast<std::size_t>(r);
    const int instance = instances[gpu];
    Deps deps{ready[gpu]};
    if (gathered)
      deps.push_back(weights[gpu]);
    const StepId made = compute(chain_.forward[l], deps, r, instance, again);
    ready[gpu] = after(r, instance, made); // `after` still sees the step before in ready[gpu]
  }
}

void ZeroEmitter::forward(const std::vector<int>& instances)
{
  std::vector<StepId> ready;
  for (int r = 0; r < gpus_; ++r) {
    const int instance = instances[static_cast<std::size_t>(r)];
    ready.push_back(build_.prefetch(chain_.x[0], lookahead(r), r, instance)); // the data
  }
  for (std::size_t l = 0; l < chain_.layers(); ++l) {
    const bool checkpoint =
        l > 0 && std::any_of(packs_.begin(), packs_.end(), [&](const LayerPack& pack) { return pack.first == l; });
    forward_layer(l, instances, ready, false, [&](int r, int instance, StepId made) {
      const StepId before = ready[static_cast<std::size_t>(r)];
      if (checkpoint) { // the pack's input goes to the host for the backward's recompute
        const StepId offload = build_.offload(chain_.x[l], {before}, r, instance);
        checkpoints_[{chain_.x[l], instance}] = offload;
        freed_[{chain_.x[l], instance, r}] = build_.free(chain_.x[l], {offload, made}, "d2h", r, instance);
      } else {
        freed_[{chain_.x[l], instance, r}] = build_.free(chain_.x[l], {made}, "compute", r, instance);
      }
      if (gathers(l))
        freed_[{*chain_.w[l], 0, r}] = build_.free(*chain_.w[l], {made}, "compute", r);
      return made;
    });
  }
  for (int r = 0; r < gpus_; ++r) // the backward recomputes the loss
    build_.free(chain_.loss, {ready[static_cast<std::size_t>(r)]}, "compute", r,
                instances[static_cast<std::size_t>(r)]);
}

void ZeroEmitter::backward(const LayerPack& pack, const std::vector<int>& instances)
{
  std::vector<StepId> ready;
  for (int r = 0; r < gpus_; ++r) {
    const int instance = instances[static_cast<std::size_t>(r)];
    Deps deps = lookahead(r);
    if (pack.first > 0)
      deps.push_back(checkpoints_.at({chain_.x[pack.first], instance}));
    if (const auto free = freed_.find({chain_.x[pack.first], instance, r}); free != freed_.end())
      deps.push_back(free->second);
    ready.push_back(build_.prefetch(chain_.x[pack.first], std::move(deps), r, instance));
  }
  // The pack's forward again (each W gathered once more and kept until its layer's backward), then its backward.
  for (std::size_t l = pack.first; l <= pack.last; ++l)
    forward_layer(l, instances, ready, true, [&](int r, int instance, StepId made) {
      // the activations autograd keeps for the backward
      return chain_.save[l] ? compute(*chain_.save[l], {made}, r, instance, false) : made;
    });
  for (std::size_t l = pack.last + 1; l-- > pack.first;) {
    Deps computed;
    for (int r = 0; r < gpus_; ++r) {
      const auto gpu = static_cast<std::size_t>(r);
      const int instance = instances[gpu];
      const StepId made = compute(chain_.backward[l], {ready[gpu]}, r, instance, false);
      build_.free(chain_.output(l), {made}, "compute", r, instance);
      if (chain_.saved[l])
        build_.free(*chain_.saved[l], {made}, "compute", r, instance);
      if (l + 1 < chain_.layers())
        build_.free(*chain_.dx[l + 1], {made}, "compute", r, instance);
      if (l == pack.first)
        freed_[{chain_.x[l], instance, r}] = build_.free(chain_.x[l], {made}, "compute", r, instance);
      if (gathers(l))
        freed_[{*chain_.w[l], 0, r}] = build_.free(*chain_.w[l], {made}, "compute", r);
      ready[gpu] = made;
      computed.push_back(made);
    }
    if (!chain_.dw[l])
      continue;
    // dW_l reduce-scattered: each GPU keeps its shard of the sum and sends it to the host (which accumulates it).
    std::vector<int> ring;
    for (int r = 0; r < gpus_; ++r)
      ring.push_back(r);
    const StepId reduced = build_.collective(StepKind::reducescatter, *chain_.dw[l], std::move(ring), computed);
    for (int r = 0; r < gpus_; ++r) {
      const StepId parts = build_.split(*chain_.dw[l], dw_shards_[l], "d2h", {reduced}, r);
      for (int other = 0; other < gpus_; ++other)
        if (other != r)
          build_.free(shard(dw_shards_, l, other), {parts}, "d2h", r);
      const StepId offload = build_.offload(shard(dw_shards_, l, r), {parts}, r);
      dw_out_[{l, r}] = offload;
      build_.free(shard(dw_shards_, l, r), {offload}, "d2h", r);
    }
  }
}

void ZeroEmitter::micro_step(const std::vector<int>& instances)
{
  forward(instances);
  for (auto pack = packs_.rbegin(); pack != packs_.rend(); ++pack)
    backward(*pack, instances);
}

void ZeroEmitter::update()
{
  std::size_t next_op = 0;
  for (std::size_t l = 0; l < chain_.layers(); ++l) {
    if (!chain_.update[l])
      continue;
    std::vector<Deps> stepped(static_cast<std::size_t>(gpus_));
    for (int r = 0; r < gpus_; ++r) {
      const StepId adam =
          build_.compute(cpu_updates_[next_op++], {dw_out_.at({l, r})}, kHostDevice, 0, fmt::format("cpu{}", r));
      stepped[static_cast<std::size_t>(r)] = {adam};
    }
    if (stage_ != ZeroStage::offload)
      continue;
    // The replicated W_l is replaced by the updated shards: dropped, then gathered again (and kept).
    for (int r = 0; r < gpus_; ++r)
      freed_[{*chain_.w[l], 0, r}] = build_.free(*chain_.w[l], stepped[static_cast<std::size_t>(r)], "compute", r);
    gather(l, stepped);
  }
}

} // namespace memsim::harmony
