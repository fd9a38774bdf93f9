// Discretization of a trace's chain view (memory in N levels, rounded up so that a schedule that fits in units fits
// in bytes) and conversion of chain schedules into Plans. See chain.hpp for the memory model.
#include "chain_model.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/sim/memory_cursor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

namespace memsim::chain {
namespace {

int to_units(double bytes, double unit) { return static_cast<int>(std::ceil(bytes / unit - 1e-9)); }

} // namespace

namespace {

// The memory a layer's forward (all of it kept, "F_all") or backward needs above what is in use before it, op by op
// as the emitted plan runs it, priced by the memory cursor: outputs allocated at the op's start (+ its workspace
// while it runs), a tensor freed after its last read. The chain view's overheads add every transient and gradient up
// instead; the simulator runs the ops, so its peak is this one.
struct LayerPeaks {
  std::uint64_t forward = 0;  // peak above the memory in use before F_l (abar_l is live at its end)
  std::uint64_t backward = 0; // peak above the memory in use before B_l (abar_l, delta_l, a_{l-1} live then)
};

bool in_layer(const Op& op, Phase phase, const ChainLayer& layer)
{
  return op.phase == phase && op.layer == layer.layer;
}

// Forward: a transient (not saved) dies after its last read inside the layer's forward, or right away.
std::uint64_t forward_peak(const TraceAnalysis& analysis, const ChainLayer& layer)
{
  const Trace& trace = analysis.trace();
  std::set<TensorId> saved(layer.saved_tensors.begin(), layer.saved_tensors.end());
  std::map<OpId, std::vector<TensorId>> freed_after;
  for (OpId id : layer.forward_ops)
    for (TensorId out : trace.op(id).outputs) {
      if (saved.count(out))
        continue;
      OpId last = id;
      for (OpId reader : analysis.readers(out))
        if (in_layer(trace.op(reader), Phase::forward, layer))
          last = std::max(last, reader);
      freed_after[last].push_back(out);
    }
  MemoryCursor memory(analysis.flat(), {});
  for (OpId id : layer.forward_ops) {
    memory.run(id);
    for (TensorId out : freed_after[id])
      memory.free(out);
  }
  return memory.peak();
}

// Backward: weight gradients weigh nothing (the chain model counts them as fixed memory); the tensors an op touches
// whose default release is after it (delta_l, abar_l's parts, intermediate gradients) are freed after it. What it
// frees but the layer's backward did not produce is on the device before B_l: the cursor starts with it.
std::uint64_t backward_peak(const TraceAnalysis& analysis, const ChainLayer& layer)
{
  const Trace& trace = analysis.trace();
  std::map<OpId, std::vector<TensorId>> freed_after;
  std::vector<TensorId> live_before;
  for (OpId id : layer.backward_ops) {
    const Op& op = trace.op(id);
    std::set<TensorId> touched(op.inputs.begin(), op.inputs.end());
    touched.insert(op.outputs.begin(), op.outputs.end());
    for (TensorId t : touched) {
      const auto released = analysis.lifetime(t).released_after;
      if (!released || *released != id || is_initially_resident(trace.tensor(t).kind))
        continue;
      freed_after[id].push_back(t);
      const auto producer = analysis.producer(t);
      if (!producer || !in_layer(trace.op(*producer), Phase::backward, layer))
        live_before.push_back(t);
    }
  }
  std::vector<TensorId> weight_grads;
  for (const Tensor& tensor : trace.tensors)
    if (tensor.kind == TensorKind::weight_grad)
      weight_grads.push_back(tensor.id);
  MemoryCursor memory(analysis.flat(), live_before, weight_grads);
  for (OpId id : layer.backward_ops) {
    memory.run(id);
    for (TensorId t : freed_after[id])
      memory.free(t);
  }
  return memory.peak() - memory.start_bytes();
}

LayerPeaks layer_peaks(const TraceAnalysis& analysis, const ChainLayer& layer)
{
  return {forward_peak(analysis, layer), backward_peak(analysis, layer)};
}

struct HostLink {
  double bandwidth = std::numeric_limits<double>::infinity(); // slowest hop
  double latency = 0;                                         // per transfer, summed over hops
};

HostLink host_link(const Machine& machine)
{
  HostLink link;
  for (const RouteHop& hop : machine.route(machine.gpus.at(0).name, kHostNodeName)) {
    link.bandwidth = std::min(link.bandwidth, machine.links.at(hop.link).bandwidth);
    link.latency += machine.links.at(hop.link).latency_s;
  }
  return link;
}

} // namespace

TraceChain make_trace_chain(const TraceAnalysis& analysis, const Machine& machine, std::uint64_t budget_bytes,
                            int levels)
{
  const Trace& trace = analysis.trace();
  TraceChain chain;
  try {
    chain.view = chain_view(trace);
  } catch (const Infeasible& error) {
    throw InputError(trace.name, fmt::format("no chain view: {}", error.what()));
  }
  const ChainView& view = chain.view;
  const CostModel cost(trace, machine);
  // Fixed memory: resident tensors, weight gradients (counted from the start although the backward makes them),
  // the loss and update ops' outputs and workspace. The loss's gradient of the last output is delta_L: the chain
  // model counts it.
  chain.fixed_bytes = view.resident_bytes;
  for (const Tensor& tensor : trace.tensors)
    if (tensor.kind == TensorKind::weight_grad)
      chain.fixed_bytes += tensor.bytes;
  std::uint64_t constant_workspace = 0;
  bool last_gradient_counted = false;
  const std::uint64_t last_output = view.layers.empty() ? 0 : view.layers.back().output_bytes;
  for (const auto* ops : {&view.loss_ops, &view.update_ops})
    for (OpId id : *ops) {
      const Op& op = trace.op(id);
      chain.constant_time += cost.op_time(op, 0);
      constant_workspace = std::max(constant_workspace, op.workspace_bytes);
      for (TensorId out : op.outputs) {
        const Tensor& tensor = trace.tensor(out);
        if (tensor.kind == TensorKind::weight_grad)
          continue;
        if (!last_gradient_counted && tensor.kind == TensorKind::gradient && tensor.bytes == last_output) {
          last_gradient_counted = true;
          continue;
        }
        chain.fixed_bytes += tensor.bytes;
      }
    }
  chain.fixed_bytes += constant_workspace;
  const HostLink link = host_link(machine);
  chain.bandwidth = link.bandwidth;

  // Exact per-layer needs in bytes.
  struct LayerBytes {
    std::uint64_t output, saved, forward_overhead, backward_overhead;
  };
  std::vector<LayerBytes> bytes;
  std::uint64_t largest_layer = 0; // the most any single layer needs with only its own tensors (for messages)
  std::size_t most_tensors = 1;
  for (std::size_t l = 0; l < view.layers.size(); ++l) {
    const ChainLayer& layer = view.layers[l];
    const LayerPeaks peaks = layer_peaks(analysis, layer);
    const std::uint64_t input = l == 0 ? 0 : view.layers[l - 1].output_bytes;
    const std::uint64_t saved = std::max(layer.saved_bytes, layer.output_bytes);
    LayerBytes b;
    b.output = layer.output_bytes;
    b.saved = saved;
    b.forward_overhead = peaks.forward > saved ? peaks.forward - saved : 0;
    b.backward_overhead = peaks.backward > input ? peaks.backward - input : 0;
    bytes.push_back(b);
    most_tensors = std::max(most_tensors, layer.saved_tensors.size());
    largest_layer = std::max({largest_layer, input + saved + b.forward_overhead,
                              input + saved + layer.output_bytes + input + b.backward_overhead});
  }
  if (budget_bytes <= chain.fixed_bytes + largest_layer)
    throw Infeasible(fmt::format("no plan fits: minimum memory is at least {} ({} bytes: {} bytes of weights, "
                                 "gradients and inputs plus {} bytes for the largest layer); the budget is {} bytes",
                                 units::format_bytes(static_cast<double>(chain.fixed_bytes + largest_layer)),
                                 chain.fixed_bytes + largest_layer, chain.fixed_bytes, largest_layer, budget_bytes));
  const double available = static_cast<double>(budget_bytes - chain.fixed_bytes);
  chain.unit_bytes = available / levels;
  Problem& problem = chain.problem;
  problem.memory = levels;
  problem.unit_transfer_time = chain.unit_bytes / link.bandwidth;
  problem.transfer_slack = link.latency * static_cast<double>(most_tensors);
  for (std::size_t l = 0; l < view.layers.size(); ++l) {
    const ChainLayer& layer = view.layers[l];
    const LayerBytes& b = bytes[l];
    Stage stage;
    for (OpId id : layer.forward_ops)
      stage.forward_time += cost.op_time(trace.op(id), 0);
    for (OpId id : layer.backward_ops)
      stage.backward_time += cost.op_time(trace.op(id), 0);
    stage.output = to_units(static_cast<double>(b.output), chain.unit_bytes);
    stage.saved = std::max(stage.output, to_units(static_cast<double>(b.saved), chain.unit_bytes));
    stage.forward_overhead = to_units(static_cast<double>(b.forward_overhead), chain.unit_bytes);
    stage.backward_overhead = to_units(static_cast<double>(b.backward_overhead), chain.unit_bytes);
    // The plan moves an item tensor by tensor: each pays the route latency.
    stage.output_transfer_time = link.latency + static_cast<double>(b.output) / link.bandwidth;
    stage.saved_transfer_time = 0;
    for (TensorId id : layer.saved_tensors)
      stage.saved_transfer_time += link.latency + static_cast<double>(trace.tensor(id).bytes) / link.bandwidth;
    problem.stages.push_back(stage);
  }
  return chain;
}

Plan emit_plan(const TraceAnalysis& analysis, const TraceChain& chain, const ExpandedSchedule& schedule,
               const std::vector<Block>& blocks, double model_time)
{
  const Trace& trace = analysis.trace();
  const ChainView& view = chain.view;
  const int length = static_cast<int>(view.layers.size());
  // 1. Compute entries (op level) and the entry range of every action.
  struct Entry {
    OpId op;
    bool recompute;
  };
  std::vector<Entry> entries;
  std::vector<std::pair<int, int>> action_range; // [begin, end)
  std::vector<bool> ran(trace.ops.size(), false);
  auto push_op = [&](OpId id) {
    entries.push_back({id, ran[static_cast<std::size_t>(id)]});
    ran[static_cast<std::size_t>(id)] = true;
  };
  for (const Action& action : schedule.actions) {
    const int begin = static_cast<int>(entries.size());
    const ChainLayer& layer = view.layers[static_cast<std::size_t>(action.layer - 1)];
    if (action.kind == ActionKind::backward) {
      if (action.layer == length)
        for (OpId id : view.loss_ops)
          push_op(id);
      for (OpId id : layer.backward_ops)
        push_op(id);
    } else {
      for (OpId id : layer.forward_ops)
        push_op(id);
    }
    action_range.emplace_back(begin, static_cast<int>(entries.size()));
  }
  for (OpId id : view.update_ops)
    push_op(id);
  // Ops outside the chain view (none in a chain trace) are not run: the view covers every op it accepts.

  // 2. Transfers at the entry level, one per tensor of the item.
  struct TensorTransfer {
    TensorId tensor;
    bool offload;
    int start_after;   // entry
    int needed_before; // entry
  };
  std::vector<TensorTransfer> transfers;
  for (const Transfer& transfer : schedule.transfers) {
    const Block& block = blocks[static_cast<std::size_t>(transfer.block)];
    const ChainLayer& layer = view.layers[static_cast<std::size_t>(block.last - 1)];
    std::vector<TensorId> tensors;
    if (block.kind == BlockKind::keep_all)
      tensors = layer.saved_tensors;
    else
      tensors = {layer.output_tensor};
    std::sort(tensors.begin(), tensors.end());
    for (TensorId id : tensors)
      transfers.push_back({id, transfer.offload,
                           action_range[static_cast<std::size_t>(transfer.start_after)].second - 1,
                           action_range[static_cast<std::size_t>(transfer.needed_before)].first});
  }

  // 3. Generations of each tensor: started by a compute output or a prefetch, ended by an offload (free on d2h) or
  // by the last read before the next start (free on compute), or never (weight gradients, resident tensors).
  const auto entry_count = static_cast<int>(entries.size());
  std::vector<std::vector<TensorId>> compute_frees_after(static_cast<std::size_t>(entry_count));
  struct OffloadFree {
    std::size_t transfer;
    int last_read; // entry, or -1
  };
  std::vector<OffloadFree> offload_frees;
  {
    // Per tensor, the ordered events.
    struct Event {
      int position; // entries: 2*e for reads/produces at e; offload at 2*start_after+1; prefetch at 2*needed_before-1
      int kind;     // 0 produce, 1 read, 2 offload, 3 prefetch
      std::size_t transfer;
    };
    std::map<TensorId, std::vector<Event>> events;
    for (int e = 0; e < entry_count; ++e) {
      const Op& op = trace.op(entries[static_cast<std::size_t>(e)].op);
      for (TensorId id : op.inputs)
        if (!is_initially_resident(trace.tensor(id).kind))
          events[id].push_back({2 * e, 1, 0});
      for (TensorId id : op.outputs)
        events[id].push_back({2 * e + 1, 0, 0}); // after the op's own reads
    }
    for (std::size_t t = 0; t < transfers.size(); ++t) {
      const TensorTransfer& transfer = transfers[t];
      if (transfer.offload)
        events[transfer.tensor].push_back({2 * transfer.start_after + 1, 2, t});
      else
        events[transfer.tensor].push_back({2 * transfer.needed_before - 1, 3, t});
    }
    for (auto& [id, list] : events) {
      std::stable_sort(list.begin(), list.end(),
                       [](const Event& x, const Event& y) { return x.position < y.position; });
      const bool kept_to_end = analysis.kept_to_end(id);
      // Walk generations.
      bool live = false;
      int start_entry = -1;
      int last_read = -1;
      std::optional<std::size_t> pending_offload;
      std::optional<std::size_t> started_by_prefetch;
      auto close = [&, id = id]() { // clang 14 cannot capture a structured binding
        if (!live)
          return;
        if (pending_offload) {
          offload_frees.push_back({*pending_offload, last_read});
        } else {
          int at = std::max(last_read, start_entry);
          // A prefetched tensor that no later op reads (the model counts a_{l-1} as needed by B_l, but e.g. a
          // concatenation's backward does not read its inputs) is freed after the entry that waits for its
          // prefetch: freeing it after start_after would put the free before the prefetch itself.
          if (started_by_prefetch)
            at = std::max(at, transfers[*started_by_prefetch].needed_before);
          if (at >= 0)
            compute_frees_after[static_cast<std::size_t>(at)].push_back(id);
        }
        live = false;
        pending_offload.reset();
        started_by_prefetch.reset();
      };
      for (const Event& event : list) {
        switch (event.kind) {
        case 0:
        case 3:
          close();
          live = true;
          start_entry = event.kind == 0 ? event.position / 2 : transfers[event.transfer].start_after;
          if (event.kind == 3)
            started_by_prefetch = event.transfer;
          last_read = -1;
          break;
        case 1: last_read = event.position / 2; break;
        case 2: pending_offload = event.transfer; break;
        }
      }
      if (!(kept_to_end && !pending_offload))
        close();
    }
  }

  // 4. Emit steps in an order where every dep precedes its user and each stream keeps its order.
  Plan plan;
  PlanBuilder builder(plan);
  std::vector<StepId> compute_step(static_cast<std::size_t>(entry_count), -1);
  std::vector<StepId> transfer_step(transfers.size(), -1);
  std::vector<std::vector<StepId>> waits_before(static_cast<std::size_t>(entry_count));
  // After entry e: which offload frees and transfers go.
  std::vector<std::vector<std::size_t>> offloads_after(static_cast<std::size_t>(entry_count));
  std::vector<std::vector<std::size_t>> prefetches_after(static_cast<std::size_t>(entry_count));
  std::vector<std::vector<std::size_t>> offload_frees_after(static_cast<std::size_t>(entry_count));
  for (std::size_t t = 0; t < transfers.size(); ++t)
    (transfers[t].offload ? offloads_after : prefetches_after)[static_cast<std::size_t>(transfers[t].start_after)]
        .push_back(t);
  for (std::size_t f = 0; f < offload_frees.size(); ++f) {
    const TensorTransfer& transfer = transfers[offload_frees[f].transfer];
    offload_frees_after[static_cast<std::size_t>(std::max(transfer.start_after, offload_frees[f].last_read))].push_back(
        f);
  }
  for (int e = 0; e < entry_count; ++e) {
    const Entry& entry = entries[static_cast<std::size_t>(e)];
    auto& waits = waits_before[static_cast<std::size_t>(e)];
    std::sort(waits.begin(), waits.end());
    compute_step[static_cast<std::size_t>(e)] =
        entry.recompute ? builder.recompute(entry.op, waits) : builder.compute(entry.op, waits);
    auto& frees = compute_frees_after[static_cast<std::size_t>(e)];
    std::sort(frees.begin(), frees.end());
    for (TensorId id : frees)
      builder.free(id);
    // d2h: frees of earlier offloads that end here come before new offloads (stream order = the model's order);
    // the free of an offload that starts here (nothing reads the tensor after it) follows its own offload.
    auto emit_offload_free = [&](std::size_t f) {
      const OffloadFree& free = offload_frees[f];
      const TensorTransfer& transfer = transfers[free.transfer];
      std::vector<StepId> deps{transfer_step[free.transfer]};
      if (free.last_read > transfer.start_after)
        deps.push_back(compute_step[static_cast<std::size_t>(free.last_read)]);
      const StepId id = builder.free(transfer.tensor, deps, "d2h");
      waits_before[static_cast<std::size_t>(transfer.needed_before)].push_back(id);
    };
    std::vector<std::size_t> frees_of_new_offloads;
    for (std::size_t f : offload_frees_after[static_cast<std::size_t>(e)]) {
      if (transfer_step[offload_frees[f].transfer] < 0)
        frees_of_new_offloads.push_back(f);
      else
        emit_offload_free(f);
    }
    for (std::size_t t : offloads_after[static_cast<std::size_t>(e)])
      transfer_step[t] = builder.offload(transfers[t].tensor, {compute_step[static_cast<std::size_t>(e)]});
    for (std::size_t f : frees_of_new_offloads)
      emit_offload_free(f);
    for (std::size_t t : prefetches_after[static_cast<std::size_t>(e)]) {
      transfer_step[t] = builder.prefetch(transfers[t].tensor, {compute_step[static_cast<std::size_t>(e)]});
      waits_before[static_cast<std::size_t>(transfers[t].needed_before)].push_back(transfer_step[t]);
    }
  }
  // Offload frees whose offload starts after entry e were emitted at max(start_after, last_read) >= start_after, so
  // their offload step exists; a free never needs a later step.
  plan.estimate.iteration_time_s = model_time + chain.constant_time;
  return plan;
}

ParamList<ChainOptions> chain_params()
{
  return {param("levels", &ChainOptions::levels, "memory discretization: number of levels N of the budget",
                {.min = 2, .max = 1000})};
}

Plan plan_chain(ChainAlgorithm algorithm, const Trace& trace, const Machine& machine, const PlanRequest& request,
                const ChainOptions& options)
{
  const TraceAnalysis analysis(trace);
  const TraceChain chain = make_trace_chain(analysis, machine, request.budget_bytes, options.levels);
  const Problem& problem = chain.problem;
  const RotorTable rotor(problem);
  BlockSchedule schedule;
  switch (algorithm) {
  case ChainAlgorithm::rotor:
    schedule.time = rotor.cost(1, problem.length(), problem.memory);
    schedule.blocks = {Block{BlockKind::final, 1, problem.length(), false, problem.memory}};
    break;
  case ChainAlgorithm::offload_dp: schedule = solve_combined(problem, rotor, {CombinedMode::offload_only}); break;
  case ChainAlgorithm::pofo: schedule = solve_combined(problem, rotor, {CombinedMode::full}); break;
  case ChainAlgorithm::autocapper: schedule = solve_combined(problem, rotor, {CombinedMode::hidden_offloads}); break;
  case ChainAlgorithm::opportunist: schedule = solve_opportunist(problem, rotor); break;
  }
  if (schedule.time == infinite_time) {
    // Find the smallest budget that fits, for the message: the smallest level count of the same unit that works.
    std::string minimum = "more than the budget";
    Problem larger = problem;
    for (int memory = problem.memory + 1; memory <= problem.memory * 64; memory = memory + std::max(1, memory / 8)) {
      larger.memory = memory;
      const RotorTable larger_rotor(larger);
      const double time = algorithm == ChainAlgorithm::offload_dp
                              ? solve_combined(larger, larger_rotor, {CombinedMode::offload_only}).time
                              : larger_rotor.cost(1, larger.length(), memory);
      if (time != infinite_time) {
        const double bytes = static_cast<double>(chain.fixed_bytes) + memory * chain.unit_bytes;
        minimum = fmt::format("about {} ({:.0f} bytes)", units::format_bytes(bytes), bytes);
        break;
      }
    }
    throw Infeasible(
        fmt::format("no plan fits: minimum memory is {}; the budget is {} ({} bytes), of which {} bytes are "
                    "weights, gradients and inputs",
                    minimum, units::format_bytes(static_cast<double>(request.budget_bytes)), request.budget_bytes,
                    chain.fixed_bytes));
  }
  // The DP knows a prefetched item only by its size in units and bounds its transfer time from above; the
  // estimate is the same model evaluated with the chosen items' exact transfer times (never above the DP's value).
  std::string why;
  const double exact = evaluate_blocks(problem, rotor, schedule.blocks, &why);
  if (exact == infinite_time || exact > schedule.time * (1 + 1e-12))
    throw std::logic_error(fmt::format("chain planner: the schedule's evaluation ({}) disagrees with the DP ({}): {}",
                                       exact, schedule.time, why));
  const ExpandedSchedule expanded = expand_blocks(rotor, schedule.blocks);
  return emit_plan(analysis, chain, expanded, schedule.blocks, exact);
}

namespace {
Plan plan_rotor(const Trace& t, const Machine& m, const PlanRequest& r, const ChainOptions& o)
{
  return plan_chain(ChainAlgorithm::rotor, t, m, r, o);
}
Plan plan_pofo(const Trace& t, const Machine& m, const PlanRequest& r, const ChainOptions& o)
{
  return plan_chain(ChainAlgorithm::pofo, t, m, r, o);
}
} // namespace

MEMSIM_REGISTER_PLANNER(rotor, "rotor",
                        "Beaumont et al. 2019: optimal rematerialization of a heterogeneous chain (rotor DP)",
                        chain_params(), plan_rotor);
MEMSIM_REGISTER_PLANNER(pofo, "pofo",
                        "Beaumont, Eyraud-Dubois, Shilova 2021: optimal offloading + rematerialization of a chain",
                        chain_params(), plan_pofo);

} // namespace memsim::chain
