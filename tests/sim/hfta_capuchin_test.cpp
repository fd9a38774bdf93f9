// The hfta-capuchin planner (μ-TWO's HFTA+Capuchin baseline, shared/specs/mu-two.md §7.2) on hand-made chains (1 GB/s
// link: 1 MB moves in 1 ms; forward ops 1 ms, backward ops 2 ms): at or above the keep-all peak it is keep-all; below
// it the swap of the longest-idle activation is chosen when the backward ops hide it and a recomputation when the
// link is slow; recomputing two consecutive activations counts the earlier one's time twice (Alg. E); every plan
// fits its budget on both engines; the §6.5 estimate stays within 5 % of the simulated time.
#include "engine_comparison.hpp"
#include "planner_test_support.hpp"
#include "test_traces.hpp"
#include "trace_builder.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace memsim {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t MB = 1000000;

// make_chain's shape with activation a_l of bytes[l]: f_l reads a_{l-1} (x for l = 0) and w_l; b_l reads the
// gradient, a_{l-1} and w_l. So a_l is read by the backward of layer l + 1 (a_{L-1} only by the loss).
Trace chain_of(const std::vector<std::uint64_t>& bytes)
{
  Trace trace = test::make_chain(static_cast<int>(bytes.size()), MB);
  for (std::size_t l = 0; l < bytes.size(); ++l)
    for (Tensor& tensor : trace.tensors)
      if (tensor.name == fmt::format("a{}", l))
        tensor.bytes = bytes[l];
  return trace;
}

std::uint64_t keep_all_peak(const Trace& trace) { return TraceAnalysis(trace).default_profile().peak_bytes; }

Plan capuchin(const Trace& trace, std::uint64_t budget, const Machine& machine = test::one_gpu_machine(),
              int models = 1)
{
  PlanRequest request;
  request.budget_bytes = budget;
  request.params = {{"models", models}};
  Plan plan = make_plan("hfta-capuchin", trace, machine, request);
  validate_plan(plan, trace, 1, "hfta-capuchin");
  return plan;
}

using test::EngineRuns;
using test::run_on_both_engines;

// "swap a0", "recompute a1", ... in decision order.
std::vector<std::string> decisions(const Plan& plan)
{
  std::vector<std::string> list;
  for (const auto& decision : plan.params["decisions"])
    list.push_back(decision["choice"].get<std::string>() + " " + decision["tensor"].get<std::string>());
  return list;
}

// How many steps of `kind` run the op named `name` (ops of the plan's fused block).
int steps_running(const Trace& trace, const Plan& plan, StepKind kind, const std::string& name)
{
  const Trace extended = trace_with_extras(trace, plan);
  int count = 0;
  for (const Step& step : plan.steps)
    count += step.kind == kind && step.op && extended.op(*step.op).name == name ? 1 : 0;
  return count;
}

double relative_gap(double estimate, double simulated) { return std::abs(estimate - simulated) / simulated; }

TEST(HftaCapuchin, AtOrAboveTheKeepAllPeakOneModelIsKeepAll)
{
  const Trace trace = test::make_chain(4, MB);
  const std::uint64_t budget = keep_all_peak(trace);
  const Plan plan = capuchin(trace, budget);
  EXPECT_EQ(plan.params["partition"], "1");
  EXPECT_TRUE(decisions(plan).empty());
  const RunResult keep_all = simulate_fast(trace, test::one_gpu_machine(), test::plan_with("keep-all", trace, budget));
  ASSERT_FALSE(keep_all.error);
  const EngineRuns runs = run_on_both_engines(trace, test::one_gpu_machine(), plan);
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_EQ(result->metrics.peak_device_bytes, keep_all.metrics.peak_device_bytes);
    EXPECT_NEAR(result->metrics.iteration_time_s, keep_all.metrics.iteration_time_s, 1e-12);
  }
  EXPECT_NEAR(*plan.estimate.iteration_time_s, keep_all.metrics.iteration_time_s, 1e-12);
  EXPECT_EQ(plan.params["keep_all_peak_bytes"].get<std::uint64_t>(), budget);
}

