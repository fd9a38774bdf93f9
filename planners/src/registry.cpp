#include "memsim/planners/planner.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace memsim {

PlannerRegistry& planner_registry()
{
  static PlannerRegistry registry("planner");
  return registry;
}

namespace {

// A multi-iteration trace (a dynamic network) reports per-iteration times only when steps carry `iteration`. Most
// planners build steps from ops and never set it, so it is filled here, once for all of them: a step with an op takes
// its op's iteration; any other step (a transfer, a free) the iteration of the nearest op step before it in plan
// order, or of the first op step when none precedes it. Plans that set iterations themselves are left as they are.
void stamp_iterations(const Trace& trace, Plan& plan)
{
  const auto multi_iteration = [](const Op& op) { return op.iteration != 0; };
  if (std::none_of(trace.ops.begin(), trace.ops.end(), multi_iteration))
    return;
  if (std::any_of(plan.steps.begin(), plan.steps.end(), [](const Step& step) { return step.iteration != 0; }))
    return;
  const auto op_iteration = [&](OpId id) {
    const auto index = static_cast<std::size_t>(id);
    return index < trace.ops.size() ? trace.ops[index].iteration
                                    : plan.extra_ops.at(index - trace.ops.size()).iteration;
  };
  const auto first_op_step =
      std::find_if(plan.steps.begin(), plan.steps.end(), [](const Step& step) { return step.op.has_value(); });
  int current = first_op_step == plan.steps.end() ? 0 : op_iteration(*first_op_step->op);
  for (Step& step : plan.steps) {
    if (step.op)
      current = op_iteration(*step.op);
    step.iteration = current;
  }
}

} // namespace

nlohmann::json parse_param_assignments(const PlannerInfo& info, const std::vector<std::string>& assignments)
{
  return planner_registry().parse_assignments(info, assignments);
}

Plan make_plan(const std::string& planner, const Trace& trace, const Machine& machine, const PlanRequest& request)
{
  const PlannerRegistry& registry = planner_registry();
  const PlannerInfo& info = registry.get(planner);
  PlanRequest completed = request;
  const std::uint64_t gpu_memory = machine.gpus.at(0).memory;
  if (completed.budget_bytes == 0)
    completed.budget_bytes = gpu_memory;
  if (completed.budget_bytes > gpu_memory)
    throw InputError("--budget",
                     fmt::format("budget {} exceeds the memory of GPU '{}' ({})",
                                 units::format_bytes(static_cast<double>(completed.budget_bytes)), machine.gpus[0].name,
                                 units::format_bytes(static_cast<double>(gpu_memory))));
  completed.params = registry.complete_params(info, request.params);
  Plan plan = info.make(trace, machine, completed);
  stamp_iterations(trace, plan);
  plan.trace = trace.name;
  plan.machine = machine.name;
  plan.planner = info.name;
  // Keys a planner reports about its result (dynn-block's blocks) follow the declared parameters.
  nlohmann::json reported = std::move(plan.params);
  plan.params = completed.params;
  if (reported.is_object())
    for (auto& [key, value] : reported.items())
      if (!plan.params.contains(key))
        plan.params[key] = value;
  plan.budget_bytes = completed.budget_bytes;
  return plan;
}

} // namespace memsim
