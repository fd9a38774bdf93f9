#include "sequence.hpp"

#include "memsim/sim/memory_cursor.hpp"

namespace memsim::planning {

FlatLists generation_ends(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence)
{
  const Trace& trace = analysis.trace();
  std::vector<std::pair<std::size_t, TensorId>> ends;
  ends.reserve(trace.tensors.size());
  std::vector<std::int64_t> last_read(trace.tensors.size(), -1);
  std::vector<std::int64_t> produced_at(trace.tensors.size(), -1);
  auto close_generation = [&](TensorId id) {
    const auto index = static_cast<std::size_t>(id);
    if (produced_at[index] < 0)
      return;
    const std::int64_t end = std::max(last_read[index], produced_at[index]);
    ends.emplace_back(static_cast<std::size_t>(end), id);
  };
  for (std::size_t position = 0; position < sequence.size(); ++position) {
    const OpId op = sequence[position].op;
    for (TensorId id : analysis.inputs(op))
      last_read[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(position);
    for (TensorId id : analysis.outputs(op)) {
      close_generation(id); // a recompute starts a new generation: the old one ended at its last read
      produced_at[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(position);
      last_read[static_cast<std::size_t>(id)] = -1;
    }
  }
  for (TensorId id = 0; id < static_cast<TensorId>(trace.tensors.size()); ++id) // by id: a Tensor is 100+ bytes
    if (!analysis.kept_to_end(id))                                              // weight gradients stay to the end
      close_generation(id);
  return FlatLists(sequence.size(), ends);
}

SequentialPlan emit_sequence(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence, Plan& plan)
{
  const FlatLists free_after = generation_ends(analysis, sequence);
  PlanBuilder builder(plan);
  MemoryCursor memory(analysis.flat(), analysis.resident_tensors());
  for (std::size_t position = 0; position < sequence.size(); ++position) {
    const OpId op = sequence[position].op;
    if (sequence[position].recompute)
      builder.recompute(op);
    else
      builder.compute(op);
    memory.run(op);
    for (TensorId id : free_after[position]) {
      builder.free(id);
      memory.free(id);
    }
  }
  return {memory.peak(), memory.peak_op().value_or(0)};
}

} // namespace memsim::planning
