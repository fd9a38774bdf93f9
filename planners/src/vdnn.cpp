// vDNN (Rhu et al., MICRO 2016): offload forward activations to the host after their last forward use and prefetch
// them back `lookahead` layers before the backward op that needs them. vdnn-all moves every such activation,
// vdnn-conv only the inputs of convolutions.
//
// Budget safety: the plan is built with a pessimistic sequential account of device memory. A tensor being
// offloaded still counts until a later compute step is made to depend on its free; a prefetch counts from the
// point where it is issued (its deps guarantee it cannot start earlier). Whenever the next allocation would exceed
// the budget, the planner adds such dependencies (compute waits for an offload to finish, a prefetch waits for
// memory), so any timing the simulator produces stays within the account; if it still does not fit, it says so.
#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/memory_cursor.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <deque>
#include <map>

namespace memsim {
namespace {

struct VdnnOptions {
  int lookahead = 1; // layers
};

struct Moved {
  TensorId tensor = 0;
  std::uint64_t bytes = 0;
  OpId last_forward_use = 0; // offload after this op
  OpId first_backward_use = 0;
  OpId trigger = 0; // prefetch after this op completes
  StepId free_after_offload = -1;
  StepId prefetch = -1;
  bool device_copy_counted = true; // pessimistic: until a compute or prefetch depends on its free
};

bool reads_convolution_input(const TraceAnalysis& analysis, TensorId id)
{
  for (OpId reader : analysis.readers(id)) {
    const Op& op = analysis.trace().op(reader);
    if (op.phase == Phase::forward && op.type.find("conv") != std::string::npos)
      return true;
  }
  return false;
}

Plan plan_vdnn(const Trace& trace, const PlanRequest& request, const VdnnOptions& options, bool conv_only,
               const char* name)
{
  const int lookahead = options.lookahead;
  const TraceAnalysis analysis(trace);
  const std::uint64_t budget = request.budget_bytes;

  // First backward op of each layer (backward runs from the last layer down).
  OpId first_backward = static_cast<OpId>(trace.ops.size());
  std::map<int, OpId> backward_start_of_layer;
  for (const Op& op : trace.ops)
    if (op.phase == Phase::backward) {
      first_backward = std::min(first_backward, op.id);
      backward_start_of_layer.emplace(op.layer, op.id);
    }

  std::vector<Moved> moved;
  std::vector<std::int64_t> moved_index(trace.tensors.size(), -1);
  for (const Tensor& tensor : trace.tensors) {
    const auto producer = analysis.producer(tensor.id);
    if (!producer || trace.op(*producer).phase != Phase::forward)
      continue;
    if (conv_only && !reads_convolution_input(analysis, tensor.id))
      continue;
    Moved entry;
    entry.tensor = tensor.id;
    entry.bytes = tensor.bytes;
    entry.last_forward_use = *producer;
    entry.first_backward_use = -1;
    for (OpId reader : analysis.readers(tensor.id)) {
      if (trace.op(reader).phase == Phase::backward) {
        entry.first_backward_use = reader;
        break;
      }
      entry.last_forward_use = reader;
    }
    if (entry.first_backward_use < 0)
      continue; // not needed by the backward: the default schedule already frees it
    // Prefetch when the backward of the layer `lookahead` above the consumer starts (just after the op before it).
    const int consumer_layer = trace.op(entry.first_backward_use).layer;
    OpId start = first_backward;
    auto ahead = backward_start_of_layer.find(consumer_layer + static_cast<int>(lookahead));
    if (ahead != backward_start_of_layer.end())
      start = ahead->second;
    entry.trigger = std::clamp<OpId>(start - 1, entry.last_forward_use, entry.first_backward_use - 1);
    moved_index[static_cast<std::size_t>(tensor.id)] = static_cast<std::int64_t>(moved.size());
    moved.push_back(entry);
  }

  // Frees on the compute stream after each op are the default schedule's (analysis.released_after), moved tensors
  // freed after their last backward use (their forward copy is freed on the d2h stream after the offload).
  std::vector<std::vector<std::size_t>> offloads_after(trace.ops.size());
  for (std::size_t i = 0; i < moved.size(); ++i) {
    offloads_after[static_cast<std::size_t>(moved[i].last_forward_use)].push_back(i);
  }
  // Prefetches in h2d stream order: by first backward use, then tensor id.
  std::vector<std::size_t> prefetch_order(moved.size());
  for (std::size_t i = 0; i < moved.size(); ++i)
    prefetch_order[i] = i;
  std::stable_sort(prefetch_order.begin(), prefetch_order.end(), [&](std::size_t a, std::size_t b) {
    return moved[a].first_backward_use < moved[b].first_backward_use;
  });
  std::size_t next_prefetch = 0;

  std::vector<std::uint64_t> allocation_of(trace.ops.size()); // outputs + workspace of each op
  for (const Op& op : trace.ops) {
    allocation_of[static_cast<std::size_t>(op.id)] = op.workspace_bytes;
    for (TensorId id : op.outputs)
      allocation_of[static_cast<std::size_t>(op.id)] += trace.tensor(id).bytes;
  }

  Plan plan;
  PlanBuilder builder(plan);
  MemoryCursor memory(trace, analysis.resident_tensors());
  std::deque<std::size_t> uncounted_frees; // offloaded tensors whose device copy still counts
  StepId previous_compute = -1;
  // The last compute-stream step (an op's frees follow it): what a prefetch counted after that op waits for, so
  // that it cannot allocate before the frees the account already subtracted.
  StepId compute_stream_tail = -1;

  auto release_offloaded = [&](std::size_t index, std::vector<StepId>& deps) {
    Moved& entry = moved[index];
    if (!entry.device_copy_counted)
      return;
    entry.device_copy_counted = false;
    memory.free(entry.tensor);
    deps.push_back(entry.free_after_offload);
  };
  // Makes room by waiting for finished offloads (oldest first) until `needed` more bytes fit.
  auto make_room = [&](std::uint64_t needed, std::vector<StepId>& deps) {
    while (memory.in_use() + needed > budget && !uncounted_frees.empty()) {
      release_offloaded(uncounted_frees.front(), deps);
      uncounted_frees.pop_front();
    }
    return memory.in_use() + needed <= budget;
  };
  auto fail = [&](const Op& op, std::uint64_t needed) -> Infeasible {
    return Infeasible(fmt::format("{} cannot fit op {} '{}': it needs {} more with {} in use, budget is {} ({} bytes)",
                                  name, op.id, op.name, units::format_bytes(static_cast<double>(needed)),
                                  units::format_bytes(static_cast<double>(memory.in_use())),
                                  units::format_bytes(static_cast<double>(budget)), budget));
  };
  // `room` are the frees the account released to make space for it: the prefetch must wait for them too.
  auto issue_prefetch = [&](std::size_t index, StepId after_compute, std::vector<StepId> room) {
    Moved& entry = moved[index];
    std::vector<StepId> deps = std::move(room);
    deps.push_back(entry.free_after_offload);
    if (after_compute >= 0)
      deps.push_back(after_compute);
    // The prefetch depends on the free, so from here on the old device copy is gone.
    if (entry.device_copy_counted) {
      entry.device_copy_counted = false;
      memory.free(entry.tensor);
      uncounted_frees.erase(std::remove(uncounted_frees.begin(), uncounted_frees.end(), index), uncounted_frees.end());
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    entry.prefetch = builder.prefetch(entry.tensor, std::move(deps));
    memory.bring(entry.tensor);
  };
  // Issues prefetches in stream order whose trigger has passed, as long as they fit.
  auto issue_ready_prefetches = [&](OpId completed_op, StepId completed_step) {
    while (next_prefetch < prefetch_order.size()) {
      const std::size_t index = prefetch_order[next_prefetch];
      const Moved& entry = moved[index];
      if (entry.trigger > completed_op)
        break;
      // An early prefetch must leave room for what the ops before its consumer allocate, or it would force the
      // compute stream to fail later.
      const std::uint64_t extra = entry.device_copy_counted ? 0 : entry.bytes;
      std::uint64_t headroom = 0;
      for (OpId between = completed_op + 1; between < entry.first_backward_use; ++between)
        headroom = std::max(headroom, allocation_of[static_cast<std::size_t>(between)]);
      if (memory.in_use() + extra + headroom > budget)
        break;
      issue_prefetch(index, completed_step, {});
      ++next_prefetch;
    }
  };

  for (const Op& op : trace.ops) {
    std::vector<StepId> deps;
    // Prefetches this op needs that have not been issued yet go now, right before it.
    while (next_prefetch < prefetch_order.size() && moved[prefetch_order[next_prefetch]].first_backward_use <= op.id) {
      const std::size_t pending = prefetch_order[next_prefetch];
      const std::uint64_t extra = moved[pending].device_copy_counted ? 0 : moved[pending].bytes;
      std::vector<StepId> room;
      if (!make_room(extra, room))
        throw fail(op, moved[pending].bytes);
      deps.insert(deps.end(), room.begin(), room.end());
      issue_prefetch(pending, compute_stream_tail, std::move(room));
      ++next_prefetch;
    }
    for (TensorId id : op.inputs) {
      const std::int64_t index = moved_index[static_cast<std::size_t>(id)];
      if (index >= 0 && op.phase == Phase::backward)
        deps.push_back(moved[static_cast<std::size_t>(index)].prefetch);
    }
    const std::uint64_t outputs = allocation_of[static_cast<std::size_t>(op.id)] - op.workspace_bytes;
    if (!make_room(outputs + op.workspace_bytes, deps))
      throw fail(op, outputs + op.workspace_bytes);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    previous_compute = builder.compute(op.id, std::move(deps));
    memory.run(op.id);

    for (TensorId id : analysis.released_after(op.id)) {
      builder.free(id);
      memory.free(id);
    }
    compute_stream_tail = builder.last();
    for (std::size_t index : offloads_after[static_cast<std::size_t>(op.id)]) {
      Moved& entry = moved[index];
      const StepId offload = builder.offload(entry.tensor, {previous_compute});
      entry.free_after_offload = builder.free(entry.tensor, {offload}, "d2h");
      uncounted_frees.push_back(index);
    }
    issue_ready_prefetches(op.id, compute_stream_tail);
  }
  plan.estimate.peak_bytes = memory.peak();
  return plan;
}

Plan plan_vdnn_all(const Trace& trace, const Machine&, const PlanRequest& request, const VdnnOptions& options)
{
  return plan_vdnn(trace, request, options, false, "vdnn-all");
}
Plan plan_vdnn_conv(const Trace& trace, const Machine&, const PlanRequest& request, const VdnnOptions& options)
{
  return plan_vdnn(trace, request, options, true, "vdnn-conv");
}

ParamList<VdnnOptions> vdnn_params()
{
  return {param("lookahead", &VdnnOptions::lookahead,
                "prefetch when the backward of the layer this many layers above the consumer starts",
                {.min = 0, .max = 1000})};
}

} // namespace

MEMSIM_REGISTER_PLANNER(vdnn_all, "vdnn-all",
                        "vDNN: offload every forward activation needed by the backward, prefetch it layers ahead",
                        vdnn_params(), plan_vdnn_all);
MEMSIM_REGISTER_PLANNER(vdnn_conv, "vdnn-conv", "vDNN: offload and prefetch only the inputs of convolutions",
                        vdnn_params(), plan_vdnn_conv);

} // namespace memsim
