// Harmony's task graph as a plan (plan_emission.hpp). Deadlock-free: steps are appended in global task order, so
// every (device, stream) runs its tasks in that order and each send, offload or collective precedes (in list order
// and in its producer's stream) the step that waits for it; a send is appended with its receive, after the consumer
// steps it waits for, so every dependency still points back in the list.
#include "plan_emission.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

namespace memsim::harmony {
namespace {

using Deps = std::vector<StepId>;

struct RankState {
  Deps task_done;           // the frees that end the previous task (what W waits for without prefetch)
  StepId last_compute = -1; // the previous task's last compute (what W waits for with prefetch)
};

class Emitter {
public:
  Emitter(const MicrobatchChains& chains, const TaskGraph& graph, Mode mode, const EmissionSwitches& switches,
          Plan& plan)
      : chain_(chains.backward), forward_chain_(chains.forward), graph_(graph), mode_(mode), switches_(switches),
        plan_(plan), build_(plan), ranks_(static_cast<std::size_t>(graph.gpus)),
        resplit_(chains.forward.x != chains.backward.x)
  {
    if (resplit_)
      place_resplit_inputs();
  }

  void run()
  {
    const int copies = mode_ == Mode::dp ? graph_.gpus : 1;
    std::vector<std::pair<int, int>> deferred_updates; // (task, device) without jit update
    for (std::size_t t = 0; t < graph_.tasks.size(); ++t) {
      const Task& task = graph_.tasks[t];
      if (task.type == TaskType::update) {
        if (!switches_.optimizer_offload)
          continue; // done on the GPU with the backward
        if (switches_.jit_update)
          update(task, mode_ == Mode::dp ? 0 : task.rank);
        else
          deferred_updates.emplace_back(static_cast<int>(t), mode_ == Mode::dp ? 0 : task.rank);
        continue;
      }
      std::vector<Deps> last_backward(static_cast<std::size_t>(copies));
      for (int copy = 0; copy < copies; ++copy) {
        const int device = mode_ == Mode::dp ? copy : task.rank;
        const int first_instance = mode_ == Mode::dp ? copy * microbatches(task) : 0;
        if (task.type == TaskType::forward)
          forward(static_cast<int>(t), device, first_instance);
        else
          last_backward[static_cast<std::size_t>(copy)] = backward(static_cast<int>(t), device, first_instance);
      }
      if (task.type == TaskType::backward)
        finish_backward(task, last_backward);
    }
    backward_end_ = static_cast<StepId>(plan_.steps.size()) - 1;
    for (const auto& [t, device] : deferred_updates)
      update(graph_.tasks[static_cast<std::size_t>(t)], device);
  }

private:
  static int microbatches(const Task& task) { return static_cast<int>(task.microbatches.size()); }
  const LayerChainIds& chain_of(const Task& task) const
  {
    return task.type == TaskType::forward ? forward_chain_ : chain_;
  }
  int device_of(int task, int device) const
  {
    return mode_ == Mode::dp ? device : graph_.tasks[static_cast<std::size_t>(task)].rank;
  }
  Channel channel(const Link& link) const
  {
    return link.channel == Channel::p2p && !switches_.p2p ? Channel::swap : link.channel;
  }

  Deps weight_wait(int device) const
  {
    const RankState& rank = ranks_[static_cast<std::size_t>(device)];
    if (switches_.prefetch)
      return rank.last_compute >= 0 ? Deps{rank.last_compute} : Deps{};
    return rank.task_done;
  }

  // Without grouping (the ablation) W comes in again for every microbatch: the previous microbatch's copy is freed
  // after its last compute and the new load waits for that free.
  Deps reload_weights(const LayerPack& pack, int device, StepId last_compute)
  {
    Deps frees;
    for (std::size_t l = pack.first; l <= pack.last; ++l)
      if (chain_.w[l])
        frees.push_back(build_.free(*chain_.w[l], {last_compute}, "compute", device));
    Deps loads;
    for (std::size_t l = pack.first; l <= pack.last; ++l)
      if (chain_.w[l])
        loads.push_back(build_.prefetch(*chain_.w[l], frees, device));
    return loads;
  }

