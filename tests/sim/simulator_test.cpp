// The simulator on hand-made traces and plans whose answers are worked out by hand: transfer times (B/W + latency),
// link sharing, duplex, stalls, peaks, and each way a plan can be infeasible. Every simulation runs in a forked
// child (one SimGrid engine per process).
#include "simulate_in_child.hpp"

#include "memsim/planners/plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace memsim {
namespace {

using ::testing::HasSubstr;
using test::simulate_in_child;

constexpr std::uint64_t kMB = 1000000;

Gpu test_gpu(const std::string& name) { return Gpu{name, "test-gpu", 16ull << 30, {{"fp32", 10e12}}, 900e9, 0.0}; }

// gpu0, gpu1 -> sw0 -> host, as in DESIGN.md's appendix: the 1 GB/s uplink is the bottleneck.
Machine switched_machine(double uplink = 1e9, double gpu_link_latency = 0, double uplink_latency = 0)
{
  Machine machine;
  machine.name = "two-gpus-one-switch";
  machine.gpus = {test_gpu("gpu0"), test_gpu("gpu1")};
  machine.host.memory = 256ull << 30;
  machine.switches = {"sw0"};
  machine.links = {Link{"gpu0-sw0", "gpu0", "sw0", 16e9, gpu_link_latency, Duplex::split},
                   Link{"gpu1-sw0", "gpu1", "sw0", 16e9, gpu_link_latency, Duplex::split},
                   Link{"sw0-host", "sw0", "host", uplink, uplink_latency, Duplex::split},
                   Link{"nvlink", "gpu0", "gpu1", 4e9, 0, Duplex::split}};
  return machine;
}

// One GPU, one direct link to the host.
Machine direct_machine(Duplex duplex, std::uint64_t host_memory = 256ull << 30)
{
  Machine machine;
  machine.name = "one-gpu";
  machine.gpus = {test_gpu("gpu0")};
  machine.host.memory = host_memory;
  machine.links = {Link{"pcie", "gpu0", "host", 1e9, 0, duplex}};
  return machine;
}

// x (input, 1 MB) -> f0 -> a0 (1 MB) -> f1 -> a1 (1 MB); weight w (1000 B) read by both; 1 ms per op.
Trace two_op_trace(std::uint64_t workspace = 0)
{
  Trace trace;
  trace.name = "two-ops";
  trace.source = TraceSource{"test", "test-gpu", "fp32", 1, ""};
  trace.tensors = {Tensor{0, "x", kMB, TensorKind::input, {}, {}, {}},
                   Tensor{1, "w", 1000, TensorKind::weight, {}, {}, {}},
                   Tensor{2, "a0", kMB, TensorKind::activation, {}, {}, {}},
                   Tensor{3, "a1", kMB, TensorKind::activation, {}, {}, {}}};
  Op f0;
  f0.id = 0;
  f0.name = "f0";
  f0.type = "linear";
  f0.inputs = {0, 1};
  f0.outputs = {2};
  f0.time_s = 0.001;
  f0.workspace_bytes = workspace;
  Op f1 = f0;
  f1.id = 1;
  f1.name = "f1";
  f1.layer = 1;
  f1.inputs = {2, 1};
  f1.outputs = {3};
  trace.ops = {f0, f1};
  validate_trace(trace, trace.name);
  return trace;
}

Plan plan_for(const Trace& trace, const Machine& machine, std::uint64_t budget = 0)
{
  Plan plan;
  plan.trace = trace.name;
  plan.machine = machine.name;
  plan.planner = "hand";
  plan.budget_bytes = budget;
  return plan;
}

const StepRecord& record_of(const RunResult& result, StepId step)
{
  for (const StepRecord& record : result.timeline)
    if (record.step == step)
      return record;
  throw std::runtime_error("step not in the timeline");
}

TEST(Simulator, LoneOffloadTakesBytesOverTheBottleneck)
{
  const Trace trace = two_op_trace();
  const Machine machine = switched_machine();
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId compute = build.compute(0);
  const StepId offload = build.offload(2, {compute});
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible);
  EXPECT_DOUBLE_EQ(record_of(result, offload).start_s, 0.001);
  EXPECT_NEAR(record_of(result, offload).end_s, 0.002, 1e-12); // 1e6 B over 1 GB/s
  EXPECT_NEAR(result.metrics.iteration_time_s, 0.002, 1e-12);
  EXPECT_EQ(result.metrics.d2h_bytes, kMB);
  EXPECT_EQ(result.metrics.h2d_bytes, 0u);
  EXPECT_EQ(result.metrics.peak_host_bytes, kMB);
  EXPECT_EQ(result.metrics.steps_executed, 2u);
}

