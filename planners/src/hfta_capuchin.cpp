// hfta-capuchin: HFTA+Capuchin, μ-TWO's second baseline (shared/specs/mu-two.md §7.2): all N models fused into one
// graph (fuse_trace, efficiency model, as `hfta` and the `models` axis fuse), run FW then BW every iteration, with
// μ-TWO's swap/recompute scheduler and no multiplexing (capuchin_schedule.hpp). The fused graph travels in the
// plan's extras as one scoped instance, as hfta's subsets do.
#include "capuchin_schedule.hpp"
#include "fused_extras.hpp"
#include "fused_models_param.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

namespace memsim {
namespace {

struct HftaCapuchinOptions : planning::FusedModels {
  std::string offload_release = "safe";
};

Plan plan_hfta_capuchin(const Trace& trace, const Machine& machine, const PlanRequest& request,
                        const HftaCapuchinOptions& options)
{
  const Trace fused = fuse_trace(trace, options.models, FusionModel::efficiency, std::nullopt, trace.name);
  planning::CapuchinOptions scheduling;
  scheduling.planner = "hfta-capuchin";
  scheduling.budget_bytes = request.budget_bytes;
  scheduling.offload_release =
      options.offload_release == "paper" ? planning::OffloadRelease::paper : planning::OffloadRelease::safe;
  const planning::CapuchinSchedule schedule = planning::schedule_capuchin(fused, machine, scheduling);

  Plan plan;
  const planning::ExtraBlock block = planning::append_as_extras(plan, trace, fused);
  planning::append_block_steps(plan, schedule.plan.steps, block, 0);
  if (!plan.steps.empty())
    plan.instance_scopes.push_back(InstanceScope{0, 0, static_cast<StepId>(plan.steps.size()) - 1});
  plan.estimate.iteration_time_s = schedule.estimate_s;
  plan.estimate.peak_bytes = schedule.plan.estimate.peak_bytes;
  int swaps = 0, recomputes = 0;
  nlohmann::json decisions = nlohmann::json::array();
  for (const planning::CapuchinChoice& choice : schedule.choices) {
    const bool swap = choice.decision == planning::Decision::swap;
    ++(swap ? swaps : recomputes);
    decisions.push_back({{"tensor", fused.tensor(choice.tensor).name},
                         {"choice", swap ? "swap" : "recompute"},
                         {"overhead_s", choice.overhead_s}});
  }
  plan.params["partition"] = fmt::format("{}", options.models);
  plan.params["swapped_bytes"] = schedule.swapped_bytes;
  plan.params["recomputed_bytes"] = schedule.recomputed_bytes;
  plan.params["swaps"] = swaps;
  plan.params["recomputes"] = recomputes;
  plan.params["decisions"] = std::move(decisions); // in order, with the overhead each was chosen on
  // One instance trains all N models: the fused trace's count, not the single model's.
  plan.samples_per_iteration = trace_samples_per_iteration(fused);
  return plan;
}

} // namespace

MEMSIM_REGISTER_PLANNER(hfta_capuchin, "hfta-capuchin",
                        "HFTA+Capuchin (mu-TWO's baseline): all N models fused into one graph, FW then BW, with "
                        "mu-TWO's swap/recompute choice (largest inactive time vs. most bytes per recompute second, "
                        "the cheaper wins) and no multiplexing, until the plan fits on the fast engine; records "
                        "`partition` (\"N\"), `swapped_bytes`, `recomputed_bytes`, `swaps`, `recomputes`, `decisions`",
                        {planning::models_param<HftaCapuchinOptions>(),
                         param("offload_release", &HftaCapuchinOptions::offload_release,
                               "when the scheduler's memory replay stops counting an offloaded tensor: safe = once "
                               "the op running when its D2H ends has finished; paper = at its last forward use "
                               "(Alg. G)",
                               {.choices = {"safe", "paper"}})},
                        plan_hfta_capuchin);

} // namespace memsim
