#pragma once
// A derived graph (a fused copy of the trace's model, μ-TWO spec §9.2) carried in a plan on the original trace: its
// ops and tensors appended to the plan's extras with ids moved after the trace's and the extras already there.
#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

namespace memsim::planning {

struct ExtraBlock {
  OpId op_base = 0;
  TensorId tensor_base = 0;
};

ExtraBlock append_as_extras(Plan& plan, const Trace& base, const Trace& block);

// Appends `steps` (emitted on the block's own ids) to `plan`, moving op, tensor and step ids and setting `instance`.
void append_block_steps(Plan& plan, const std::vector<Step>& steps, const ExtraBlock& block, int instance);

} // namespace memsim::planning
