// The dynn-block planner: every tensor starts on the host, blocks double-buffered in budget / 2 halves. Its plans
// simulate feasible at their budget on the fast and SimGrid engines with the same times, and the estimate (the
// runtime's exact sets, blocks.hpp schedule_blocks) is what both engines measure.
#include "dynamic_specs.hpp"
#include "engine_comparison.hpp"
#include "planner_test_support.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/dynamic_generators.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

// The worked chain of dynn_partition_test.cpp as a trace: x (the input, 1 MB) and a0..a5 (1 MB each); op i reads
// the previous tensor and writes a_i, the last also reads a0; 1 ms per op; 1 GB/s (1 ms per tensor), 0.25 ms latency.
Trace worked_trace()
{
  return test::hand_trace({1000000, 1000000, 1000000, 1000000, 1000000, 1000000},
                          {{{0}, {1}}, {{1}, {2}}, {{2}, {3}}, {{3}, {4}}, {{4}, {5}}, {{5, 1}, {6}}});
}

Machine worked_machine()
{
  Machine machine = test::one_gpu_machine();
  machine.links[0].latency_s = 0.25e-3;
  return machine;
}

Plan plan_for(const Trace& trace, const Machine& machine, std::uint64_t budget, nlohmann::json params)
{
  Plan plan = make_plan("dynn-block", trace, machine, PlanRequest{budget, 1, std::move(params)});
  validate_plan(plan, trace, 1, "dynn-block");
  return plan;
}

// Feasible at the plan's budget on both engines, with the same time, peak and bytes moved; returns the fast run.
RunResult simulate_both(const Trace& trace, const Machine& machine, const Plan& plan)
{
  test::EngineRuns runs = test::run_on_both_engines(trace, machine, plan, SimOptions{false});
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    EXPECT_TRUE(run->metrics.feasible) << (run->error ? run->error->message : "");
    EXPECT_LE(run->metrics.peak_device_bytes, plan.budget_bytes);
  }
  return std::move(runs.fast);
}

// Under the simulated timing, every op starts after the prefetches of everything it reads have ended (the block
// barrier; the simulator does not check a read of a tensor still arriving) and only after the block before it.
void expect_reads_after_their_prefetches(const Trace& trace, const Machine& machine, const Plan& plan)
{
  SimOptions options;
  options.engine = EngineKind::fast;
  const RunResult run = simulate(trace, machine, plan, options);
  ASSERT_TRUE(run.metrics.feasible);
  std::vector<const StepRecord*> record(plan.steps.size(), nullptr);
  for (const StepRecord& r : run.timeline)
    record.at(static_cast<std::size_t>(r.step)) = &r;
  std::vector<double> arrival(trace.tensors.size(), 0.0); // the end of the tensor's latest prefetch so far
  int checked = 0;
  for (const Step& step : plan.steps) {
    const StepRecord* r = record[static_cast<std::size_t>(step.id)];
    ASSERT_NE(r, nullptr);
    if (step.kind == StepKind::prefetch)
      arrival[static_cast<std::size_t>(*step.tensor)] = r->end_s;
    if (step.kind == StepKind::compute)
      for (TensorId t : trace.op(*step.op).inputs) {
        EXPECT_GE(r->start_s, arrival[static_cast<std::size_t>(t)] - 1e-12) << trace.op(*step.op).name;
        ++checked;
      }
  }
  EXPECT_GT(checked, 0);
}

TEST(DynnBlock, WorkedChainOneOpPerBlockSimulatesAsWorkedOut)
{
  const Trace trace = worked_trace();
  const Machine machine = worked_machine();
  // equal-ops with 6 blocks: one op per block, the schedule worked out in dynn_partition_test.cpp, in ms.
  const Plan plan = plan_for(trace, machine, 6000000, {{"partitioner", "equal-ops"}, {"blocks", 6}});
  EXPECT_EQ(plan.params.at("partition").at("block_ends"), nlohmann::json::parse("[[1,2,3,4,5,6]]"));
  ASSERT_TRUE(plan.estimate.iteration_time_s);
  EXPECT_NEAR(*plan.estimate.iteration_time_s, 7.75e-3, 1e-15);
  EXPECT_TRUE(std::all_of(plan.initial_placement.begin(), plan.initial_placement.end(),
                          [](const PlacementRule& rule) { return rule.where == Placement::host; }));
  const RunResult run = simulate_both(trace, machine, plan);
  EXPECT_NEAR(run.metrics.iteration_time_s, 7.75e-3, 1e-12);
  EXPECT_EQ(run.metrics.h2d_bytes, 2000000u); // x, then a0 back
  EXPECT_EQ(run.metrics.d2h_bytes, 1000000u); // a0 written back
  EXPECT_LE(run.metrics.peak_device_bytes, 6000000u);
  expect_reads_after_their_prefetches(trace, machine, plan);
}

