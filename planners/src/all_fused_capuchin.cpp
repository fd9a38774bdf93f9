#include "all_fused_capuchin.hpp"

#include "fused_copies.hpp"
#include "fused_extras.hpp"

#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

namespace memsim::planning {

Plan all_fused_capuchin(const Trace& trace, const Machine& machine, std::uint64_t budget_bytes,
                        const FusedModels& options, const SwapChoiceParams& choice, const char* planner)
{
  const Trace fused = fused_copies(trace, options.models, options, planner);
  CapuchinOptions scheduling;
  scheduling.planner = planner;
  scheduling.budget_bytes = budget_bytes;
  scheduling.offload_release = choice.release();
  scheduling.idle_metric = choice.metric();
  const CapuchinSchedule schedule = schedule_capuchin(fused, machine, scheduling);

  Plan plan;
  const ExtraBlock block = append_as_extras(plan, trace, fused);
  append_block_steps(plan, schedule.plan.steps, block, 0);
  if (!plan.steps.empty())
    plan.instance_scopes.push_back(InstanceScope{0, 0, static_cast<StepId>(plan.steps.size()) - 1});
  plan.estimate.iteration_time_s = schedule.estimate_s;
  plan.estimate.peak_bytes = schedule.plan.estimate.peak_bytes;
  int swaps = 0, recomputes = 0;
  nlohmann::json decisions = nlohmann::json::array();
  for (const CapuchinChoice& choice : schedule.choices) {
    const bool swap = choice.decision == Decision::swap;
    ++(swap ? swaps : recomputes);
    decisions.push_back({{"tensor", fused.tensor(choice.tensor).name},
                         {"choice", swap ? "swap" : "recompute"},
                         {"overhead_s", choice.overhead_s}});
  }
  plan.params["partition"] = fmt::format("{}", options.models);
  plan.params["keep_all_peak_bytes"] = TraceAnalysis(fused).default_profile().peak_bytes; // before optimization

  plan.params["swapped_bytes"] = schedule.swapped_bytes;
  plan.params["recomputed_bytes"] = schedule.recomputed_bytes;
  plan.params["swaps"] = swaps;
  plan.params["recomputes"] = recomputes;
  plan.params["decisions"] = std::move(decisions); // in order, with the overhead each was chosen on
  // One instance trains all N models: the fused trace's count, not the single model's.
  plan.samples_per_iteration = trace_samples_per_iteration(fused);
  return plan;
}

} // namespace memsim::planning
