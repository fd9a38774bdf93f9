// A compute step's service time (Step::service_s on a compute step, what a policy's pause_before charges): its
// stream waits that long once the step may start, then the op runs; the GPU is free for other streams meanwhile and
// the pause counts as stall, not busy time. Worked out by hand on both engines (the fast engine in-process, SimGrid
// in a forked child), which must agree step by step.
#include "engine_comparison.hpp"
#include "test_machines.hpp"
#include "test_traces.hpp"

#include "memsim/planners/plan.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

constexpr double kMs = 0.001;

Plan hand_plan(const Trace& trace)
{
  Plan plan;
  plan.trace = trace.name;
  plan.machine = "one-gpu";
  plan.planner = "hand";
  return plan;
}

const StepRecord& record_of(const RunResult& run, StepId step)
{
  for (const StepRecord& record : run.timeline)
    if (record.step == step)
      return record;
  throw std::logic_error("no record");
}

// f0: x -> a0, f1: a0 -> a1 (1 ms each) on one stream; f1 pauses 0.5 ms: f0 0-1, pause 1-1.5, f1 1.5-2.5 ms.
TEST(ComputePause, DelaysTheOpOnItsStream)
{
  const Trace trace = test::hand_trace({1000000, 1000000}, {{{0}, {1}}, {{1}, {2}}});
  Plan plan = hand_plan(trace);
  PlanBuilder build(plan);
  build.compute(0);
  const StepId paused = build.compute(1);
  plan.steps[static_cast<std::size_t>(paused)].service_s = 0.5 * kMs;
  const test::EngineRuns runs = test::run_on_both_engines(trace, test::one_gpu_machine(), plan);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    ASSERT_TRUE(run->metrics.feasible);
    EXPECT_NEAR(run->metrics.iteration_time_s, 2.5 * kMs, 1e-15);
    EXPECT_NEAR(record_of(*run, paused).start_s, 1.5 * kMs, 1e-15); // the record starts when the op does
    EXPECT_NEAR(run->metrics.compute_busy_s, 2 * kMs, 1e-15);
    EXPECT_NEAR(run->metrics.stall_time_s, 0.5 * kMs, 1e-15);
  }
}

// f0 (pausing 1 ms) and f1 on two streams of one GPU, both ready at 0: f1 has the GPU to itself during the pause
// (0-1 ms), then f0 computes alone (1-2 ms). Were the pause compute, both would share the GPU and end later.
TEST(ComputePause, LeavesTheGpuToOtherStreams)
{
  const Trace trace = test::hand_trace({1000000, 1000000}, {{{0}, {1}}, {{0}, {2}}});
  Plan plan = hand_plan(trace);
  PlanBuilder build(plan);
  const StepId paused = build.compute(0);
  const StepId side = build.compute(1, {}, 0, 0, "side");
  plan.steps[static_cast<std::size_t>(paused)].service_s = 1 * kMs;
  const test::EngineRuns runs = test::run_on_both_engines(trace, test::one_gpu_machine(), plan);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    ASSERT_TRUE(run->metrics.feasible);
    EXPECT_NEAR(record_of(*run, side).end_s, 1 * kMs, 1e-15);
    EXPECT_NEAR(record_of(*run, paused).start_s, 1 * kMs, 1e-15);
    EXPECT_NEAR(record_of(*run, paused).end_s, 2 * kMs, 1e-15);
    EXPECT_NEAR(run->metrics.iteration_time_s, 2 * kMs, 1e-15);
  }
}

// A pause alone (an op of no time) takes just the pause: f0 0-1 ms, f1 (0 ms) pauses 0.25 ms and ends at 1.25 ms.
TEST(ComputePause, OfAnOpWithoutTimeIsThePauseAlone)
{
  const Trace trace = test::hand_trace({1000000, 1000000}, {{{0}, {1}}, {{1}, {2}, 0}});
  Plan plan = hand_plan(trace);
  PlanBuilder build(plan);
  build.compute(0);
  const StepId paused = build.compute(1);
  plan.steps[static_cast<std::size_t>(paused)].service_s = 0.25 * kMs;
  const test::EngineRuns runs = test::run_on_both_engines(trace, test::one_gpu_machine(), plan);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    ASSERT_TRUE(run->metrics.feasible);
    EXPECT_NEAR(run->metrics.iteration_time_s, 1.25 * kMs, 1e-15);
  }
}

} // namespace
} // namespace memsim
