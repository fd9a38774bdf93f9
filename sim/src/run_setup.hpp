#pragma once
// One run's set-up, shared by both engines: the trace with the plan's extra ops and tensors, the execution config
// (device capacities from the plan's budget, the host, the allocator, the policy) and the op timing.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/execution.hpp"
#include "memsim/sim/simulator.hpp"

#include <functional>

namespace memsim {

using Engine = std::function<RunResult(const Trace& extended, const ExecutionConfig& config, const OpTime& op_time)>;

// Validates the plan, sets the run up and hands it to `engine`.
RunResult run_with_setup(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options,
                         const Engine& engine);

} // namespace memsim
