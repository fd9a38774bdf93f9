// SuperNeurons (Wang et al., PPoPP 2018), as the TSPLIT paper ran it (the authors' superNeuronsExecutor): the outputs
// of convolutions are the checkpoints; they are offloaded after their last forward read through an LRU tensor cache
// and prefetched one convolution ahead in the backward. The outputs of every other forward op are freed after their
// last forward read and recomputed from the checkpoints when the backward reads them: memory-centric (each backward
// op recomputes what it reads), speed-centric (recomputed once and kept), or cost-aware (speed when what one op
// needs recomputed fits in the bottleneck, the most memory one op touches; memory otherwise).
//
// The LRU cache is emitted statically (async_account.hpp, `cache`): an offloaded device copy is freed only when the
// planner's account needs room, least recently offloaded first (forward reads are over, so that is least recently
// used), and a backward read of a copy still cached needs no prefetch. A static plan keeps the planner's estimate,
// the simulator and memsim-cuda on the same steps; the engine's online `lru-swap` policy would decide at run time
// and could not be costed by the planner.
#include "async_account.hpp"
#include "recompute_on_demand.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

namespace memsim {
namespace {

struct SuperNeuronsOptions {
  std::string recompute_mode = "memory"; // as the paper ran it
  std::string checkpoint_types = "conv";
};

std::vector<std::string> type_patterns(const std::string& list)
{
  std::vector<std::string> patterns;
  std::stringstream stream(list);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty())
      patterns.push_back(item);
  return patterns;
}

Plan plan_superneurons(const Trace& trace, const Machine&, const PlanRequest& request,
                       const SuperNeuronsOptions& options)
{
  const std::vector<std::string> patterns = type_patterns(options.checkpoint_types);
  auto checkpoint_op = [&](const Op& op) {
    return op.phase == Phase::forward && std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
             return op.type.find(p) != std::string::npos;
           });
  };
  if (std::none_of(trace.ops.begin(), trace.ops.end(), checkpoint_op))
    throw Infeasible(options.checkpoint_types == "conv"
                         ? std::string("superneurons is not applicable: the model has no convolutions")
                         : fmt::format("superneurons is not applicable: no forward op has a type containing '{}'",
                                       options.checkpoint_types));
  const TraceAnalysis analysis(trace);
  std::vector<bool> dropped(trace.ops.size(), false);
  for (const Op& op : trace.ops)
    dropped[static_cast<std::size_t>(op.id)] = op.phase == Phase::forward && !checkpoint_op(op);
  const std::vector<planning::SequenceEntry> sequence =
      planning::recompute_on_demand(analysis, dropped, planning::recompute_mode_named(options.recompute_mode),
                                    planning::largest_op_memory(trace));

  // Checkpoint outputs read in the backward region (by a backward op or a recomputation) are swapped.
  const std::size_t backward_start = planning::backward_region_start(trace, sequence);
  std::vector<std::int64_t> last_forward_use(trace.tensors.size(), -1), first_backward_use(trace.tensors.size(), -1);
  for (std::size_t position = 0; position < sequence.size(); ++position) {
    const Op& op = trace.op(sequence[position].op);
    if (position < backward_start) {
      for (TensorId id : op.outputs)
        last_forward_use[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(position);
      for (TensorId id : op.inputs)
        last_forward_use[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(position);
    } else {
      for (TensorId id : op.inputs)
        if (first_backward_use[static_cast<std::size_t>(id)] < 0)
          first_backward_use[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(position);
    }
  }
  std::vector<planning::MovedTensor> moved;
  for (const Op& op : trace.ops) {
    if (!checkpoint_op(op))
      continue;
    for (TensorId id : op.outputs) {
      const auto index = static_cast<std::size_t>(id);
      if (first_backward_use[index] >= 0)
        moved.push_back({id, static_cast<std::size_t>(last_forward_use[index]),
                         static_cast<std::size_t>(first_backward_use[index]), 0});
    }
  }
  // One convolution ahead: a checkpoint's prefetch starts with the first backward reader of the one before it.
  std::stable_sort(moved.begin(), moved.end(), [](const planning::MovedTensor& a, const planning::MovedTensor& b) {
    return a.first_backward_use < b.first_backward_use;
  });
  for (std::size_t i = 0; i < moved.size(); ++i) {
    const std::size_t ahead = i == 0 ? backward_start : moved[i - 1].first_backward_use;
    moved[i].trigger =
        std::clamp<std::size_t>(ahead == 0 ? 0 : ahead - 1, moved[i].last_forward_use, moved[i].first_backward_use - 1);
  }

  planning::SwapEmission emission;
  emission.planner = "superneurons";
  emission.budget_bytes = request.budget_bytes;
  emission.cache = true;
  Plan plan;
  plan.estimate.peak_bytes = planning::emit_with_swaps(analysis, sequence, moved, emission, plan).peak_bytes;
  return plan;
}

} // namespace

MEMSIM_REGISTER_PLANNER(
    superneurons, "superneurons",
    "SuperNeurons: swap conv outputs through an LRU cache (prefetch one conv ahead), recompute the other forward "
    "outputs from them in the backward",
    {param("recompute_mode", &SuperNeuronsOptions::recompute_mode,
           "memory: each backward op recomputes what it reads; speed: recompute once and keep; cost-aware: speed when "
           "what one op needs recomputed fits in the largest op's memory",
           {.choices = {"memory", "speed", "cost-aware"}}),
     param("checkpoint_types", &SuperNeuronsOptions::checkpoint_types,
           "comma-separated op type substrings whose forward outputs are the swapped checkpoints")},
    plan_superneurons);

} // namespace memsim
