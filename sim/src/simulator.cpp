#include "memsim/sim/simulator.hpp"

#include "memsim/sim/simgrid_engine.hpp"

#include "run_setup.hpp"

#include <array>

namespace memsim {

namespace {
constexpr std::array<std::pair<EngineKind, std::string_view>, 2> kEngineKinds{{
    {EngineKind::simgrid, "simgrid"},
    {EngineKind::fast, "fast"},
}};
} // namespace

std::string_view to_string(EngineKind kind)
{
  for (const auto& [value, name] : kEngineKinds)
    if (value == kind)
      return name;
  return "simgrid";
}

std::optional<EngineKind> engine_kind_from_string(std::string_view text)
{
  for (const auto& [value, name] : kEngineKinds)
    if (name == text)
      return value;
  return std::nullopt;
}

RunResult simulate(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options)
{
  if (options.engine == EngineKind::fast)
    return simulate_fast(trace, machine, plan, options);
  return run_with_setup(trace, machine, plan, options,
                        [&](const Trace& extended, const ExecutionConfig& config, const OpTime& op_time) {
                          return simulate_with_simgrid(extended, plan, machine, config, op_time);
                        });
}

} // namespace memsim