  Deps load_weights(const LayerPack& pack, int device)
  {
    Deps loads;
    for (std::size_t l = pack.first; l <= pack.last; ++l)
      if (chain_.w[l])
        loads.push_back(build_.prefetch(*chain_.w[l], weight_wait(device), device));
    return loads;
  }

  // A boundary tensor arriving on `device` for instance `instance`: send and recv, or swap-in of the host copy. The
  // send is a rendezvous, as Harmony's runtime (NCCL broadcast in 2-rank groups, runtime p2p.py): it moves when the
  // consumer posts the receive, which it does under the same throttle as a swap-in (double-buffered with prefetch,
  // one at a time without). Until then the tensor waits on its producer, not on the consumer: a consumer holds at
  // most two incoming microbatches, whatever D. The first ones wait for the consumer's previous task to end.
  StepId bring_in(TensorId tensor, int instance, int device, Channel how, int from_device, Deps throttle)
  {
    if (how == Channel::p2p) {
      const auto pending = unsent_.find({tensor, instance});
      if (pending == unsent_.end())
        throw std::logic_error("a p2p receive before its producer");
      Deps deps{pending->second};
      const Deps& consumer_free = throttle.empty() ? ranks_[static_cast<std::size_t>(device)].task_done : throttle;
      deps.insert(deps.end(), consumer_free.begin(), consumer_free.end());
      const StepId send = build_.send(tensor, device, std::move(deps), from_device, instance);
      build_.free(tensor, {send}, "p2p_out", from_device, instance);
      unsent_.erase(pending);
      return build_.recv(tensor, from_device, {send}, device, instance);
    }
    if (how != Channel::data) {
      const Deps copies = host_copy(tensor, instance);
      throttle.insert(throttle.end(), copies.begin(), copies.end());
    }
    return build_.prefetch(tensor, throttle, device, instance);
  }

  // A boundary tensor leaving `device` after `producer`: over p2p, sent when its consumer receives it (bring_in);
  // else swapped out and freed here.
  void hand_over(TensorId tensor, int instance, int device, Channel how, StepId producer)
  {
    if (how == Channel::p2p) {
      unsent_[{tensor, instance}] = producer;
      return;
    }
    const StepId offload = build_.offload(tensor, {producer}, device, instance);
    host_copies_[{tensor, instance}] = offload;
    build_.free(tensor, {offload}, "d2h", device, instance);
  }

  // U_F != U_B: the host re-splits what forward microbatches leave for the backward into backward microbatches
  // (Harmony's UBSConverter, a CPU copy that memsim's single host memory makes free). memsim's steps cannot move a
  // host copy from one instance to another, so the backward microbatches' copies of those tensors are placed on the
  // host from t = 0 (place_resplit_inputs), each prefetch waits for the offloads of the forward microbatches whose
  // samples it holds (host_copy), and the forward copy is freed once offloaded (here). The host thus holds every
  // re-split tensor from the start instead of from its forward: its peak, reached when the forward pass ends with
  // all of them, is the same, plus the forward copies in flight.
  void place_resplit_inputs()
  {
    for (const Task& task : graph_.tasks)
      if (task.type == TaskType::backward && task.pack.first > 0)
        plan_.initial_placement.push_back({std::nullopt, chain_.x[task.pack.first], Placement::host, std::nullopt});
  }

  void hand_to_backward(TensorId tensor, int instance, int device)
  {
    if (resplit_)
      build_.free(tensor, {host_copies_.at({tensor, instance})}, fmt::format("host-free{}", device), kHostDevice,
                  instance);
  }

