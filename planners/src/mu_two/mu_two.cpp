// mu-two: μ-TWO (Purandare et al., MLSys 2023; shared/specs/mu-two.md): N copies of the trace's model trained
// together on one GPU. Every candidate partition into fused sub-arrays (partitions.hpp) is scheduled and run on the
// fast engine; the fastest steady iteration wins and is recorded. The single sub-array {N} is HFTA+Capuchin's
// schedule (all_fused_capuchin.hpp); two or more sub-arrays train in a ring (ring_trace.hpp) whose merged graphs
// multiplex one sub-array's backward with the next one's forward, with μ-TWO's swap/recompute choice
// (ring_schedule.hpp). The ring is one instance: all sub-arrays' weights stay resident (A6 `ring`).
#include "partitions.hpp"
#include "ring_schedule.hpp"

#include "../all_fused_capuchin.hpp"
#include "../fused_copies.hpp"
#include "../fused_extras.hpp"
#include "../fused_models_param.hpp"
#include "../swap_choice_params.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <optional>

namespace memsim {
namespace {

struct MuTwoOptions : planning::FusedModels, planning::SwapChoiceParams {
  std::string partitions = "paper";
  bool include_full_fusion = true;
  std::string pair_mode = "ring";
  bool multiplex = true;
  int cycles = 3;
};

// A ring of fused sub-arrays as a plan on the original trace: the unrolled ring in the extras, one instance.
Plan ring_plan(const Trace& trace, const Machine& machine, const PlanRequest& request, const MuTwoOptions& options,
               const std::vector<int>& sizes)
{
  std::map<int, Trace> fused;
  std::vector<const Trace*> graphs;
  for (int size : sizes)
    if (!fused.count(size))
      fused.emplace(size, planning::fused_copies(trace, size, options, "mu-two"));
  for (int size : sizes)
    graphs.push_back(&fused.at(size));
  planning::mu_two::RingOptions scheduling;
  scheduling.budget_bytes = request.budget_bytes;
  scheduling.offload_release = options.release();
  scheduling.idle_metric = options.metric();
  scheduling.cycles = options.cycles;
  scheduling.multiplex = options.multiplex;
  planning::mu_two::RingSchedule schedule = planning::mu_two::schedule_ring(graphs, machine, scheduling);

  Plan plan;
  const planning::ExtraBlock block = planning::append_as_extras(plan, trace, schedule.ring.trace);
  planning::append_block_steps(plan, schedule.plan.steps, block, 0);
  // Scoped, so that only the ring's tensors are resident (not the single model's own weights and input).
  if (!plan.steps.empty())
    plan.instance_scopes.push_back(InstanceScope{0, 0, static_cast<StepId>(plan.steps.size()) - 1});
  plan.estimate = schedule.plan.estimate;
  int swaps = 0, recomputes = 0;
  std::map<std::string, int> cases;
  for (const auto& decision : schedule.decisions) {
    if (decision.decision == planning::Decision::swap) {
      ++swaps;
      ++cases[decision.swap_case];
    } else {
      ++recomputes;
    }
  }
  plan.params["swapped_bytes"] = schedule.swapped_bytes;
  plan.params["recomputed_bytes"] = schedule.recomputed_bytes;
  plan.params["swaps"] = swaps;
  plan.params["recomputes"] = recomputes;
  plan.params["swap_cases"] = cases;
  plan.params["multiplexed_ops"] = schedule.multiplexed_ops;
  // Before any memory optimization (Fig. 9d): the ring of these sub-arrays, unmultiplexed, keeping everything.
  plan.params["keep_all_peak_bytes"] =
      TraceAnalysis(planning::mu_two::build_ring_trace(graphs, options.cycles).trace).default_profile().peak_bytes;
  if (const std::optional<std::int64_t> samples = trace_samples_per_iteration(trace))
    plan.samples_per_iteration = *samples * options.models;
  return plan;
}

Plan plan_mu_two(const Trace& trace, const Machine& machine, const PlanRequest& request, const MuTwoOptions& options)
{
  std::optional<Plan> best;
  double best_s = std::numeric_limits<double>::infinity();
  nlohmann::json tried = nlohmann::json::array();
  for (const std::vector<int>& sizes :
       planning::mu_two::candidate_partitions(options.models, options.partitions, options.include_full_fusion)) {
    const std::string name = planning::mu_two::partition_text(sizes);
    nlohmann::json row = {{"partition", name}};
    try {
      // The single sub-array {N} holds all options.models models.
      Plan plan = sizes.size() == 1
                      ? planning::all_fused_capuchin(trace, machine, request.budget_bytes, options, options, "mu-two")
                      : ring_plan(trace, machine, request, options, sizes);
      plan.budget_bytes = request.budget_bytes;
      SimOptions simulation;
      simulation.record_timeline = false;
      const RunResult run = simulate_fast(trace, machine, plan, simulation);
      if (run.error || !run.metrics.feasible) {
        row["infeasible"] = run.error ? run.error->message : "infeasible";
      } else {
        const double steady = run.metrics.steady_iteration_time_s;
        row["steady_iteration_time_s"] = steady;
        if (plan.estimate.iteration_time_s)
          row["estimate_s"] = *plan.estimate.iteration_time_s;
        if (steady < best_s) {
          best_s = steady;
          plan.params["partition"] = name;
          best = std::move(plan);
        }
      }
    } catch (const Infeasible& error) {
      row["infeasible"] = error.what();
    }
    tried.push_back(std::move(row));
  }
  if (!best)
    throw Infeasible(fmt::format("mu-two: no partition of {} models fits {} bytes: {}", options.models,
                                 request.budget_bytes, tried.dump()));
  best->params["candidates"] = std::move(tried); // every partition tried: its steady time or why it failed
  best->params["pair_mode"] = options.pair_mode;
  return *best;
}

} // namespace

MEMSIM_REGISTER_PLANNER(
    mu_two, "mu-two",
    "mu-TWO: N models on one GPU; tries partitions into fused sub-arrays (the single {N} is HFTA+Capuchin's "
    "schedule; two or more train in a ring whose merged graphs multiplex one sub-array's backward with the next one's "
    "forward, with mu-TWO's swap/recompute choice), runs each on the fast engine and keeps the fastest steady "
    "iteration; records `partition`, `candidates`, `swaps`, `recomputes`, `swap_cases`, `multiplexed_ops`",
    {planning::models_param<MuTwoOptions>(), planning::fusion_param<MuTwoOptions>(),
     param("partitions", &MuTwoOptions::partitions,
           "paper = the sizes of the paper's example rule (N = 8: 4+4, 3+3+1+1, 2+2+2+2, 1x8); all = every partition "
           "into two or more sub-arrays; none = only {N} (with include_full_fusion: HFTA+Capuchin's schedule)",
           {.choices = {"paper", "all", "none"}}),
     param("include_full_fusion", &MuTwoOptions::include_full_fusion,
           "also try the single sub-array {N} (no multiplexing: HFTA+Capuchin's schedule)"),
     param("pair_mode", &MuTwoOptions::pair_mode,
           "ring = sub-arrays in a ring, BW_j multiplexed with FW_{j+1}, every sub-array's weights resident (spec A6; "
           "`sequential` pairs need per-pair iteration marks the core does not have)",
           {.choices = {"ring"}}),
     param("multiplex", &MuTwoOptions::multiplex,
           "move forward ops of the next sub-array into a backward to hide prefetches (false: BW_j, then FW_{j+1})"),
     param("cycles", &MuTwoOptions::cycles, "ring cycles emitted; the steady iteration is their mean from the second",
           {.min = 1, .max = 64}),
     planning::offload_release_param<MuTwoOptions>(), planning::idle_metric_param<MuTwoOptions>()},
    plan_mu_two);

} // namespace memsim
