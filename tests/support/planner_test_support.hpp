#pragma once
// What planner tests share: a one-GPU machine with a 1 GB/s host link (1 MB moves in 1 ms), a planner run that also
// validates its plan, and generated traces timed by a fixed test roofline.
#include "test_machines.hpp"

#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/traces/generator_registry.hpp"
#include "memsim/traces/generators.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace memsim::test {

// `planner`'s plan of `trace` on a one-GPU `machine` at `budget`, validated.
inline Plan plan_on(const std::string& planner, const Trace& trace, const Machine& machine, std::uint64_t budget,
                    nlohmann::json params = {})
{
  PlanRequest request;
  request.budget_bytes = budget;
  request.params = params.is_null() ? nlohmann::json::object() : std::move(params);
  Plan plan = make_plan(planner, trace, machine, request);
  validate_plan(plan, trace, 1, planner);
  return plan;
}

inline Plan plan_with(const std::string& planner, const Trace& trace, std::uint64_t budget, nlohmann::json params = {})
{
  return plan_on(planner, trace, one_gpu_machine(), budget, std::move(params));
}

// A generator's trace with every op timed by one roofline (14 TFLOP/s, 900 GB/s, 5 us launch).
inline Trace generated(const std::string& kind, const nlohmann::json& params)
{
  const GeneratorRegistry& registry = generator_registry();
  const GeneratorInfo& info = registry.get(kind);
  return info.make(registry.complete_params(info, params), [](const std::string&) {
    return Roofline{14e12, 900e9, 5e-6, "test-gpu"};
  });
}

} // namespace memsim::test