  // The offloads a prefetch of the host copy of `tensor` (instance) waits for.
  Deps host_copy(TensorId tensor, int instance) const
  {
    const auto own = host_copies_.find({tensor, instance});
    if (own != host_copies_.end() || !resplit_)
      return {host_copies_.at({tensor, instance})};
    const auto layer = std::find(chain_.x.begin(), chain_.x.end(), tensor);
    if (layer == chain_.x.end())
      throw std::logic_error("re-split of a tensor that is no layer input");
    const TensorId forward_tensor = forward_chain_.x[static_cast<std::size_t>(layer - chain_.x.begin())];
    // Instances count microbatches rank by rank (dp: rank r's are r * count + i); samples are numbered within a rank.
    const auto backward_count = static_cast<int>(graph_.microbatches_backward.size());
    const auto forward_count = static_cast<int>(graph_.microbatches_forward.size());
    const int rank = instance / backward_count;
    const int local = instance % backward_count;
    int first = 0;
    for (int j = 0; j < local; ++j)
      first += graph_.microbatches_backward[static_cast<std::size_t>(j)];
    const int end = first + graph_.microbatches_backward[static_cast<std::size_t>(local)];
    Deps offloads;
    int start = 0;
    for (int i = 0; i < forward_count; ++i) {
      const int stop = start + graph_.microbatches_forward[static_cast<std::size_t>(i)];
      if (start < end && first < stop)
        offloads.push_back(host_copies_.at({forward_tensor, rank * forward_count + i}));
      start = stop;
    }
    return offloads;
  }

  // Inputs wait for the previous microbatch's compute (one in flight) or, with prefetch, the one before it.
  Deps input_throttle(const std::vector<StepId>& computes, const Deps& weights) const
  {
    const std::size_t back = switches_.prefetch ? 2 : 1;
    if (computes.size() >= back)
      return {computes[computes.size() - back]};
    return switches_.prefetch ? Deps{} : weights;
  }

  // What a task's microbatch starts from: its instance, the throttle its inputs wait on, its input on this device and
  // the weight loads its first compute must wait for (none when grouping already waited on them).
  struct MicrobatchStart {
    int instance;
    Deps throttle;
    StepId input;
    Deps weights;
  };

  // The frame forward and backward tasks share: W loaded once per task (per microbatch without grouping), each
  // microbatch's input brought in under the throttle. `emit` writes the microbatch and returns its last compute.
  template <typename Emit>
  StepId for_each_microbatch(const Task& task, int device, int first_instance, Emit&& emit)
  {
    const LayerPack pack = task.pack;
    Deps weights = load_weights(pack, device);
    const int from = task.input.task >= 0 ? device_of(task.input.task, device) : device;
    std::vector<StepId> last_computes;
    StepId compute = -1;
    for (int i = 0; i < microbatches(task); ++i) {
      const int instance = first_instance + i;
      if (!switches_.group && i > 0)
        weights = reload_weights(pack, device, compute);
      MicrobatchStart start{instance, input_throttle(last_computes, weights), -1, {}};
      start.input = bring_in(chain_of(task).x[pack.first], instance, device, channel(task.input), from, start.throttle);
      if (i == 0 || !switches_.group)
        start.weights = weights;
      compute = emit(start);
      last_computes.push_back(compute);
    }
    return compute;
  }

  void forward(int t, int device, int first_instance)
  {
    const Task& task = graph_.tasks[static_cast<std::size_t>(t)];
    const LayerPack pack = task.pack;
    const LayerChainIds& chain = forward_chain_;
    const StepId last = for_each_microbatch(task, device, first_instance, [&](const MicrobatchStart& start) {
      StepId ready = start.input;
      StepId compute = -1;
      for (std::size_t l = pack.first; l <= pack.last; ++l) {
        Deps deps{ready};
        deps.insert(deps.end(), start.weights.begin(), start.weights.end());
        compute = build_.compute(chain.forward[l], deps, device, start.instance);
        const bool stashed =
            std::any_of(task.stashes.begin(), task.stashes.end(), [&](const auto& stash) { return stash.first == l; });
        // Stashed even when the host holds a copy (the data, a swapped-in input), as Harmony's FWD task does.
        if (stashed) {
          const StepId offload = build_.offload(chain.x[l], {ready}, device, start.instance);
          host_copies_[{chain.x[l], start.instance}] = offload;
          build_.free(chain.x[l], {offload, compute}, "d2h", device, start.instance);
          hand_to_backward(chain.x[l], start.instance, device);
        } else {
          build_.free(chain.x[l], {compute}, "compute", device, start.instance);
        }
        ready = compute;
      }
      const TensorId output = chain.output(pack.last);
      hand_over(output, start.instance, device, channel(task.output), compute);
      if (graph_.tasks[static_cast<std::size_t>(task.output.task)].type == TaskType::backward)
        hand_to_backward(output, start.instance, device);
      return compute;
    });
    end_task(pack, device, last);
  }