TEST(Simulator, ConcurrentOffloadsFromTwoGpusShareTheSwitchUplink)
{
  const Trace trace = two_op_trace();
  const Machine machine = switched_machine();
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId compute0 = build.compute(0, {}, 0);
  const StepId compute1 = build.compute(0, {}, 1);
  const StepId offload0 = build.offload(2, {compute0}, 0);
  const StepId offload1 = build.offload(2, {compute1}, 1);
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible);
  for (StepId offload : {offload0, offload1}) {
    EXPECT_DOUBLE_EQ(record_of(result, offload).start_s, 0.001);
    EXPECT_NEAR(record_of(result, offload).end_s, 0.003, 1e-12); // half of 1 GB/s each
  }
  EXPECT_EQ(result.metrics.d2h_bytes, 2 * kMB);
}

TEST(Simulator, AFasterUplinkMakesTheGpuLinkTheBottleneck)
{
  const Trace trace = two_op_trace();
  const Machine machine = switched_machine(64e9); // gpu links 16 GB/s now limit: 1e6 / 16e9 = 62.5 us
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId offload = build.offload(2, {build.compute(0)});
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible);
  EXPECT_NEAR(record_of(result, offload).end_s - record_of(result, offload).start_s, 62.5e-6, 1e-12);
}

TEST(Simulator, RouteLatencyIsPaidOncePerHop)
{
  const Trace trace = two_op_trace();
  const Machine machine = switched_machine(1e9, 5e-6, 10e-6);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId offload = build.offload(2, {build.compute(0)});
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible);
  EXPECT_NEAR(record_of(result, offload).end_s - record_of(result, offload).start_s, 15e-6 + 0.001, 1e-12);
}

TEST(Simulator, PeerSendUsesTheDirectLinkAndAllocatesOnThePeer)
{
  const Trace trace = two_op_trace();
  const Machine machine = switched_machine();
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId compute = build.compute(0);
  Step send;
  send.kind = StepKind::send;
  send.device = 0;
  send.stream = "p2p";
  send.tensor = 2;
  send.peer = 1;
  send.deps = {compute};
  const StepId sent = build.add(send);
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  // One hop over the 4 GB/s NVLink, not two over the switch.
  EXPECT_NEAR(record_of(result, sent).end_s - record_of(result, sent).start_s, 250e-6, 1e-12);
  EXPECT_EQ(result.metrics.p2p_bytes, kMB);
  // gpu0 holds x, w, a0; gpu1 holds a0 only.
  EXPECT_EQ(result.metrics.peak_device_bytes, 2 * kMB + 1000);
}

// Offload of a1 and prefetch of a0 start together on one 1 GB/s link.
Plan both_directions_plan(const Trace& trace, const Machine& machine, StepId& offload, StepId& prefetch)
{
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId f1 = build.compute(1, {f0});
  const StepId offload_a0 = build.offload(2, {f0});
  const StepId free_a0 = build.free(2, {offload_a0, f1}, "d2h");
  offload = build.offload(3, {free_a0});
  prefetch = build.prefetch(2, {free_a0});
  return plan;
}

TEST(Simulator, SplitDuplexCarriesBothDirectionsAtFullRate)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  StepId offload = 0, prefetch = 0;
  const Plan plan = both_directions_plan(trace, machine, offload, prefetch);
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  for (StepId step : {offload, prefetch})
    EXPECT_NEAR(record_of(result, step).end_s - record_of(result, step).start_s, 0.001, 1e-12);
}

TEST(Simulator, SharedDuplexSplitsTheLinkBetweenDirections)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::shared);
  StepId offload = 0, prefetch = 0;
  const Plan plan = both_directions_plan(trace, machine, offload, prefetch);
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  for (StepId step : {offload, prefetch})
    EXPECT_NEAR(record_of(result, step).end_s - record_of(result, step).start_s, 0.002, 1e-12);
}

