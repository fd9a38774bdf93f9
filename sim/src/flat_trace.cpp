#include "memsim/sim/flat_trace.hpp"

namespace memsim {

FlatTrace::FlatTrace(const Trace& trace) : trace_(&trace)
{
  inputs_.reserve(trace.ops.size());
  outputs_.reserve(trace.ops.size());
  phases_.reserve(trace.ops.size());
  workspace_bytes_.reserve(trace.ops.size());
  for (const Op& op : trace.ops) {
    inputs_.push_back(op.inputs);
    outputs_.push_back(op.outputs);
    phases_.push_back(op.phase);
    workspace_bytes_.push_back(op.workspace_bytes);
  }
  tensor_bytes_.reserve(trace.tensors.size());
  for (const Tensor& tensor : trace.tensors)
    tensor_bytes_.push_back(tensor.bytes);
}

} // namespace memsim
