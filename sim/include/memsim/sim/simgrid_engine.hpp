#pragma once
// The SimGrid engine (the reference): the execution core with SimGrid timing. The SimGrid Engine is a
// process-wide singleton: at most one call per process (sweeps run cells in worker processes).
#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/execution.hpp"

namespace memsim {

RunResult simulate_with_simgrid(const Trace& trace, const Plan& plan, const Machine& machine,
                                const ExecutionConfig& config, const OpTime& op_time);

} // namespace memsim
