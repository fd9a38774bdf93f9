// The four baseline planners checked by the simulator (DESIGN.md: every plan must be valid and fit its budget, or
// the planner must say infeasible). Each simulation runs in a forked child.
#include "simulate_in_child.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/generators.hpp"
#include "memsim/traces/views.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

using test::simulate_in_child;

Machine pcie_machine()
{
  Machine machine;
  machine.name = "one-gpu-pcie";
  machine.gpus.push_back(Gpu{"gpu0", "test-gpu", 1ull << 36, {{"fp32", 14e12}}, 900e9, 0});
  machine.host.memory = 1ull << 38;
  machine.links.push_back(Link{"pcie", "gpu0", "host", 12e9, 1e-6, Duplex::split});
  return machine;
}

Trace small_cnn()
{
  CnnSpec spec;
  spec.depth = 8;
  spec.batch = 32;
  spec.image = 64;
  spec.channel_scale = 0.5;
  return generate_cnn(spec, Roofline{14e12, 900e9, 5e-6, "test-gpu"});
}

struct Checked {
  int planned = 0;
  int infeasible = 0;
};

// Plans at falling fractions of the keep-all peak; every plan made must simulate feasibly within its budget.
Checked check_planner(const std::string& planner, const Trace& trace)
{
  const Machine machine = pcie_machine();
  const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
  Checked checked;
  for (double fraction : {1.0, 0.8, 0.6, 0.5, 0.4, 0.3}) {
    PlanRequest request;
    request.budget_bytes = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
    Plan plan;
    try {
      plan = make_plan(planner, trace, machine, request);
    } catch (const Infeasible& error) {
      EXPECT_FALSE(std::string(error.what()).empty());
      ++checked.infeasible;
      continue;
    }
    const RunResult result = simulate_in_child(trace, machine, plan, SimOptions{false});
    EXPECT_TRUE(result.metrics.feasible) << planner << " at " << fraction << ": "
                                         << (result.error ? result.error->message : "");
    EXPECT_LE(result.metrics.peak_device_bytes, request.budget_bytes) << planner << " at " << fraction;
    // Nothing runs faster than computing every op once.
    EXPECT_GE(result.metrics.iteration_time_s, trace.total_time_s() * (1 - 1e-9)) << planner << " at " << fraction;
    if (plan.estimate.peak_bytes) {
      EXPECT_LE(result.metrics.peak_device_bytes, *plan.estimate.peak_bytes) << planner << " at " << fraction;
    }
    ++checked.planned;
  }
  return checked;
}

TEST(PlannersSimulated, KeepAllMatchesTheDefaultProfileExactly)
{
  for (const Trace& trace : {test::make_chain(6, 1000000), small_cnn()}) {
    const Machine machine = pcie_machine();
    PlanRequest request;
    const Plan plan = make_plan("keep-all", trace, machine, request);
    const RunResult result = simulate_in_child(trace, machine, plan, SimOptions{false});
    ASSERT_TRUE(result.metrics.feasible);
    EXPECT_EQ(result.metrics.peak_device_bytes, default_memory_profile(trace).peak_bytes) << trace.name;
    EXPECT_NEAR(result.metrics.iteration_time_s, trace.total_time_s(), 1e-9) << trace.name;
    EXPECT_NEAR(result.metrics.stall_time_s, 0.0, 1e-12);
    EXPECT_EQ(result.metrics.h2d_bytes + result.metrics.d2h_bytes, 0u);
  }
}

// k fused models (memsim gen fuse): every tensor is k x, so keep-all's simulated peak is exactly k x the single
// model's, and the run takes the fused trace's compute, no more than k x the single model's.
TEST(PlannersSimulated, KeepAllOnFusedModelsPeaksAtKTimesTheSingleModel)
{
  const Machine machine = pcie_machine();
  PlanRequest request;
  for (const Trace& single : {test::make_chain(6, 1000000), small_cnn()}) {
    const RunResult alone = simulate_in_child(single, machine, make_plan("keep-all", single, machine, request));
    ASSERT_TRUE(alone.metrics.feasible);
    for (int models : {2, 4}) {
      const Trace fused = fuse_trace(single, models, FusionModel::efficiency, machine.gpus[0], single.name);
      const RunResult result = simulate_in_child(fused, machine, make_plan("keep-all", fused, machine, request));
      ASSERT_TRUE(result.metrics.feasible) << single.name << " x" << models;
      EXPECT_EQ(result.metrics.peak_device_bytes, models * alone.metrics.peak_device_bytes) << single.name;
      EXPECT_NEAR(result.metrics.iteration_time_s, fused.total_time_s(), 1e-9) << single.name;
      EXPECT_LE(result.metrics.iteration_time_s, models * alone.metrics.iteration_time_s * (1 + 1e-12)) << single.name;
    }
  }
}

TEST(PlannersSimulated, KeepAllFitsOnlyAtFullBudget)
{
  const Checked checked = check_planner("keep-all", small_cnn());
  EXPECT_EQ(checked.planned, 1);
  EXPECT_EQ(checked.infeasible, 5);
}

TEST(PlannersSimulated, VdnnAllPlansFitAndGoBelowKeepAll)
{
  const Checked checked = check_planner("vdnn-all", small_cnn());
  EXPECT_GE(checked.planned, 3); // down to at least 0.6 x peak
}

TEST(PlannersSimulated, VdnnConvPlansFit)
{
  const Checked checked = check_planner("vdnn-conv", small_cnn());
  EXPECT_GE(checked.planned, 2);
}

TEST(PlannersSimulated, SuperNeuronsPlansFitAndGoBelowKeepAll)
{
  const Checked checked = check_planner("superneurons", small_cnn());
  EXPECT_GE(checked.planned, 2);
}

TEST(PlannersSimulated, CheckpointSqrtPlansFitAndRecompute)
{
  const Trace trace = test::make_chain(16, 1000000);
  const Checked checked = check_planner("checkpoint-sqrt", trace);
  EXPECT_GE(checked.planned, 2);
  const Machine machine = pcie_machine();
  const Plan plan = make_plan("checkpoint-sqrt", trace, machine, PlanRequest{});
  const RunResult result = simulate_in_child(trace, machine, plan, SimOptions{false});
  ASSERT_TRUE(result.metrics.feasible);
  EXPECT_GT(result.metrics.recompute_time_s, 0.0);
  EXPECT_LT(result.metrics.peak_device_bytes, default_memory_profile(trace).peak_bytes);
}

TEST(PlannersSimulated, VdnnOffloadTimeShowsAsStallOnASlowLink)
{
  // 100 MB activations over 12 GB/s (8.3 ms each way) against 1 ms ops: the link, not compute, sets the pace.
  const Trace trace = test::make_chain(6, 100000000);
  const Machine machine = pcie_machine();
  const Plan plan = make_plan("vdnn-all", trace, machine, PlanRequest{});
  const RunResult result = simulate_in_child(trace, machine, plan, SimOptions{false});
  ASSERT_TRUE(result.metrics.feasible);
  EXPECT_GT(result.metrics.stall_time_s, 0.0);
  EXPECT_NEAR(result.metrics.iteration_time_s, result.metrics.compute_busy_s + result.metrics.stall_time_s, 1e-9);
  EXPECT_GT(result.metrics.d2h_bytes, 0u);
  EXPECT_EQ(result.metrics.h2d_bytes, result.metrics.d2h_bytes);
}

} // namespace
} // namespace memsim
