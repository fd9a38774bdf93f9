// keep-all: the framework's default schedule. Every op in trace order; every tensor stays until the framework
// released it (free_after) or its last use.
#include "default_schedule.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

namespace memsim {

Plan default_schedule(const Trace& trace, const TraceAnalysis& analysis)
{
  Plan plan;
  PlanBuilder builder(plan);
  for (const Op& op : trace.ops) {
    builder.compute(op.id);
    for (TensorId id : analysis.released_after(op.id))
      builder.free(id);
  }
  plan.estimate.peak_bytes = analysis.default_profile().peak_bytes;
  return plan;
}

namespace {

Plan plan_keep_all(const Trace& trace, const Machine&, const PlanRequest& request, const NoOptions&)
{
  const TraceAnalysis analysis(trace);
  const MemoryProfile& profile = analysis.default_profile();
  if (profile.peak_bytes > request.budget_bytes)
    throw Infeasible(fmt::format("keep-all needs {} ({} bytes, peak at op {} '{}'), budget is {} ({} bytes)",
                                 units::format_bytes(static_cast<double>(profile.peak_bytes)), profile.peak_bytes,
                                 profile.peak_op, trace.op(profile.peak_op).name,
                                 units::format_bytes(static_cast<double>(request.budget_bytes)), request.budget_bytes));
  return default_schedule(trace, analysis);
}

} // namespace

MEMSIM_REGISTER_PLANNER(keep_all, "keep-all",
                        "framework default: ops in trace order, every tensor kept until its last use (or free_after)",
                        {}, plan_keep_all);

} // namespace memsim
