#pragma once
// The framework's default schedule (keep-all without a budget): every op in trace order, every tensor freed after
// the op the framework released it at (free_after) or its last use. The online planner runs it under a policy.
#include "memsim/planners/plan.hpp"
#include "memsim/sim/trace_analysis.hpp"

namespace memsim {

Plan default_schedule(const Trace& trace, const TraceAnalysis& analysis);

} // namespace memsim
