// mu-two: μ-TWO (Purandare et al., MLSys 2023; shared/specs/mu-two.md): N copies of the trace's model trained
// together on one GPU. Every candidate partition into fused sub-arrays (partitions.hpp) is scheduled and run on the
// fast engine; the fastest steady iteration wins and is recorded. The single sub-array {N} is HFTA+Capuchin's
// schedule (all_fused_capuchin.hpp); two or more sub-arrays train in a ring (ring_trace.hpp) whose merged graphs
// multiplex one sub-array's backward with the next one's forward, with μ-TWO's swap/recompute choice
// (ring_schedule.hpp). `pair_mode` (A6) says whose weights stay resident: `ring` trains all sub-arrays in one ring,
// one instance, every sub-array's weights resident; `sequential` pairs neighbouring sub-arrays (an odd one out runs
// FW then BW alone, HFTA+Capuchin's schedule) and trains each pair as its own ring, one after another: each pair is
// an instance whose scope holds only its own weights and optimizer state, and a loop of its own, so the steady
// iteration is the sum of the pairs' steady periods (sim/README.md "Iterations"). The pairs are independent
// trainings (each runs all its iterations before the next starts), so moving a pair's static memory in and out happens
// once per training, not per iteration, and is not charged: the same reading as hfta's sequential subsets.
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

#include <algorithm>
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

// What the scheduled sub-arrays add up to, for the plan's params.
struct ScheduleTotals {
  std::uint64_t swapped_bytes = 0, recomputed_bytes = 0;
  int swaps = 0, recomputes = 0;
  std::map<std::string, int> swap_cases;
  std::size_t multiplexed_ops = 0;
  std::uint64_t keep_all_peak_bytes = 0; // the largest of the resident configurations (Fig. 9d)
};

// Appends `steps` (on `block`'s ids) as `instance`, scoped to them (so that only their tensors are resident, not the
// single model's own weights and input), in loop `loop`; a loop after the first starts when the one before ends.
void append_scoped(Plan& plan, const std::vector<Step>& steps, const planning::ExtraBlock& block, int instance,
                   int loop)
{
  const auto first = static_cast<StepId>(plan.steps.size());
  planning::append_block_steps(plan, steps, block, instance);
  if (plan.steps.size() == static_cast<std::size_t>(first))
    return;
  for (std::size_t i = static_cast<std::size_t>(first); i < plan.steps.size(); ++i)
    plan.steps[i].loop = loop;
  if (first > 0)
    plan.steps[static_cast<std::size_t>(first)].deps.push_back(first - 1);
  plan.instance_scopes.push_back(InstanceScope{instance, first, static_cast<StepId>(plan.steps.size()) - 1});
}

// A ring of fused sub-arrays (`sizes`, in ring order) appended to `plan`: the unrolled ring in the extras, its steps
// as `instance` in `loop`. Returns the ring's estimated steady cycle.
double append_ring(Plan& plan, const Trace& trace, const Machine& machine, const PlanRequest& request,
                   const MuTwoOptions& options, const std::vector<int>& sizes, int instance, int loop,
                   ScheduleTotals& totals)
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
  scheduling.progress = request.progress;
  scheduling.state_dir = request.state_dir;
  const bool uniform = std::all_of(sizes.begin(), sizes.end(), [&](int size) { return size == sizes.front(); });
  scheduling.label = uniform ? fmt::format("ring {}x{}", sizes.size(), sizes.front())
                             : "ring " + planning::mu_two::partition_text(sizes);
  planning::mu_two::RingSchedule schedule = planning::mu_two::schedule_ring(graphs, machine, scheduling);

  const planning::ExtraBlock block = planning::append_as_extras(plan, trace, schedule.ring.trace);
  append_scoped(plan, schedule.plan.steps, block, instance, loop);
  for (const auto& decision : schedule.decisions) {
    if (decision.decision == planning::Decision::swap) {
      ++totals.swaps;
      ++totals.swap_cases[decision.swap_case];
    } else {
      ++totals.recomputes;
    }
  }
  totals.swapped_bytes += schedule.swapped_bytes;
  totals.recomputed_bytes += schedule.recomputed_bytes;
  totals.multiplexed_ops += schedule.multiplexed_ops;
  // Before any memory optimization (Fig. 9d): the ring of these sub-arrays, unmultiplexed, keeping everything.
  totals.keep_all_peak_bytes = std::max(
      totals.keep_all_peak_bytes,
      TraceAnalysis(planning::mu_two::build_ring_trace(graphs, options.cycles).trace).default_profile().peak_bytes);
  plan.estimate.peak_bytes =
      std::max(plan.estimate.peak_bytes.value_or(0), schedule.plan.estimate.peak_bytes.value_or(0));
  return schedule.plan.estimate.iteration_time_s.value_or(0);
}

