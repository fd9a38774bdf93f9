// The hfta planner (μ-TWO's HFTA-NoMemOpt baseline, shared/specs/mu-two.md §7.1) against its oracles: with N <= k*
// it is keep-all on the N-model fused trace; with N = 2k* + 1 its simulated time is T_HFTA = 2 T_keep(k*) +
// T_keep(1) from separately simulated keep-all runs; its peak never exceeds the budget; both engines agree.
#include "engine_comparison.hpp"
#include "planner_test_support.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

using ::testing::HasSubstr;

const Trace& single()
{
  static const Trace trace = test::make_chain(4, 1000000);
  return trace;
}

std::uint64_t one_model_peak() { return TraceAnalysis(single()).default_profile().peak_bytes; }

// Room for three fused models, not four.
std::uint64_t three_models_budget() { return 3 * one_model_peak() + one_model_peak() / 2; }

using test::EngineRuns;

// Keep-all on k fused models, as the `models` axis runs it (fast engine; SimGrid runs once per process).
RunResult keep_all_of(int k, std::uint64_t budget)
{
  const Trace fused = fuse_trace(single(), k, FusionModel::efficiency, std::nullopt, single().name);
  return simulate_fast(fused, test::one_gpu_machine(), test::plan_with("keep-all", fused, budget));
}

Plan hfta(int models, std::uint64_t budget, const std::string& subsets = "greedy")
{
  return test::plan_with("hfta", single(), budget, {{"models", models}, {"subsets", subsets}});
}

TEST(Hfta, AtMostKStarModelsAreOneFusedKeepAllArray)
{
  const Plan plan = hfta(2, three_models_budget());
  EXPECT_EQ(plan.params["partition"], "2");
  EXPECT_EQ(plan.params["largest_fused"], 2); // k* counted up to N only
  const RunResult reference = keep_all_of(2, three_models_budget());
  ASSERT_FALSE(reference.error);
  // Keep-all on the fused trace counts both models from the trace; hfta states the same count in its plan.
  ASSERT_TRUE(reference.metrics.samples_per_s);
  EXPECT_NEAR(*reference.metrics.samples_per_s, 2 / reference.metrics.steady_iteration_time_s, 1e-9);
  const EngineRuns runs = test::run_on_both_engines(single(), test::one_gpu_machine(), plan);
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_EQ(result->metrics.peak_device_bytes, reference.metrics.peak_device_bytes);
    EXPECT_NEAR(result->metrics.iteration_time_s, reference.metrics.iteration_time_s, 1e-12);
  }
  EXPECT_NEAR(*plan.estimate.iteration_time_s, reference.metrics.iteration_time_s, 1e-12);
}

TEST(Hfta, TwoKStarPlusOneModelsTakeTheSpecsSumOfSubsetTimes)
{
  const std::uint64_t budget = three_models_budget();
  const Plan plan = hfta(7, budget);
  EXPECT_EQ(plan.params["partition"], "3+3+1");
  EXPECT_EQ(plan.params["largest_fused"], 3);
  ASSERT_EQ(plan.instance_scopes.size(), 3u);
  const RunResult three = keep_all_of(3, budget);
  const RunResult one = keep_all_of(1, budget);
  ASSERT_FALSE(three.error);
  const double t_hfta = 2 * three.metrics.iteration_time_s + one.metrics.iteration_time_s;
  const EngineRuns runs = test::run_on_both_engines(single(), test::one_gpu_machine(), plan);
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_NEAR(result->metrics.iteration_time_s, t_hfta, 1e-12);
    // Only the running subset's weights are on the GPU: the peak is the 3-model array's, within the budget.
    EXPECT_EQ(result->metrics.peak_device_bytes, three.metrics.peak_device_bytes);
    EXPECT_LE(result->metrics.peak_device_bytes, budget);
    // Seven models of batch 1 per iteration, not one sample per subset.
    ASSERT_TRUE(result->metrics.samples_per_s);
    EXPECT_NEAR(*result->metrics.samples_per_s, 7 / result->metrics.steady_iteration_time_s, 1e-9);
  }
  EXPECT_EQ(plan.samples_per_iteration, 7);
  EXPECT_EQ(plan_from_json(plan_to_json(plan), "hfta.json").samples_per_iteration, 7);
  EXPECT_NEAR(*plan.estimate.iteration_time_s, t_hfta, 1e-12);
}

TEST(Hfta, BalancedSubsetsAreNearEqual)
{
  const Plan plan = hfta(7, three_models_budget(), "balanced");
  EXPECT_EQ(plan.params["partition"], "3+2+2");
  const EngineRuns runs = test::run_on_both_engines(single(), test::one_gpu_machine(), plan);
  ASSERT_FALSE(runs.fast.error) << runs.fast.error->message;
  EXPECT_LE(runs.fast.metrics.peak_device_bytes, three_models_budget());
}

TEST(Hfta, PeakStaysWithinTheBudgetForEveryN)
{
  for (std::uint64_t budget : {one_model_peak(), 2 * one_model_peak() + 1, three_models_budget()})
    for (int models = 1; models <= 8; ++models) {
      const Plan plan = hfta(models, budget);
      const RunResult result = simulate_fast(single(), test::one_gpu_machine(), plan);
      ASSERT_FALSE(result.error) << result.error->message;
      EXPECT_LE(result.metrics.peak_device_bytes, budget) << models << " models";
      EXPECT_EQ(result.metrics.peak_device_bytes, *plan.estimate.peak_bytes) << models << " models";
      // HFTA optimizes no memory: its subsets' keep-all peak is the configuration's before optimization too.
      EXPECT_EQ(plan.params["keep_all_peak_bytes"].get<std::uint64_t>(), result.metrics.peak_device_bytes);
      EXPECT_NEAR(result.metrics.iteration_time_s, *plan.estimate.iteration_time_s, 1e-12);
    }
}

TEST(Hfta, SamePlanTwice)
{
  EXPECT_EQ(plan_to_json(hfta(7, three_models_budget())).dump(), plan_to_json(hfta(7, three_models_budget())).dump());
}

TEST(Hfta, NotOneModelFittingIsInfeasibleAndBadParamsAreRefused)
{
  try {
    (void)hfta(2, one_model_peak() - 1);
    ADD_FAILURE() << "expected Infeasible";
  } catch (const Infeasible& error) {
    EXPECT_THAT(error.what(), HasSubstr("not even one model fits"));
  }
  EXPECT_THROW((void)hfta(0, three_models_budget()), InputError);
  EXPECT_THROW((void)hfta(2, three_models_budget(), "fair"), InputError);
}

} // namespace
} // namespace memsim