TEST(Simulator, StallIsComputeIdleTimeWaitingForData)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);                   // 0 - 1 ms
  const StepId offload = build.offload(2, {f0});        // 1 - 2 ms
  const StepId freed = build.free(2, {offload}, "d2h"); // 2 ms
  const StepId prefetch = build.prefetch(2, {freed});   // 2 - 3 ms
  const StepId f1 = build.compute(1, {prefetch});       // 3 - 4 ms
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  EXPECT_NEAR(record_of(result, f1).start_s, 0.003, 1e-12);
  EXPECT_NEAR(result.metrics.iteration_time_s, 0.004, 1e-12);
  EXPECT_NEAR(result.metrics.compute_busy_s, 0.002, 1e-12);
  EXPECT_NEAR(result.metrics.stall_time_s, 0.002, 1e-12);
  EXPECT_EQ(result.metrics.h2d_bytes, kMB);
  EXPECT_EQ(result.metrics.d2h_bytes, kMB);
}

TEST(Simulator, PeakCountsResidentTensorsOutputsAndWorkspace)
{
  const Trace trace = two_op_trace(500000);
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId f1 = build.compute(1, {f0});
  build.free(2, {f1});
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible);
  // During f1: x + w + a0 + a1 + workspace.
  EXPECT_EQ(result.metrics.peak_device_bytes, 3 * kMB + 1000 + 500000);
  ASSERT_FALSE(result.memory.empty());
  EXPECT_EQ(result.memory.front().bytes, kMB + 1000);    // x and w from the start
  EXPECT_EQ(result.memory.back().bytes, 2 * kMB + 1000); // a0 freed at the end
  EXPECT_NEAR(result.metrics.iteration_time_s, 0.002, 1e-12);
  EXPECT_DOUBLE_EQ(result.metrics.stall_time_s, 0.0);
}

TEST(Simulator, OutOfMemoryNamesTheStepTensorTimeAndBytes)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine, 2 * kMB + 500000);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  build.compute(1, {f0}); // a1 does not fit next to x, w and a0
  const RunResult result = simulate_in_child(trace, machine, plan);
  EXPECT_FALSE(result.metrics.feasible);
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->step, 1);
  EXPECT_EQ(result.error->tensor, std::optional<TensorId>(3));
  EXPECT_NEAR(result.error->time_s, 0.001, 1e-12);
  EXPECT_EQ(result.error->bytes_in_use, 2 * kMB + 1000);
  EXPECT_EQ(result.error->bytes_requested, kMB);
  EXPECT_THAT(result.error->message, HasSubstr("out of memory: step 1 (compute on gpu0/compute) allocates tensor 3 "
                                               "'a1' (1000000 bytes) on gpu0 at t=0.001000000s with 2001000 bytes in "
                                               "use; budget is 2500000 bytes"));
  EXPECT_EQ(result.metrics.steps_executed, 1u);
}

TEST(Simulator, ResidentTensorsAboveTheBudgetFailBeforeAnyStep)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine, 500000);
  PlanBuilder(plan).compute(0);
  const RunResult result = simulate_in_child(trace, machine, plan);
  EXPECT_FALSE(result.metrics.feasible);
  ASSERT_TRUE(result.error);
  EXPECT_THAT(result.error->message, HasSubstr("the tensors resident from the start need 1001000 bytes"));
  EXPECT_EQ(result.metrics.steps_executed, 0u);
}

TEST(Simulator, ReadingAFreedTensorIsInfeasible)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId freed = build.free(2, {f0});
  build.compute(1, {freed});
  const RunResult result = simulate_in_child(trace, machine, plan);
  EXPECT_FALSE(result.metrics.feasible);
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->step, 2);
  EXPECT_EQ(result.error->tensor, std::optional<TensorId>(2));
  EXPECT_THAT(result.error->message, HasSubstr("step 2 (compute on gpu0/compute) reads tensor 2 'a0' (1000000 bytes) "
                                               "but it is not resident on gpu0 at t=0.001000000s"));
}

TEST(Simulator, PrefetchWithoutAHostCopyIsInfeasible)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId freed = build.free(2, {f0});
  build.prefetch(2, {freed});
  const RunResult result = simulate_in_child(trace, machine, plan);
  EXPECT_FALSE(result.metrics.feasible);
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->step, 2);
  EXPECT_THAT(result.error->message, HasSubstr("but the host has no copy"));
}

TEST(Simulator, AllocatingAResidentTensorTwiceIsInfeasible)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId offload = build.offload(2, {f0});
  build.prefetch(2, {offload}); // a0 was never freed on the device
  const RunResult result = simulate_in_child(trace, machine, plan);
  EXPECT_FALSE(result.metrics.feasible);
  ASSERT_TRUE(result.error);
  EXPECT_THAT(result.error->message, HasSubstr("already resident there (double allocation)"));
}