// A sub-array without a partner (sequential pairs, an odd count): FW then BW alone, HFTA+Capuchin's schedule of its
// fused graph, appended as `instance` in `loop` once per cycle (iteration c, a scope each: the pairs' rings run
// `cycles` iterations, so every loop's iteration_times_s line up). Returns its estimated iteration.
double append_alone(Plan& plan, const Trace& trace, const Machine& machine, const PlanRequest& request,
                    const MuTwoOptions& options, int size, int instance, int loop, ScheduleTotals& totals)
{
  const Trace fused = planning::fused_copies(trace, size, options, "mu-two");
  planning::CapuchinOptions scheduling;
  scheduling.planner = "mu-two";
  scheduling.budget_bytes = request.budget_bytes;
  scheduling.offload_release = options.release();
  scheduling.idle_metric = options.metric();
  const planning::CapuchinSchedule schedule = planning::schedule_capuchin(fused, machine, scheduling);
  const planning::ExtraBlock block = planning::append_as_extras(plan, trace, fused);
  for (int cycle = 0; cycle < options.cycles; ++cycle) {
    const std::size_t first = plan.steps.size();
    append_scoped(plan, schedule.plan.steps, block, instance, loop);
    for (std::size_t i = first; i < plan.steps.size(); ++i)
      plan.steps[i].iteration = cycle;
  }
  for (const auto& choice : schedule.choices)
    ++(choice.decision == planning::Decision::swap ? totals.swaps : totals.recomputes);
  totals.swapped_bytes += schedule.swapped_bytes;
  totals.recomputed_bytes += schedule.recomputed_bytes;
  totals.keep_all_peak_bytes = std::max(totals.keep_all_peak_bytes, TraceAnalysis(fused).default_profile().peak_bytes);
  plan.estimate.peak_bytes =
      std::max(plan.estimate.peak_bytes.value_or(0), schedule.plan.estimate.peak_bytes.value_or(0));
  return schedule.estimate_s;
}