  // The frees of a task's weights end it on its rank.
  void end_task(const LayerPack& pack, int device, StepId last_compute)
  {
    RankState& rank = ranks_[static_cast<std::size_t>(device)];
    rank.task_done.clear();
    rank.last_compute = last_compute;
    for (std::size_t l = pack.first; l <= pack.last; ++l)
      if (chain_.w[l])
        rank.task_done.push_back(build_.free(*chain_.w[l], {last_compute}, "compute", device));
    if (rank.task_done.empty())
      rank.task_done.push_back(last_compute);
  }

  // Returns the last compute of the task on `device`.
  Deps backward(int t, int device, int first_instance)
  {
    const Task& task = graph_.tasks[static_cast<std::size_t>(t)];
    const LayerPack pack = task.pack;
    const StepId last = for_each_microbatch(task, device, first_instance, [&](const MicrobatchStart& start) {
      // The criterion runs its forward; the others get the stashed input (through the host) and dY.
      Deps deps{start.input};
      if (!task.has_criterion) {
        const TensorId gradient = *chain_.dx[pack.last + 1];
        const int source = device_of(task.gradient_in.task, device);
        deps.push_back(bring_in(gradient, start.instance, device, channel(task.gradient_in), source, start.throttle));
      }
      deps.insert(deps.end(), start.weights.begin(), start.weights.end());
      StepId compute = -1;
      for (std::size_t l = pack.first; l <= pack.last; ++l) {
        compute = task.has_criterion ? build_.compute(chain_.forward[l], deps, device, start.instance)
                                     : build_.recompute(chain_.forward[l], deps, device, start.instance);
        if (chain_.save[l]) // the activations autograd keeps for the backward
          compute = build_.compute(*chain_.save[l], {compute}, device, start.instance);
        deps = {compute};
      }
      for (std::size_t l = pack.last + 1; l-- > pack.first;) {
        compute = build_.compute(chain_.backward[l], {compute}, device, start.instance);
        build_.free(chain_.output(l), {compute}, "compute", device, start.instance);
        if (chain_.saved[l])
          build_.free(*chain_.saved[l], {compute}, "compute", device, start.instance);
        if (l + 1 < chain_.layers())
          build_.free(*chain_.dx[l + 1], {compute}, "compute", device, start.instance);
      }
      build_.free(chain_.x[pack.first], {compute}, "compute", device, start.instance);
      if (pack.first > 0) {
        hand_over(*chain_.dx[pack.first], start.instance, device, channel(task.gradient_out), compute);
      }
      return compute;
    });
    ranks_[static_cast<std::size_t>(device)].last_compute = last;
    return {last};
  }

  // dW of the pack: all-reduced (dp), swapped out by the updating rank (or every rank); W and dW freed everywhere.
  void finish_backward(const Task& task, const std::vector<Deps>& last_backward)
  {
    const int copies = static_cast<int>(last_backward.size());
    std::vector<Deps> done(static_cast<std::size_t>(copies));
    for (std::size_t l = task.pack.first; l <= task.pack.last; ++l) {
      const bool gpu_update = !switches_.optimizer_offload && chain_.update[l].has_value();
      for (int copy = 0; copy < copies; ++copy) {
        const int device = mode_ == Mode::dp ? copy : task.rank;
        const Deps& computed = last_backward[static_cast<std::size_t>(copy)];
        Deps& finished = done[static_cast<std::size_t>(copy)];
        if (chain_.w[l] && !(gpu_update && copy == 0)) // the updating GPU keeps W for its optimizer step
          finished.push_back(build_.free(*chain_.w[l], computed, "compute", device));
      }
      if (!chain_.dw[l])
        continue;
      Deps reduced = last_backward.front();
      if (copies > 1) {
        Deps computed_everywhere;
        std::vector<int> ring;
        for (int g = 0; g < copies; ++g) {
          const Deps& computed = last_backward[static_cast<std::size_t>(g)];
          computed_everywhere.insert(computed_everywhere.end(), computed.begin(), computed.end());
          ring.push_back(g);
        }
        reduced = {build_.collective(StepKind::allreduce, *chain_.dw[l], std::move(ring), computed_everywhere)};
      }
      const int updater = mode_ == Mode::dp ? 0 : task.rank;
      if (gpu_update) {
        done[0].push_back(update_on_gpu(l, updater, reduced));
      } else {
        const StepId offload = build_.offload(*chain_.dw[l], reduced, updater);
        gradient_out_[l] = {offload};
        done[0].push_back(build_.free(*chain_.dw[l], {offload}, "d2h", updater));
      }
      for (int copy = 1; copy < copies; ++copy) {
        Deps& finished = done[static_cast<std::size_t>(copy)];
        if (switches_.every_rank_swaps_gradients && !gpu_update) {
          const StepId offload = build_.offload(*chain_.dw[l], reduced, copy);
          gradient_out_[l].push_back(offload);
          finished.push_back(build_.free(*chain_.dw[l], {offload}, "d2h", copy));
        } else {
          finished.push_back(build_.free(*chain_.dw[l], reduced, "compute", copy));
        }
      }
    }
    for (int copy = 0; copy < copies; ++copy) {
      RankState& rank = ranks_[static_cast<std::size_t>(mode_ == Mode::dp ? copy : task.rank)];
      rank.task_done = done[static_cast<std::size_t>(copy)];
      if (rank.task_done.empty())
        rank.task_done = last_backward[static_cast<std::size_t>(copy)];
    }
  }