// One byte under the keep-all peak (reached at the loss, a0..a3 and the loss gradient resident) one activation
// must go. a0 is idle longest; its prefetch starts before b2 (b3 runs at the peak) and b2's 2 ms hide its 1 ms:
// the swap costs nothing, less than recomputing (1 ms).
TEST(HftaCapuchin, ASwapTheBackwardHidesIsChosen)
{
  const Trace trace = test::make_chain(4, MB);
  const std::uint64_t budget = keep_all_peak(trace) - 1;
  const Plan plan = capuchin(trace, budget);
  EXPECT_THAT(decisions(plan), ::testing::ElementsAre("swap a0"));
  EXPECT_EQ(plan.params["decisions"][0]["overhead_s"], 0.0);
  EXPECT_EQ(plan.params["swapped_bytes"], MB);
  EXPECT_EQ(plan.params["recomputed_bytes"], 0);
  const EngineRuns runs = run_on_both_engines(trace, test::one_gpu_machine(), plan);
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_LE(result->metrics.peak_device_bytes, budget);
  }
  EXPECT_LE(relative_gap(*plan.estimate.iteration_time_s, runs.fast.metrics.iteration_time_s), 0.05);
}

// The same budget over a 1 MB/s link: a0's prefetch would stall ~1 s, recomputing it costs one forward op (1 ms).
// All candidates save 1 MB per ms; the tie goes to the first, a0.
TEST(HftaCapuchin, ASlowLinkChoosesRecomputation)
{
  const Trace trace = test::make_chain(4, MB);
  const Machine slow = test::one_gpu_machine(1ull << 34, 1e6);
  const std::uint64_t budget = keep_all_peak(trace) - 1;
  const Plan plan = capuchin(trace, budget, slow);
  EXPECT_THAT(decisions(plan), ::testing::ElementsAre("recompute a0"));
  EXPECT_NEAR(plan.params["decisions"][0]["overhead_s"].get<double>(), 0.001, 1e-12);
  EXPECT_EQ(plan.params["recomputed_bytes"], MB);
  EXPECT_EQ(steps_running(trace, plan, StepKind::recompute, "f0"), 1);
  EXPECT_EQ(steps_running(trace, plan, StepKind::offload, "f0"), 0);
  const EngineRuns runs = run_on_both_engines(trace, slow, plan);
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_LE(result->metrics.peak_device_bytes, budget);
  }
  // Keep-all plus one forward op.
  EXPECT_NEAR(runs.fast.metrics.iteration_time_s, 0.001 * 5 + 0.002 * 4 + 0.001, 1e-9);
  EXPECT_LE(relative_gap(*plan.estimate.iteration_time_s, runs.fast.metrics.iteration_time_s), 0.05);
}

// Alg. E: a1 (4 MB) saves the most per recompute second and goes first (1 ms). The peak moves to b2 (x, a0, the
// recomputed a1, g2, g1: 8 MB), where a0 is the only candidate still live; a0 is a source of a1's recomputation, so
// dropping it regenerates it twice, for itself and inside a1's lineage: 2 ms. f0 is recomputed twice in the plan.
TEST(HftaCapuchin, RecomputingConsecutiveActivationsCountsTheEarlierOneTwice)
{
  const Trace trace = chain_of({MB, 4 * MB, MB, MB});
  const Machine no_swaps = test::one_gpu_machine(1ull << 34, 1);
  const std::uint64_t budget = keep_all_peak(trace) - MB - MB / 2;
  const Plan plan = capuchin(trace, budget, no_swaps);
  EXPECT_THAT(decisions(plan), ::testing::ElementsAre("recompute a1", "recompute a0"));
  EXPECT_NEAR(plan.params["decisions"][0]["overhead_s"].get<double>(), 0.001, 1e-12);
  EXPECT_NEAR(plan.params["decisions"][1]["overhead_s"].get<double>(), 0.002, 1e-12);
  EXPECT_EQ(steps_running(trace, plan, StepKind::recompute, "f0"), 2);
  EXPECT_EQ(steps_running(trace, plan, StepKind::recompute, "f1"), 1);
  const EngineRuns runs = run_on_both_engines(trace, no_swaps, plan);
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_LE(result->metrics.peak_device_bytes, budget);
  }
  EXPECT_LE(relative_gap(*plan.estimate.iteration_time_s, runs.fast.metrics.iteration_time_s), 0.05);
}

