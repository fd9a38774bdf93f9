#include "memsim/sim/memory_floor.hpp"

#include <algorithm>
#include <vector>

namespace memsim {

std::uint64_t preexisting_bytes(const TraceAnalysis& analysis)
{
  std::uint64_t bytes = 0;
  for (const Tensor& tensor : analysis.trace().tensors)
    if (analysis.preexisting(tensor.id))
      bytes += tensor.bytes;
  return bytes;
}

std::uint64_t working_bytes(const TraceAnalysis& analysis, OpId op)
{
  const Trace& trace = analysis.trace();
  const Op& node = trace.op(op);
  std::vector<TensorId> held;
  held.reserve(node.inputs.size() + node.outputs.size());
  for (const std::vector<TensorId>* ids : {&node.inputs, &node.outputs})
    for (TensorId id : *ids)
      if (!analysis.preexisting(id))
        held.push_back(id);
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  std::uint64_t bytes = node.workspace_bytes;
  for (TensorId id : held)
    bytes += trace.tensor(id).bytes;
  return bytes;
}

} // namespace memsim