  // optimizer_offload=false: the step runs on the GPU right after the backward (W and dW still resident), K comes
  // in and W and K go back to the host. Returns the last of the frees.
  StepId update_on_gpu(std::size_t l, int device, const Deps& reduced)
  {
    Deps deps = reduced;
    if (chain_.k[l])
      deps.push_back(build_.prefetch(*chain_.k[l], reduced, device));
    const StepId stepped = build_.compute(*chain_.update[l], deps, device);
    build_.free(*chain_.dw[l], {stepped}, "compute", device);
    StepId last = build_.free(*chain_.w[l], {build_.offload(*chain_.w[l], {stepped}, device)}, "d2h", device);
    if (chain_.k[l])
      last = build_.free(*chain_.k[l], {build_.offload(*chain_.k[l], {stepped}, device)}, "d2h", device);
    return last;
  }

  // The optimizer step of each layer of the pack on the host, on the CPU process of rank `device`.
  void update(const Task& task, int device)
  {
    for (std::size_t l = task.pack.first; l <= task.pack.last; ++l) {
      if (!chain_.update[l])
        continue;
      Deps deps = gradient_out_.at(l);
      if (!switches_.jit_update)
        deps.push_back(backward_end_);
      build_.compute(*chain_.update[l], deps, kHostDevice, 0, fmt::format("cpu{}", device));
    }
  }

  const LayerChainIds& chain_;         // at U_B: the backward tasks' tensors and ops, and W, dW, K and the updates
  const LayerChainIds& forward_chain_; // at U_F: the forward tasks' (the same W, dW, K and updates)
  const TaskGraph& graph_;
  Mode mode_;
  EmissionSwitches switches_;
  Plan& plan_;
  PlanBuilder build_;
  std::vector<RankState> ranks_;
  std::map<std::pair<TensorId, int>, StepId> unsent_;      // (tensor, instance) -> its producer, until it is sent
  std::map<std::pair<TensorId, int>, StepId> host_copies_; // (tensor, instance) -> the offload making the host copy
  std::map<std::size_t, Deps> gradient_out_;               // layer -> the offloads of its dW
  StepId backward_end_ = -1;                               // without jit update: the last step of the backward
  bool resplit_ = false;                                   // U_F != U_B: forward microbatches re-split on the host
};

} // namespace

void emit_plan(const MicrobatchChains& chains, const TaskGraph& graph, Mode mode, const EmissionSwitches& switches,
               Plan& plan)
{
  plan.initial_placement = {{TensorKind::weight, std::nullopt, Placement::host, std::nullopt},
                            {TensorKind::optimizer_state, std::nullopt, Placement::host, std::nullopt},
                            {TensorKind::input, std::nullopt, Placement::host, std::nullopt}};
  plan.shared_across_instances = {TensorKind::weight, TensorKind::weight_grad, TensorKind::optimizer_state};
  Emitter(chains, graph, mode, switches, plan).run();
}

} // namespace memsim::harmony
