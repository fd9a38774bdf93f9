#include "run_setup.hpp"

#include "memsim/common/policy_registry.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/sim/fast_engine.hpp"
#include "memsim/sim/memory_policy.hpp"

#include <algorithm>
#include <memory>

namespace memsim {
namespace {

// The run's policy: the options' choice, else the plan's; none for "none".
std::unique_ptr<MemoryPolicy> make_policy(const Plan& plan, const SimOptions& options)
{
  const std::optional<PolicyChoice>& choice = options.policy ? options.policy : plan.policy;
  if (!choice || choice->name == "none")
    return nullptr;
  const PolicyInfo& info = policy_registry().get(choice->name);
  return info.make(policy_registry().complete_params(info, choice->params));
}

} // namespace

RunResult run_with_setup(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options,
                         const Engine& engine)
{
  validate_plan(plan, trace, static_cast<int>(machine.gpus.size()), plan.planner.empty() ? "plan" : plan.planner);
  // Only a plan with extra ops/tensors needs a trace of its own (a copy of a large trace costs as much as its parse).
  Trace with_extras;
  const bool extended_needed = !plan.extra_ops.empty() || !plan.extra_tensors.empty();
  if (extended_needed)
    with_extras = trace_with_extras(trace, plan);
  const Trace& extended = extended_needed ? with_extras : trace;
  ExecutionConfig config;
  config.record_timeline = options.record_timeline;
  config.build_realized_plan = options.realized_plan;
  const std::unique_ptr<MemoryPolicy> policy = make_policy(plan, options);
  config.policy = policy.get();
  config.machine = &machine;
  config.memory.allocator = options.allocator;
  for (const Gpu& gpu : machine.gpus) {
    config.memory.device_capacity.push_back(plan.budget_bytes == 0 ? gpu.memory
                                                                   : std::min(plan.budget_bytes, gpu.memory));
    config.device_names.push_back(gpu.name);
  }
  if (machine.host.memory != 0)
    config.memory.host_capacity = machine.host.memory;
  const CostModel cost(extended, machine);
  const OpTime op_time = [&](const Op& op, int node) {
    return node == kHostNode ? cost.host_op_time(op) : cost.op_time(op, static_cast<std::size_t>(node));
  };
  return engine(extended, config, op_time);
}

RunResult simulate_fast(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options)
{
  return run_with_setup(trace, machine, plan, options,
                        [&](const Trace& extended, const ExecutionConfig& config, const OpTime& op_time) {
                          const NetworkModel network = build_network_model(machine);
                          FastPhysics physics(network);
                          return execute_plan(extended, plan, config, op_time, physics);
                        });
}

} // namespace memsim