// Two or more fused sub-arrays as a plan on the original trace. `ring`: one ring, one instance. `sequential`:
// neighbouring sub-arrays paired ((0, 1), (2, 3), …; the last alone when the count is odd), each pair a ring of its
// own, one instance and one loop per pair, trained one after another.
Plan sub_array_plan(const Trace& trace, const Machine& machine, const PlanRequest& request, const MuTwoOptions& options,
                    const std::vector<int>& sizes)
{
  Plan plan;
  ScheduleTotals totals;
  if (options.pair_mode == "ring") {
    const double estimate = append_ring(plan, trace, machine, request, options, sizes, 0, 0, totals);
    plan.estimate.iteration_time_s = estimate;
  } else {
    // The pairs not training wait on the host: the array's weights and optimizer state must fit in its memory.
    std::uint64_t state_bytes = 0;
    for (const Tensor& tensor : trace.tensors)
      if (tensor.kind == TensorKind::weight || tensor.kind == TensorKind::optimizer_state)
        state_bytes += tensor.bytes;
    const std::uint64_t array_bytes = state_bytes * static_cast<std::uint64_t>(options.models);
    if (machine.host.memory > 0 && array_bytes > machine.host.memory)
      throw Infeasible(
          fmt::format("mu-two: sequential pairs keep the {} models' weights and optimizer state ({} bytes) "
                      "on the host, which has {} bytes",
                      options.models, array_bytes, machine.host.memory));
    double estimate = 0;
    nlohmann::json pairs = nlohmann::json::array();
    for (std::size_t first = 0, pair = 0; first < sizes.size(); first += 2, ++pair) {
      const auto index = static_cast<int>(pair);
      if (first + 1 < sizes.size()) {
        const std::vector<int> members{sizes[first], sizes[first + 1]};
        estimate += append_ring(plan, trace, machine, request, options, members, index, index, totals);
        pairs.push_back(planning::mu_two::partition_text(members));
      } else {
        estimate += append_alone(plan, trace, machine, request, options, sizes[first], index, index, totals);
        pairs.push_back(planning::mu_two::partition_text({sizes[first]}));
      }
    }
    plan.estimate.iteration_time_s = estimate;
    plan.params["pairs"] = std::move(pairs); // in training order, each a loop of its own
  }
  plan.params["swapped_bytes"] = totals.swapped_bytes;
  plan.params["recomputed_bytes"] = totals.recomputed_bytes;
  plan.params["swaps"] = totals.swaps;
  plan.params["recomputes"] = totals.recomputes;
  plan.params["swap_cases"] = totals.swap_cases;
  plan.params["multiplexed_ops"] = totals.multiplexed_ops;
  plan.params["keep_all_peak_bytes"] = totals.keep_all_peak_bytes;
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
                      : sub_array_plan(trace, machine, request, options, sizes);
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
    "schedule; two or more train in a ring, or in pairs one after another (`pair_mode`), whose merged graphs "
    "multiplex one sub-array's backward with the next one's forward, with mu-TWO's swap/recompute choice), runs each "
    "on the fast engine and keeps the fastest steady "
    "iteration; records `partition`, `candidates`, `swaps`, `recomputes`, `swap_cases`, `multiplexed_ops`",
    {planning::models_param<MuTwoOptions>(), planning::fusion_param<MuTwoOptions>(),
     param("partitions", &MuTwoOptions::partitions,
           "paper = the sizes of the paper's example rule (N = 8: 4+4, 3+3+1+1, 2+2+2+2, 1x8); all = every partition "
           "into two or more sub-arrays; finest = only N one-model sub-arrays (the smallest working set: the probe for "
           "how many models fit); none = only {N} (with include_full_fusion: HFTA+Capuchin's schedule)",
           {.choices = {"paper", "all", "finest", "none"}}),
     param("include_full_fusion", &MuTwoOptions::include_full_fusion,
           "also try the single sub-array {N} (no multiplexing: HFTA+Capuchin's schedule)"),
     param("pair_mode", &MuTwoOptions::pair_mode,
           "ring = sub-arrays in one ring, BW_j multiplexed with FW_{j+1}, every sub-array's weights resident; "
           "sequential = neighbouring sub-arrays paired, each pair its own ring trained after the one before, only the "
           "active pair's weights and optimizer state resident (moving them is once per training, not charged); the "
           "steady iteration is the sum of the pairs' (spec A6)",
           {.choices = {"ring", "sequential"}}),
     param("multiplex", &MuTwoOptions::multiplex,
           "move forward ops of the next sub-array into a backward to hide prefetches (false: BW_j, then FW_{j+1})"),
     param("cycles", &MuTwoOptions::cycles, "ring cycles emitted; the steady iteration is their mean from the second",
           {.min = 1, .max = 64}),
     planning::offload_release_param<MuTwoOptions>(), planning::idle_metric_param<MuTwoOptions>()},
    plan_mu_two);

} // namespace memsim