TEST(DynnBlock, EveryPartitionerIsFeasibleAndItsEstimateIsSimulated)
{
  const Trace trace = worked_trace();
  const Machine machine = worked_machine();
  double dp_model = 0;
  for (const char* partitioner : {"dp", "equal-ops", "equal-time", "equal-bytes"}) {
    SCOPED_TRACE(partitioner);
    Plan plan;
    try {
      plan = plan_for(trace, machine, 8000000, {{"partitioner", partitioner}});
    } catch (const Infeasible&) {
      continue; // an equal split that puts too much in one block
    }
    const nlohmann::json& partition = plan.params.at("partition");
    const double dp_cost = partition.at("dp_cost_s").at(0).get<double>();
    if (std::string(partitioner) == "dp") {
      dp_model = dp_cost;
    } else {
      EXPECT_GE(dp_cost, dp_model - 1e-15); // never better than the DP under its own cost
    }
    const RunResult run = simulate_both(trace, machine, plan);
    EXPECT_NEAR(run.metrics.iteration_time_s, *plan.estimate.iteration_time_s, 1e-12);
    EXPECT_EQ(run.metrics.h2d_bytes, partition.at("h2d_bytes").get<std::uint64_t>());
    EXPECT_EQ(run.metrics.d2h_bytes, partition.at("d2h_bytes").get<std::uint64_t>());
  }
}

TEST(DynnBlock, EqualPartitionersUseTheDpBlockCount)
{
  const Trace trace = worked_trace();
  const Machine machine = worked_machine();
  const Plan dp = plan_for(trace, machine, 100000000, {});
  const std::size_t blocks = dp.params.at("partition").at("block_ends").at(0).size();
  const Plan equal = plan_for(trace, machine, 100000000, {{"partitioner", "equal-time"}});
  EXPECT_EQ(equal.params.at("partition").at("block_ends").at(0).size(), blocks);
  const Plan four = plan_for(trace, machine, 100000000, {{"partitioner", "equal-time"}, {"blocks", 4}});
  EXPECT_EQ(four.params.at("partition").at("block_ends").at(0).size(), 4u);
  EXPECT_GE(four.params.at("partition").at("dp_cost_s").at(0).get<double>(),
            dp.params.at("partition").at("dp_cost_s").at(0).get<double>());
}

TEST(DynnBlock, GrowBlocksTakesTheFewestEqualBlocksThatFit)
{
  const Trace trace = worked_trace();
  const Machine machine = worked_machine();
  // 3 MB per buffer: two or three equal-op blocks put 4 MB in one (dynn_partition_test.cpp works it out), four fit.
  EXPECT_THROW((void)plan_for(trace, machine, 6000000, {{"partitioner", "equal-ops"}, {"blocks", 2}}), Infeasible);
  const Plan grown =
      plan_for(trace, machine, 6000000, {{"partitioner", "equal-ops"}, {"blocks", 2}, {"grow_blocks", true}});
  EXPECT_EQ(grown.params.at("partition").at("block_ends"), nlohmann::json::parse("[[2,3,5,6]]"));
  const RunResult run = simulate_both(trace, machine, grown);
  EXPECT_NEAR(run.metrics.iteration_time_s, *grown.estimate.iteration_time_s, 1e-12);
  // A count that fits is kept.
  const Plan kept =
      plan_for(trace, machine, 6000000, {{"partitioner", "equal-ops"}, {"blocks", 6}, {"grow_blocks", true}});
  EXPECT_EQ(kept.params.at("partition").at("block_ends"), nlohmann::json::parse("[[1,2,3,4,5,6]]"));
}

