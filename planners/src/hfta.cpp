// hfta: HFTA without memory optimisation (μ-TWO's baseline; shared/specs/mu-two.md §7.1). N copies of the trace's
// model train together: k* = the most copies whose fused graph (fused_copies under the `fusion` parameter; its
// default, efficiency, is how the `models` axis fuses) fits the budget under keep-all. N <= k*: one fused array of N.
// Else the models are cut into subsets of at most k* (greedy: floor(N/k*) of k* and one of the rest; balanced:
// ceil(N/k*) near-equal), trained one after another, each a keep-all schedule of its fused graph as its own instance.
// The subsets are separate trainings, so each holds its weights only while it runs: one instance scope per subset
// (sim/README.md "instance_scopes").
#include "default_schedule.hpp"
#include "fused_copies.hpp"
#include "fused_extras.hpp"
#include "fused_models_param.hpp"
#include "mu_two/partitions.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace memsim {
namespace {

struct HftaOptions : planning::FusedModels {
  std::string subsets = "greedy";
};

// The trace's model fused k times under the options' fusion model.
Trace fused(const Trace& trace, int k, const HftaOptions& options)
{
  return planning::fused_copies(trace, k, options, "hfta");
}

std::uint64_t keep_all_peak(const Trace& trace) { return TraceAnalysis(trace).default_profile().peak_bytes; }

// The most copies (at most `limit`: more are never used) whose fused keep-all peak fits `budget`; 0 when one
// model does not fit. Bytes scale with k, so the peak is k x one model's up to rounding: start there, then check.
int largest_fitting(const Trace& trace, int limit, std::uint64_t budget, const HftaOptions& options)
{
  const std::uint64_t one = keep_all_peak(trace);
  if (one > budget)
    return 0;
  auto fits = [&](int k) { return keep_all_peak(fused(trace, k, options)) <= budget; };
  int k = one == 0 ? limit : static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(limit), budget / one));
  k = std::max(k, 1);
  while (k > 1 && !fits(k))
    --k;
  while (k < limit && fits(k + 1))
    ++k;
  return k;
}

// Subset sizes in training order.
std::vector<int> partition(int models, int largest, const std::string& rule)
{
  std::vector<int> sizes;
  if (rule == "balanced") {
    const int count = (models + largest - 1) / largest;
    for (int i = 0; i < count; ++i)
      sizes.push_back(models / count + (i < models % count ? 1 : 0));
    return sizes;
  }
  sizes.assign(static_cast<std::size_t>(models / largest), largest);
  if (models % largest > 0)
    sizes.push_back(models % largest);
  return sizes;
}

// One fused size's ops and tensors, appended to the plan's extras with their ids moved after the trace's and the
// blocks before it; `op_base` maps the fused trace's op ids to the plan's.
struct FusedBlock {
  Trace trace; // the fused graph, its own ids
  OpId op_base = 0;
  TensorId tensor_base = 0;
  double time_s = 0; // its keep-all time on the fast engine
  std::uint64_t peak_bytes = 0;
};

FusedBlock append_block(Plan& plan, const Trace& base, int k, const Machine& machine, std::uint64_t budget,
                        const HftaOptions& options)
{
  FusedBlock block;
  block.trace = fused(base, k, options);
  const planning::ExtraBlock ids = planning::append_as_extras(plan, base, block.trace);
  block.op_base = ids.op_base;
  block.tensor_base = ids.tensor_base;
  const TraceAnalysis analysis(block.trace);
  Plan keep_all = default_schedule(block.trace, analysis);
  keep_all.budget_bytes = budget;
  SimOptions simulation;
  simulation.record_timeline = false;
  const RunResult run = simulate_fast(block.trace, machine, keep_all, simulation);
  if (run.error || !run.metrics.feasible)
    throw Infeasible(fmt::format("hfta: keep-all of {} fused models does not run in the budget: {}", k,
                                 run.error ? run.error->message : "infeasible"));
  block.time_s = run.metrics.iteration_time_s;
  block.peak_bytes = analysis.default_profile().peak_bytes;
  return block;
}

Plan plan_hfta(const Trace& trace, const Machine& machine, const PlanRequest& request, const HftaOptions& options)
{
  (void)planning::fusion_model(options, "hfta"); // an unusable fusion model fails before any planning
  const int largest = largest_fitting(trace, options.models, request.budget_bytes, options);
  if (largest == 0) {
    const std::uint64_t one = keep_all_peak(trace);
    throw Infeasible(fmt::format("hfta: not even one model fits: keep-all of one needs {} ({} bytes), budget is {} "
                                 "({} bytes)",
                                 units::format_bytes(static_cast<double>(one)), one,
                                 units::format_bytes(static_cast<double>(request.budget_bytes)), request.budget_bytes));
  }
  const std::vector<int> sizes = partition(options.models, largest, options.subsets);
  Plan plan;
  std::map<int, FusedBlock> blocks; // by fused size, in order of first use
  for (int size : sizes)
    if (!blocks.count(size))
      blocks.emplace(size, append_block(plan, trace, size, machine, request.budget_bytes, options));
  PlanBuilder builder(plan);
  double estimate = 0;
  std::uint64_t peak = 0;
  for (std::size_t subset = 0; subset < sizes.size(); ++subset) {
    const FusedBlock& block = blocks.at(sizes[subset]);
    const auto instance = static_cast<int>(subset);
    const auto first = static_cast<StepId>(plan.steps.size());
    const TraceAnalysis analysis(block.trace);
    for (const Op& op : block.trace.ops) {
      builder.compute(op.id + block.op_base, {}, 0, instance);
      for (TensorId id : analysis.released_after(op.id))
        builder.free(id + block.tensor_base, {}, "compute", 0, instance);
    }
    plan.instance_scopes.push_back(InstanceScope{instance, first, builder.last()});
    estimate += block.time_s;
    peak = std::max(peak, block.peak_bytes);
  }
  plan.estimate.iteration_time_s = estimate;
  plan.estimate.peak_bytes = peak;
  plan.params["partition"] = planning::mu_two::partition_text(sizes);
  plan.params["largest_fused"] = largest;
  plan.params["keep_all_peak_bytes"] = peak; // the configuration's peak before any memory optimization (Fig. 9d)
  // Each subset is one instance that trains several models: the core's default (samples x instances) would count
  // subsets, not models.
  if (const std::optional<std::int64_t> samples = trace_samples_per_iteration(trace))
    plan.samples_per_iteration = *samples * options.models;
  return plan;
}

} // namespace

MEMSIM_REGISTER_PLANNER(hfta, "hfta",
                        "HFTA without memory optimisation (mu-TWO's baseline): N copies of the model fused into as "
                        "few keep-all arrays as fit the budget, trained one after another, each holding its weights "
                        "only while it runs; records `partition` (\"4+4+2\") and `largest_fused` (k*, at most N)",
                        {planning::models_param<HftaOptions>(), planning::fusion_param<HftaOptions>(),
                         param("subsets", &HftaOptions::subsets,
                               "N > k*: greedy = floor(N/k*) subsets of k* and one of the rest; balanced = "
                               "ceil(N/k*) near-equal subsets",
                               {.choices = {"greedy", "balanced"}})},
                        plan_hfta);

} // namespace memsim
