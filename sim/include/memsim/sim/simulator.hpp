#pragma once
// Executes a Plan on a Machine with SimGrid: one actor per (device, stream), activities issued as their
// dependencies complete. The SimGrid Engine is a process-wide singleton: call simulate() at most once
// per process (sweeps run cells in worker processes).
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/sim/timeline.hpp"
#include "memsim/traces/trace.hpp"

namespace memsim {

struct SimOptions {
  bool record_timeline = true;
};

// Never throws for an infeasible plan (OOM, non-resident input): that is Result::feasible == false with
// the error filled. Throws InputError for plans that do not match the trace/machine.
RunResult simulate(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options = {});

} // namespace memsim
