#include "recompute_on_demand.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace memsim::planning {

RecomputeMode recompute_mode_named(const std::string& name)
{
  if (name == "memory")
    return RecomputeMode::memory;
  if (name == "speed")
    return RecomputeMode::speed;
  if (name == "cost-aware")
    return RecomputeMode::cost_aware;
  if (name == "lineage")
    return RecomputeMode::lineage;
  throw std::invalid_argument("unknown recompute mode '" + name + "'");
}

std::vector<SequenceEntry> recompute_on_demand(const TraceAnalysis& analysis, const std::vector<bool>& dropped,
                                               RecomputeMode mode, std::uint64_t bottleneck_bytes)
{
  const Trace& trace = analysis.trace();
  auto dropped_tensor = [&](TensorId id) {
    const auto producer = analysis.producer(id);
    return producer && dropped[static_cast<std::size_t>(*producer)];
  };
  // Ops whose recomputed outputs are still on the device (speed mode): later reads use them.
  std::vector<bool> recomputed(trace.ops.size(), false);
  std::vector<SequenceEntry> sequence;
  for (OpId op = 0; op < static_cast<OpId>(trace.ops.size()); ++op) {
    const std::span<const TensorId> inputs = analysis.inputs(op);
    const Phase phase = analysis.phase(op);
    if ((phase == Phase::backward || phase == Phase::update) &&
        std::any_of(inputs.begin(), inputs.end(), dropped_tensor)) {
      // The producers to recompute, found from the op's inputs back to tensors on the device. Ids are a
      // topological order, so running them by id is a valid schedule.
      std::set<OpId> needed;
      std::vector<TensorId> work(inputs.begin(), inputs.end());
      while (!work.empty()) {
        const TensorId id = work.back();
        work.pop_back();
        if (!dropped_tensor(id))
          continue;
        const OpId producer = *analysis.producer(id);
        if (recomputed[static_cast<std::size_t>(producer)] || !needed.insert(producer).second)
          continue;
        const std::span<const TensorId> sources = analysis.inputs(producer);
        work.insert(work.end(), sources.begin(), sources.end());
      }
      std::uint64_t recomputed_bytes = 0;
      for (OpId id : needed)
        for (TensorId out : analysis.outputs(id))
          recomputed_bytes += trace.tensor(out).bytes;
      const bool keep =
          mode == RecomputeMode::speed || (mode == RecomputeMode::cost_aware && recomputed_bytes <= bottleneck_bytes);
      for (OpId id : needed) {
        sequence.push_back({id, true});
        if (keep)
          recomputed[static_cast<std::size_t>(id)] = true;
      }
      if (mode == RecomputeMode::lineage)
        for (TensorId id : inputs)
          if (dropped_tensor(id))
            recomputed[static_cast<std::size_t>(*analysis.producer(id))] = true;
    }
    sequence.push_back({op, false});
  }
  return sequence;
}

std::uint64_t largest_op_memory(const Trace& trace)
{
  std::uint64_t largest = 0;
  for (const Op& op : trace.ops) {
    std::set<TensorId> touched(op.inputs.begin(), op.inputs.end());
    touched.insert(op.outputs.begin(), op.outputs.end());
    std::uint64_t bytes = op.workspace_bytes;
    for (TensorId id : touched)
      bytes += trace.tensor(id).bytes;
    largest = std::max(largest, bytes);
  }
  return largest;
}

} // namespace memsim::planning