// Between what the largest op needs and the keep-all peak, on one model and on three fused ones: every plan fits
// its budget on the fast engine, the estimate is within 5 % (worst gap printed), and one per case also on SimGrid.
TEST(HftaCapuchin, BudgetsBelowKeepAllFitOnBothEngines)
{
  const Trace trace = test::make_chain(8, MB);
  double worst_gap = 0;
  for (int models : {1, 3}) {
    const Trace fused = fuse_trace(trace, models, FusionModel::efficiency, std::nullopt, trace.name);
    const std::uint64_t peak = keep_all_peak(fused);
    for (double fraction : {0.95, 0.8, 0.7}) {
      const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
      const Plan plan = capuchin(trace, budget, test::one_gpu_machine(), models);
      EXPECT_EQ(plan.params["partition"], std::to_string(models));
      EXPECT_EQ(plan.params["keep_all_peak_bytes"].get<std::uint64_t>(), peak); // before optimization
      const RunResult fast = simulate_fast(trace, test::one_gpu_machine(), plan);
      ASSERT_FALSE(fast.error) << fast.error->message;
      EXPECT_LE(fast.metrics.peak_device_bytes, budget) << models << " models at " << fraction;
      // make_chain trains a batch of 1: every fused model counts, though the plan runs one instance.
      ASSERT_TRUE(fast.metrics.samples_per_s);
      EXPECT_NEAR(*fast.metrics.samples_per_s, models / fast.metrics.steady_iteration_time_s, 1e-9);
      const double gap = relative_gap(*plan.estimate.iteration_time_s, fast.metrics.iteration_time_s);
      EXPECT_LE(gap, 0.05) << models << " models at " << fraction;
      worst_gap = std::max(worst_gap, gap);
      if (fraction == 0.7) {
        const EngineRuns runs = run_on_both_engines(trace, test::one_gpu_machine(), plan);
        ASSERT_FALSE(runs.simgrid.error) << runs.simgrid.error->message;
        EXPECT_LE(runs.simgrid.metrics.peak_device_bytes, budget);
      }
    }
  }
  std::printf("hfta-capuchin worst estimate gap on the chain fixtures: %.3f %%\n", 100 * worst_gap);
}

// offload_release only changes the scheduler's replay (paper: an offloaded tensor leaves at its last forward use);
// the emitted deps are memory-safe either way, so both plans fit on both engines.
TEST(HftaCapuchin, BothOffloadReleasesFit)
{
  const Trace trace = test::make_chain(8, MB);
  const std::uint64_t budget = keep_all_peak(trace) * 6 / 10;
  for (const char* release : {"safe", "paper"}) {
    PlanRequest request;
    request.budget_bytes = budget;
    request.params = {{"offload_release", release}};
    const Plan plan = make_plan("hfta-capuchin", trace, test::one_gpu_machine(), request);
    const EngineRuns runs = run_on_both_engines(trace, test::one_gpu_machine(), plan);
    for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
      ASSERT_FALSE(result->error) << release << ": " << result->error->message;
      EXPECT_LE(result->metrics.peak_device_bytes, budget) << release;
    }
  }
}

TEST(HftaCapuchin, BelowWhatTheLargestOpNeedsIsInfeasible)
{
  const Trace trace = test::make_chain(4, MB);
  // Weights and the input stay; b3 needs its three 1 MB inputs and two outputs at once.
  try {
    (void)capuchin(trace, 3 * MB);
    ADD_FAILURE() << "expected Infeasible";
  } catch (const Infeasible& error) {
    EXPECT_THAT(error.what(), HasSubstr("hfta-capuchin"));
  }
  EXPECT_THROW((void)capuchin(trace, keep_all_peak(trace), test::one_gpu_machine(), 0), InputError);
}

