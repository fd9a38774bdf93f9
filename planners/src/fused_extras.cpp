#include "fused_extras.hpp"

namespace memsim::planning {

ExtraBlock append_as_extras(Plan& plan, const Trace& base, const Trace& block_trace)
{
  ExtraBlock block;
  block.op_base = static_cast<OpId>(base.ops.size() + plan.extra_ops.size());
  block.tensor_base = static_cast<TensorId>(base.tensors.size() + plan.extra_tensors.size());
  for (Tensor tensor : block_trace.tensors) {
    tensor.id += block.tensor_base;
    if (tensor.free_after)
      *tensor.free_after += block.op_base;
    plan.extra_tensors.push_back(std::move(tensor));
  }
  for (Op op : block_trace.ops) {
    op.id += block.op_base;
    for (TensorId& id : op.inputs)
      id += block.tensor_base;
    for (TensorId& id : op.outputs)
      id += block.tensor_base;
    if (op.split_of)
      op.split_of->op += block.op_base;
    if (op.fused_from)
      op.fused_from->op += block.op_base;
    plan.extra_ops.push_back(std::move(op));
  }
  return block;
}

void append_block_steps(Plan& plan, const std::vector<Step>& steps, const ExtraBlock& block, int instance)
{
  const auto step_base = static_cast<StepId>(plan.steps.size());
  for (Step step : steps) {
    step.id += step_base;
    for (StepId& dep : step.deps)
      dep += step_base;
    if (step.op)
      *step.op += block.op_base;
    if (step.tensor)
      *step.tensor += block.tensor_base;
    for (TensorId& part : step.parts)
      part += block.tensor_base;
    step.instance = instance;
    plan.steps.push_back(std::move(step));
  }
}

} // namespace memsim::planning
