// tsplit's cost=simulated (spec tsplit.md §4 item 8): on a hand-built trace where the analytic model (Eq. 3 with the
// PCIe occupancy simulation) calls a swap free that the fast engine shows delays an earlier swap, the simulated
// score picks the recomputation, and both plans' engine times are worked out; on a small CNN and transformer at 0.4-0.9
// of their keep-all peak its plans fit their budget on both engines and are deterministic; an unknown cost is a located
// InputError.
#include "engine_comparison.hpp"
#include "planner_test_support.hpp"
#include "trace_builder.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace memsim {
namespace {

Machine one_gpu(double bandwidth) { return test::one_gpu_machine(1ull << 40, bandwidth); }

Plan tsplit(const Trace& trace, const Machine& m, std::uint64_t budget, const nlohmann::json& params)
{
  return test::plan_on("tsplit", trace, m, budget, params);
}

bool has_step(const Plan& plan, StepKind kind, TensorId tensor)
{
  return std::any_of(plan.steps.begin(), plan.steps.end(),
                     [&](const Step& s) { return s.kind == kind && s.tensor == tensor; });
}

bool recomputes(const Plan& plan, OpId producer)
{
  return std::any_of(plan.steps.begin(), plan.steps.end(),
                     [&](const Step& s) { return s.kind == StepKind::recompute && s.op == producer; });
}

// f1 -> a (2S, f1 takes t/2), f2 -> x (S), f3 -> u, f4 reads a -> v (S), f5 reads v, u -> w (S), the loss, four
// fillers, then b_a and b_x; every other op t, copies S/B = t. The budget is M(f4) - S + 1 MB.
//   f4 is over by S - 1 MB: swap x is free (its copy fills f3) and wins over recomputing x (t) or moving u.
//   f5 is over by S - 1 MB: swap a (2t) or recompute a (t/2). The analytic model sees x's copy occupying f3 only,
//   so a's copy hides in f2, f3's 5 % and f4 (2.05 t): ΔT = 0, and it swaps a. On the engine the d2h stream copies in
//   emission order: a's copy goes first, during f2 and f3, x's after it, so f4 waits t for x's room: ΔT = t against
//   t/2 for recomputing a, which cost=simulated picks.
struct ContendedSwap : test::TraceBuilder {
  static constexpr std::uint64_t kS = 100'000'000;
  static constexpr double kT = 0.01;
  static constexpr int kFillers = 4;
  TensorId a = 0, x = 0;
  OpId f1 = 0;
  std::uint64_t budget = 0;
  ContendedSwap() : TraceBuilder("contended-swap", 4)
  {
    const TensorId in = tensor("in", 1000, TensorKind::input);
    a = tensor("a", 2 * kS);
    x = tensor("x", kS);
    const TensorId u = tensor("u", 4000);
    const TensorId v = tensor("v", kS);
    const TensorId w = tensor("w", kS);
    TensorId g = tensor("g", 4000, TensorKind::gradient);
    f1 = op("f1", "conv2d", Phase::forward, {in}, {a}, kT / 2).id;
    op("f2", "conv2d", Phase::forward, {in}, {x}, kT);
    op("f3", "conv2d", Phase::forward, {in}, {u}, kT);
    op("f4", "conv2d", Phase::forward, {a}, {v}, kT);
    op("f5", "conv2d", Phase::forward, {v, u}, {w}, kT);
    op("loss", "loss", Phase::loss, {w}, {g}, kT);
    for (int k = 0; k < kFillers; ++k) {
      const TensorId next = tensor("g" + std::to_string(k), 4000, TensorKind::gradient);
      op("fill" + std::to_string(k), "relu", Phase::backward, {g}, {next}, kT);
      g = next;
    }
    const TensorId ga = tensor("ga", 4000, TensorKind::gradient);
    op("b_a", "conv2d", Phase::backward, {a, g}, {ga}, kT);
    const TensorId gx = tensor("gx", 4000, TensorKind::gradient);
    op("b_x", "conv2d", Phase::backward, {x, ga}, {gx}, kT);
    const TraceAnalysis analysis(trace);
    budget = analysis.default_profile().in_use_during[3] - kS + 1'000'000;
  }
  // Every op's time: f1 t/2, eleven more t.
  static double ops_s() { return kT / 2 + (5 + kFillers + 2) * kT; }
};

TEST(TsplitCost, SimulationSeesTheSwapThatDelaysAnEarlierOne)
{
  const ContendedSwap c;
  const Machine m = one_gpu(ContendedSwap::kS / ContendedSwap::kT);
  const double t = ContendedSwap::kT;
  const nlohmann::json base{{"split", false}};
  nlohmann::json simulated = base;
  simulated["cost"] = "simulated";

  const Plan analytic = tsplit(c.trace, m, c.budget, base);
  EXPECT_TRUE(has_step(analytic, StepKind::offload, c.x));
  EXPECT_TRUE(has_step(analytic, StepKind::offload, c.a));
  EXPECT_FALSE(recomputes(analytic, c.f1));
  const Plan chosen = tsplit(c.trace, m, c.budget, simulated);
  EXPECT_TRUE(has_step(chosen, StepKind::offload, c.x));
  EXPECT_FALSE(has_step(chosen, StepKind::offload, c.a));
  EXPECT_TRUE(recomputes(chosen, c.f1));

  const test::EngineRuns analytic_runs = test::run_on_both_engines(c.trace, m, analytic);
  const test::EngineRuns chosen_runs = test::run_on_both_engines(c.trace, m, chosen);
  for (const RunResult* run : {&analytic_runs.fast, &chosen_runs.fast, &analytic_runs.simgrid, &chosen_runs.simgrid}) {
    ASSERT_TRUE(run->metrics.feasible) << run->error->message;
    EXPECT_LE(run->metrics.peak_device_bytes, c.budget);
  }
  EXPECT_NEAR(analytic_runs.fast.metrics.iteration_time_s, ContendedSwap::ops_s() + t, 1e-9);   // f4 waits t
  EXPECT_NEAR(chosen_runs.fast.metrics.iteration_time_s, ContendedSwap::ops_s() + t / 2, 1e-9); // f1 again
  EXPECT_NEAR(*chosen.estimate.iteration_time_s, chosen_runs.fast.metrics.iteration_time_s, 1e-9);
  EXPECT_EQ(plan_to_json(chosen).at("params").at("cost"), "simulated");
  EXPECT_EQ(plan_to_json(analytic).at("params").at("cost"), "analytic");
}

TEST(TsplitCost, SimulatedPlansFitTheirBudgetOnBothEnginesAndRepeat)
{
  const Machine m = one_gpu(12e9);
  struct Workload {
    std::string name;
    Trace trace;
    std::vector<double> fractions; // of the keep-all peak; a VGG-style CNN has no tsplit plan at 0.4 (either cost)
  };
  const std::vector<Workload> workloads{
      {"cnn",
       test::generated("cnn", {{"depth", 8}, {"batch", 32}, {"image", 64}, {"channel_scale", 0.5}, {"classes", 10}}),
       {0.5, 0.7, 0.9}},
      {"transformer",
       test::generated("transformer", {{"layers", 3}, {"hidden", 128}, {"heads", 4}, {"seq", 128}, {"batch", 16}}),
       {0.4, 0.6, 0.9}}};
  int planned = 0;
  for (const auto& [name, trace, fractions] : workloads) {
    const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
    for (double fraction : fractions) {
      const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
      const std::string where = fmt::format("{} at {} of the peak", name, fraction);
      const nlohmann::json params{{"cost", "simulated"}};
      Plan plan;
      try {
        plan = tsplit(trace, m, budget, params);
      } catch (const Infeasible& e) {
        ADD_FAILURE() << where << ": " << e.what();
        continue;
      }
      ++planned;
      EXPECT_EQ(plan_to_json(plan).dump(), plan_to_json(tsplit(trace, m, budget, params)).dump()) << where;
      const test::EngineRuns runs = test::run_on_both_engines(trace, m, plan);
      for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
        ASSERT_TRUE(run->metrics.feasible) << where << ": " << run->error->message;
        EXPECT_LE(run->metrics.peak_device_bytes, budget) << where;
      }
    }
  }
  EXPECT_EQ(planned, 6);
}

TEST(TsplitCost, AnUnknownCostIsALocatedInputError)
{
  const ContendedSwap c;
  try {
    (void)tsplit(c.trace, one_gpu(1e10), c.budget, {{"cost", "exact"}});
    FAIL() << "cost=exact was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cost"), std::string::npos) << what;
    EXPECT_NE(what.find("'exact' is not one of analytic, simulated"), std::string::npos) << what;
  }
}

} // namespace
} // namespace memsim
