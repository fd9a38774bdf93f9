// online: a run-time memory policy (lru-swap; DTR, UVM and DyNN-Offload as they land) used as a planner. The
// framework's default schedule runs on the fast engine under the policy with the budget as the GPU's memory; the
// plan is what happened -- the realized plan, the policy's actions as ordinary steps with the deps that keep it
// memory-safe under any timing -- so experiments, max-scale searches and memsim-cuda run a policy like any planner,
// and replaying the plan on either engine gives the run's result.
#include "default_schedule.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/policy_registry.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"

#include <fmt/format.h>

#include <sstream>

namespace memsim {
namespace {

struct OnlineOptions {
  std::string policy = "lru-swap";
  std::string policy_params;  // "name=value,name=value", in the policy's own declared parameters
  bool start_on_host = false; // inputs, weights and optimizer state start on the host (DyNN-Offload, §1.7)
};

std::vector<std::string> comma_separated(const std::string& text)
{
  std::vector<std::string> items;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty())
      items.push_back(item);
  return items;
}

Plan plan_online(const Trace& trace, const Machine& machine, const PlanRequest& request, const OnlineOptions& options)
{
  const PolicyRegistry& policies = policy_registry();
  const PolicyInfo& info = policies.get(options.policy);
  Plan schedule = default_schedule(trace, TraceAnalysis(trace));
  schedule.budget_bytes = request.budget_bytes;
  if (options.start_on_host)
    for (TensorKind kind : {TensorKind::input, TensorKind::weight, TensorKind::optimizer_state})
      schedule.initial_placement.push_back(PlacementRule{kind, std::nullopt, Placement::host, std::nullopt});
  SimOptions simulation;
  simulation.record_timeline = false;
  simulation.realized_plan = true;
  simulation.policy = PolicyChoice{info.name, policies.parse_assignments(info, comma_separated(options.policy_params),
                                                                         "policy_params")};
  RunResult run = simulate_fast(trace, machine, schedule, simulation);
  if (!run.metrics.feasible || run.error || !run.realized_plan)
    throw Infeasible(fmt::format("the default schedule under policy '{}' does not run in the budget: {}", info.name,
                                 run.error ? run.error->message : "infeasible"));
  Plan plan = std::move(*run.realized_plan);
  plan.estimate.iteration_time_s = run.metrics.iteration_time_s;
  plan.estimate.peak_bytes = run.metrics.peak_device_bytes;
  return plan;
}

} // namespace

MEMSIM_REGISTER_PLANNER(online, "online",
                        "a run-time memory policy as a planner: the default schedule runs under the policy on the "
                        "fast engine at the budget, and the plan is what happened (the realized plan)",
                        {param("policy", &OnlineOptions::policy, "the policy (see `memsim policies`)"),
                         param("policy_params", &OnlineOptions::policy_params,
                               "the policy's parameters as name=value, comma-separated"),
                         param("start_on_host", &OnlineOptions::start_on_host,
                               "inputs, weights and optimizer state start on the host, not the GPU (DyNN-Offload's "
                               "allocator redirect: the policy brings them in)")},
                        plan_online);

} // namespace memsim