// A11: the swap candidate is the one idle longest, under the chosen metric. a0 (from f0) is read again by f3, a skip
// connection, then by b3 and b1; a1 by f2 and b2; a2 by f3 and b3. f1 and f2 take 5 ms, the rest of the forward 1 ms,
// backward ops 2 ms. Idle from the last forward access (inactive): a0 1 ms (the loss), a1 4 ms (f3, loss, b3), a2
// 1 ms: a1. From the producer (produced): a0 12 ms (f1, f2, f3, loss), a1 9 ms, a2 2 ms: a0. free_time subtracts the
// same 20 µs from every 1 MB tensor: a1. The 100 GB/s link hides every swap, which recomputing (>= 1 ms) cannot beat.
// Gradients are small, so the keep-all peak is at the loss (x, a0..a3); offloads leave at their last forward use
// (Alg. G), so swapping a1 alone fits one byte under it, and after a0 (still resident through f3) a1 follows.
TEST(HftaCapuchin, TheIdleMetricPicksTheSwapCandidate)
{
  test::TraceBuilder build("skip");
  const TensorId x = build.tensor("x", MB, TensorKind::input);
  const TensorId w = build.tensor("w", 1000, TensorKind::weight);
  const TensorId a0 = build.tensor("a0", MB), a1 = build.tensor("a1", MB), a2 = build.tensor("a2", MB);
  const TensorId a3 = build.tensor("a3", MB);
  const TensorId g3 = build.tensor("g3", 1000, TensorKind::gradient),
                 g2 = build.tensor("g2", 1000, TensorKind::gradient);
  const TensorId g1 = build.tensor("g1", 1000, TensorKind::gradient),
                 g0 = build.tensor("g0", 1000, TensorKind::gradient);
  const TensorId dw = build.tensor("dw", 1000, TensorKind::weight_grad);
  build.op("f0", "linear", Phase::forward, {x, w}, {a0}, 0.001);
  build.op("f1", "linear", Phase::forward, {a0}, {a1}, 0.005);
  build.op("f2", "linear", Phase::forward, {a1}, {a2}, 0.005);
  build.op("f3", "linear", Phase::forward, {a2, a0}, {a3}, 0.001);
  build.op("loss", "loss", Phase::loss, {a3}, {g3}, 0.001);
  build.op("b3", "linear_backward", Phase::backward, {g3, a2, a0}, {g2}, 0.002);
  build.op("b2", "linear_backward", Phase::backward, {g2, a1}, {g1}, 0.002);
  build.op("b1", "linear_backward", Phase::backward, {g1, a0}, {g0}, 0.002);
  build.op("b0", "linear_backward", Phase::backward, {g0, x, w}, {dw}, 0.002);
  validate_trace(build.trace, "skip");
  const Machine fast_link = test::one_gpu_machine(1ull << 34, 100e9);
  const std::uint64_t budget = keep_all_peak(build.trace) - 1;
  auto first_decision = [&](const char* metric) {
    PlanRequest request;
    request.budget_bytes = budget;
    request.params = {{"idle_metric", metric}, {"offload_release", "paper"}};
    const Plan plan = make_plan("hfta-capuchin", build.trace, fast_link, request);
    validate_plan(plan, build.trace, 1, "hfta-capuchin");
    const RunResult run = simulate_fast(build.trace, fast_link, plan);
    EXPECT_FALSE(run.error) << metric;
    EXPECT_LE(run.metrics.peak_device_bytes, budget) << metric;
    return decisions(plan).at(0);
  };
  EXPECT_EQ(first_decision("inactive"), "swap a1");
  EXPECT_EQ(first_decision("produced"), "swap a0");
  EXPECT_EQ(first_decision("free_time"), "swap a1");
  PlanRequest unknown;
  unknown.budget_bytes = budget;
  unknown.params = {{"idle_metric", "idle"}};
  EXPECT_THROW(make_plan("hfta-capuchin", build.trace, fast_link, unknown), InputError);
}

TEST(HftaCapuchin, SamePlanTwice)
{
  const Trace trace = test::make_chain(8, MB);
  const std::uint64_t budget =
      keep_all_peak(fuse_trace(trace, 2, FusionModel::efficiency, std::nullopt, trace.name)) * 7 / 10;
  EXPECT_EQ(plan_to_json(capuchin(trace, budget, test::one_gpu_machine(), 2)).dump(),
            plan_to_json(capuchin(trace, budget, test::one_gpu_machine(), 2)).dump());
}

} // namespace
} // namespace memsim