TEST(Simulator, HostMemoryIsBounded)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split, 1500000);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId f1 = build.compute(1, {f0});
  const StepId first = build.offload(2, {f0});
  build.offload(3, {f1, first});
  const RunResult result = simulate_in_child(trace, machine, plan);
  EXPECT_FALSE(result.metrics.feasible);
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->step, 3);
  EXPECT_EQ(result.error->bytes_in_use, kMB);
  EXPECT_THAT(result.error->message, HasSubstr("host memory full"));
}

TEST(Simulator, RecomputeTimeIsCountedApart)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId freed = build.free(2, {f0});
  const StepId again = build.recompute(0, {freed});
  build.compute(1, {again});
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  EXPECT_NEAR(result.metrics.recompute_time_s, 0.001, 1e-12);
  EXPECT_NEAR(result.metrics.compute_busy_s, 0.003, 1e-12);
  EXPECT_NEAR(result.metrics.iteration_time_s, 0.003, 1e-12);
}

TEST(Simulator, StreamOrderHoldsEvenWithoutDeps)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId f1 = build.compute(1); // no dep on f0: the stream alone orders them
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible);
  EXPECT_NEAR(record_of(result, f0).end_s, 0.001, 1e-12);
  EXPECT_NEAR(record_of(result, f1).start_s, 0.001, 1e-12);
}

TEST(Simulator, TimelineDocumentIsPerfettoWithOneTrackPerStreamAndMemoryCounters)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  StepId offload = 0, prefetch = 0;
  const Plan plan = both_directions_plan(trace, machine, offload, prefetch);
  const RunResult result = simulate_in_child(trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible);
  const nlohmann::json document = timeline_to_json(result, "test");
  EXPECT_EQ(document["format"], "memsim-timeline");
  std::set<std::string> threads;
  std::size_t slices = 0, counters = 0;
  for (const nlohmann::json& event : document["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name")
      threads.insert(event["args"]["name"].get<std::string>());
    slices += event["ph"] == "X";
    counters += event["ph"] == "C" && event["name"] == "memory";
  }
  EXPECT_EQ(threads, (std::set<std::string>{"compute", "d2h", "h2d"}));
  EXPECT_EQ(slices, plan.steps.size());
  EXPECT_EQ(counters, result.memory.size());
  // The memsim part reads back to the same records.
  const RunResult back = timeline_from_json(document, "test.json");
  ASSERT_EQ(back.timeline.size(), result.timeline.size());
  EXPECT_EQ(back.timeline[3].label, "a0");
  EXPECT_DOUBLE_EQ(back.timeline[3].end_s, result.timeline[3].end_s);
}

TEST(Simulator, MetricsJsonHasTheAppendixKeys)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine, 2 * kMB + 500000);
  PlanBuilder build(plan);
  build.compute(1, {build.compute(0)});
  const nlohmann::json metrics = metrics_to_json(simulate_in_child(trace, machine, plan));
  for (const char* key : {"feasible", "error", "iteration_time_s", "compute_busy_s", "stall_time_s", "recompute_time_s",
                          "peak_device_bytes", "h2d_bytes", "d2h_bytes", "p2p_bytes"})
    EXPECT_TRUE(metrics.contains(key)) << key;
  EXPECT_EQ(metrics["feasible"], false);
  for (const char* key : {"step", "tensor", "time_s", "bytes_in_use", "bytes_requested", "message"})
    EXPECT_TRUE(metrics["error"].contains(key)) << key;
}

TEST(Simulator, SameInputsGiveIdenticalTimelines)
{
  const Trace trace = two_op_trace();
  const Machine machine = switched_machine();
  Plan plan = plan_for(trace, machine);
  PlanBuilder build(plan);
  build.offload(2, {build.compute(0, {}, 0)}, 0);
  build.offload(2, {build.compute(0, {}, 1)}, 1);
  EXPECT_EQ(timeline_to_json(simulate_in_child(trace, machine, plan)).dump(),
            timeline_to_json(simulate_in_child(trace, machine, plan)).dump());
}

TEST(Simulator, APlanForAnotherTraceIsBadInput)
{
  const Trace trace = two_op_trace();
  const Machine machine = direct_machine(Duplex::split);
  Plan plan = plan_for(trace, machine);
  PlanBuilder(plan).compute(7);
  EXPECT_THROW(simulate_in_child(trace, machine, plan), std::runtime_error);
}

} // namespace
} // namespace memsim