TEST(DynnBlock, DeterministicAndRejectsBadParameters)
{
  const Trace trace = worked_trace();
  const Machine machine = worked_machine();
  const Plan first = plan_for(trace, machine, 8000000, {});
  const Plan second = plan_for(trace, machine, 8000000, {});
  EXPECT_EQ(plan_to_json(first).dump(), plan_to_json(second).dump());
  EXPECT_THROW((void)plan_for(trace, machine, 8000000, {{"partitioner", "sentinel"}}), InputError);
  EXPECT_THROW((void)plan_for(trace, machine, 8000000, {{"blocks", -1}}), InputError);
  // Half of 3 MB cannot hold the last op (a4, a0 and a5): no plan.
  EXPECT_THROW((void)plan_for(trace, machine, 3000000, {}), Infeasible);
}

// var-lstm over three iterations of different lengths, at half the keep-all peak: weights and Adam moments move
// every iteration (written back after their update), each iteration is partitioned on its own graph.
TEST(DynnBlock, VarLstmIterationsOnBothEngines)
{
  const Trace trace = generate_var_lstm(test::small_var_lstm(3, 2, 6, 512), Roofline{14e12, 900e9, 5e-6, "test-gpu"});
  Machine machine = test::one_gpu_machine();
  machine.links[0].latency_s = 1e-6;
  const std::uint64_t peak = TraceAnalysis(trace).default_profile().peak_bytes;
  const Plan plan = plan_for(trace, machine, peak / 2, {});
  const nlohmann::json& partition = plan.params.at("partition");
  ASSERT_EQ(partition.at("block_ends").size(), 3u);
  for (const nlohmann::json& ends : partition.at("block_ends"))
    EXPECT_GE(ends.size(), 2u); // half the peak does not hold an iteration in one buffer
  const RunResult run = simulate_both(trace, machine, plan);
  expect_reads_after_their_prefetches(trace, machine, plan);
  EXPECT_EQ(run.metrics.iteration_times_s.size(), 3u);
  EXPECT_NEAR(run.metrics.iteration_time_s, *plan.estimate.iteration_time_s, 1e-9 * *plan.estimate.iteration_time_s);
  EXPECT_EQ(run.metrics.h2d_bytes, partition.at("h2d_bytes").get<std::uint64_t>());
  EXPECT_EQ(run.metrics.d2h_bytes, partition.at("d2h_bytes").get<std::uint64_t>());
  EXPECT_GE(run.metrics.iteration_time_s, trace.total_time_s());

  // The exact-set DP: its own plan, simulated as estimated.
  const Plan exact = plan_for(trace, machine, peak / 2, {{"dp_sets", "exact"}});
  EXPECT_EQ(exact.params.at("partition").at("dp_model"), nlohmann::json::parse(R"(["exact", "exact", "exact"])"));
  const RunResult exact_run = simulate_both(trace, machine, exact);
  EXPECT_NEAR(exact_run.metrics.iteration_time_s, *exact.estimate.iteration_time_s,
              1e-9 * *exact.estimate.iteration_time_s);

  // Retaining what the next iteration's first block uses (the LSTM weights) moves fewer bytes; still exact.
  const Plan retained = plan_for(trace, machine, peak / 2, {{"retain", true}});
  EXPECT_EQ(retained.params.at("partition").at("block_ends"), partition.at("block_ends"));
  const RunResult retained_run = simulate_both(trace, machine, retained);
  expect_reads_after_their_prefetches(trace, machine, retained);
  EXPECT_NEAR(retained_run.metrics.iteration_time_s, *retained.estimate.iteration_time_s,
              1e-9 * *retained.estimate.iteration_time_s);
  EXPECT_LT(retained_run.metrics.h2d_bytes, run.metrics.h2d_bytes);
  EXPECT_LE(retained_run.metrics.d2h_bytes, run.metrics.d2h_bytes);
  EXPECT_LT(retained_run.metrics.iteration_time_s, run.metrics.iteration_time_s);

  // Memory-safe under any timing: the same plan on links 100 times slower or faster, with more latency, still fits.
  for (double scale : {0.01, 100.0}) {
    Machine other = machine;
    other.links[0].bandwidth *= scale;
    other.links[0].latency_s = 1e-4;
    const RunResult timed = simulate_both(trace, other, plan);
    EXPECT_EQ(timed.metrics.h2d_bytes, run.metrics.h2d_bytes);
    expect_reads_after_their_prefetches(trace, other, plan);
  }
}

} // namespace
} // namespace memsim
