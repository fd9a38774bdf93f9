#include "memsim/planners/planner.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"

#include <fmt/format.h>

namespace memsim {

PlannerRegistry& planner_registry()
{
  static PlannerRegistry registry("planner");
  return registry;
}

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
