#include "sequence.hpp"

#include "memsim/traces/views.hpp"

#include <algorithm>

namespace memsim::planning {

SequentialPlan emit_sequence(const Trace& trace, const std::vector<SequenceEntry>& sequence, Plan& plan)
{
  const auto lifetimes = default_lifetimes(trace);
  // For every position, the tensors whose current generation ends there.
  std::vector<std::vector<TensorId>> free_after(sequence.size());
  std::vector<std::int64_t> last_read(trace.tensors.size(), -1);
  std::vector<std::int64_t> produced_at(trace.tensors.size(), -1);
  auto close_generation = [&](TensorId id) {
    const auto index = static_cast<std::size_t>(id);
    if (produced_at[index] < 0)
      return;
    const std::int64_t end = std::max(last_read[index], produced_at[index]);
    free_after[static_cast<std::size_t>(end)].push_back(id);
  };
  for (std::size_t position = 0; position < sequence.size(); ++position) {
    const Op& op = trace.op(sequence[position].op);
    for (TensorId id : op.inputs)
      last_read[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(position);
    for (TensorId id : op.outputs) {
      close_generation(id); // a recompute starts a new generation: the old one ended at its last read
      produced_at[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(position);
      last_read[static_cast<std::size_t>(id)] = -1;
    }
  }
  for (const Tensor& tensor : trace.tensors) {
    const auto& lifetime = lifetimes[static_cast<std::size_t>(tensor.id)];
    if (lifetime.produced_by && !lifetime.released_after)
      continue; // kept to the end by the framework (weight gradients)
    close_generation(tensor.id);
  }

  PlanBuilder builder(plan);
  SequentialPlan result;
  std::uint64_t in_use = 0;
  for (const Tensor& tensor : trace.tensors)
    if (is_initially_resident(tensor.kind))
      in_use += tensor.bytes;
  result.peak_bytes = in_use;
  for (std::size_t position = 0; position < sequence.size(); ++position) {
    const Op& op = trace.op(sequence[position].op);
    if (sequence[position].recompute)
      builder.recompute(op.id);
    else
      builder.compute(op.id);
    for (TensorId id : op.outputs)
      in_use += trace.tensor(id).bytes;
    if (in_use + op.workspace_bytes > result.peak_bytes) {
      result.peak_bytes = in_use + op.workspace_bytes;
      result.peak_op = op.id;
    }
    auto& frees = free_after[position];
    std::sort(frees.begin(), frees.end());
    for (TensorId id : frees) {
      builder.free(id);
      in_use -= trace.tensor(id).bytes;
    }
  }
  return result;
}

} // namespace memsim::planning
