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
  const std::size_t ops = analysis.trace().ops.size();
  const std::vector<std::uint64_t>& tensor_bytes = analysis.tensor_bytes();
  // Per tensor, once: its producer is dropped (mu-two rebuilds this sequence over rings of 10^5 ops per decision).
  std::vector<char> dropped_tensor(tensor_bytes.size(), 0);
  for (std::size_t id = 0; id < tensor_bytes.size(); ++id)
    if (const auto producer = analysis.producer(static_cast<TensorId>(id)))
      dropped_tensor[id] = dropped[static_cast<std::size_t>(*producer)] ? 1 : 0;
  auto is_dropped = [&](TensorId id) { return dropped_tensor[static_cast<std::size_t>(id)] != 0; };
  // Ops whose recomputed outputs are still on the device (speed mode): later reads use them.
  std::vector<bool> recomputed(ops, false);
  // The producers one op needs recomputed, and a mark per op for "already among them" (cleared after each op).
  std::vector<OpId> needed;
  std::vector<char> is_needed(ops, 0);
  std::vector<TensorId> work;
  std::vector<SequenceEntry> sequence;
  sequence.reserve(ops);
  for (OpId op = 0; op < static_cast<OpId>(ops); ++op) {
    const std::span<const TensorId> inputs = analysis.inputs(op);
    const Phase phase = analysis.phase(op);
    if ((phase == Phase::backward || phase == Phase::update) && std::any_of(inputs.begin(), inputs.end(), is_dropped)) {
      // The producers to recompute, found from the op's inputs back to tensors on the device. Ids are a
      // topological order, so running them by id is a valid schedule.
      needed.clear();
      work.assign(inputs.begin(), inputs.end());
      while (!work.empty()) {
        const TensorId id = work.back();
        work.pop_back();
        if (!is_dropped(id))
          continue;
        const OpId producer = *analysis.producer(id);
        const auto index = static_cast<std::size_t>(producer);
        if (recomputed[index] || is_needed[index])
          continue;
        is_needed[index] = 1;
        needed.push_back(producer);
        const std::span<const TensorId> sources = analysis.inputs(producer);
        work.insert(work.end(), sources.begin(), sources.end());
      }
      std::sort(needed.begin(), needed.end());
      bool keep = mode == RecomputeMode::speed;
      if (mode == RecomputeMode::cost_aware) {
        std::uint64_t recomputed_bytes = 0;
        for (OpId id : needed)
          for (TensorId out : analysis.outputs(id))
            recomputed_bytes += tensor_bytes[static_cast<std::size_t>(out)];
        keep = recomputed_bytes <= bottleneck_bytes;
      }
      for (OpId id : needed) {
        sequence.push_back({id, true});
        is_needed[static_cast<std::size_t>(id)] = 0;
        if (keep)
          recomputed[static_cast<std::size_t>(id)] = true;
      }
      if (mode == RecomputeMode::lineage)
        for (TensorId id : inputs)
          if (is_dropped(id))
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
