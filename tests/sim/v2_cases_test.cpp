// The v2 plan additions, exact, on both engines (the fast engine in process, SimGrid in a child): split/merge
// views, a weight prefetched from the host, host compute, ring collectives, a gradient shared across instances,
// per-iteration times, and recv's arrival check. Every case also checks that the two engines agree.
#include "engine_comparison.hpp"

#include "memsim/planners/plan.hpp"
#include "memsim/sim/timeline.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace memsim {
namespace {

using ::testing::HasSubstr;

constexpr double kTolerance = 1e-12;

// gpus GPUs on one switch (links of `bandwidth`, split duplex, `latency`), the switch to the host at 4 GB/s.
Machine switched(int gpus, double bandwidth, double latency = 0)
{
  Machine machine;
  machine.name = "v2-test";
  machine.host.memory = 1ull << 36;
  machine.host.flops = 1e12;
  machine.host.memory_bandwidth = 1e9;
  machine.switches = {"sw0"};
  for (int g = 0; g < gpus; ++g) {
    const std::string name = "gpu" + std::to_string(g);
    machine.gpus.push_back(Gpu{name, "test-gpu", 16ull << 30, {{"fp32", 10e12}}, 900e9, 0});
    machine.links.push_back(Link{name + "-sw0", name, "sw0", bandwidth, latency, Duplex::split});
  }
  machine.links.push_back(Link{"sw0-host", "sw0", "host", 4e9, 0, Duplex::split});
  validate_machine(machine, machine.name);
  return machine;
}

using test::EngineRuns;

EngineRuns run_both(const std::string& trace_text, const Machine& machine, const std::string& plan_text,
                    AllocatorKind allocator = AllocatorKind::bytes)
{
  SimOptions options;
  options.allocator = allocator;
  return test::run_on_both_engines(trace_from_text(trace_text, "test.trace.json"), machine,
                                   plan_from_text(plan_text, "test.plan.json"), options);
}

std::string trace_doc(const std::string& tensors, const std::string& ops)
{
  return R"({"format": "memsim-trace", "version": 1, "name": "t", "source": {"device": "test-gpu"},
             "tensors": [)" +
         tensors + R"(], "ops": [)" + ops + "]}";
}

std::string plan_doc(const std::string& extra, const std::string& steps)
{
  return R"({"format": "memsim-plan", "version": 1, "trace": "t", "machine": "m", "planner": "hand", )" + extra +
         R"( "steps": [)" + steps + "]}";
}

// An op reads X = 8 MB and writes Y = 4 MB; split into p = 4 micro-ops that each free their input part, the peak
// is X + Y - (p-1)/p min(X, Y) = 9 MB (DESIGN.md appendix B). The micro-ops give no time: each takes 1/4 of the op's.
const std::string kSplitTrace = trace_doc(
    R"({"id": 0, "name": "x", "bytes": 8000000, "kind": "input"},
       {"id": 1, "name": "y", "bytes": 4000000, "kind": "activation"})",
    R"({"id": 0, "name": "op", "phase": "forward", "inputs": [0], "outputs": [1], "time_s": 0.004})");

std::string split_plan()
{
  std::string tensors;
  std::string ops;
  for (int i = 0; i < 4; ++i) {
    tensors += fmt::format(R"({}{{"id": {}, "name": "x#{}", "bytes": 2000000, "kind": "activation"}},)"
                           R"({{"id": {}, "name": "y#{}", "bytes": 1000000, "kind": "activation"}})",
                           i ? "," : "", 2 + 2 * i, i, 3 + 2 * i, i);
    ops += fmt::format(R"({}{{"id": {}, "name": "op#{}", "phase": "forward", "inputs": [{}], "outputs": [{}],
                          "split_of": {{"op": 0, "index": {}, "parts": 4, "dim": "batch"}}}})",
                       i ? "," : "", 1 + i, i, 2 + 2 * i, 3 + 2 * i, i);
  }
  std::string steps = R"({"id": 0, "kind": "split", "tensor": 0, "parts": [2, 4, 6, 8], "deps": []})";
  StepId id = 1;
  for (int i = 0; i < 4; ++i) {
    steps += fmt::format(R"(, {{"id": {}, "kind": "compute", "op": {}, "deps": []}})", id, 1 + i);
    steps += fmt::format(R"(, {{"id": {}, "kind": "free", "tensor": {}, "deps": [{}]}})", id + 1, 2 + 2 * i, id);
    id += 2;
  }
  steps += fmt::format(R"(, {{"id": {}, "kind": "merge", "tensor": 1, "parts": [3, 5, 7, 9], "deps": []}})", id);
  return plan_doc(R"("extra_tensors": [)" + tensors + R"(], "extra_ops": [)" + ops + "],", steps);
}

TEST(V2Cases, SplitIntoFourMicroOpsPeaksAtNineMegabytes)
{
  const EngineRuns runs = run_both(kSplitTrace, switched(1, 16e9), split_plan());
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_EQ(result->metrics.peak_device_bytes, 9000000u);
    EXPECT_NEAR(result->metrics.iteration_time_s, 0.004, kTolerance); // 4 micro-ops of 1 ms
    EXPECT_NEAR(result->timeline[1].end_s - result->timeline[1].start_s, 0.001, kTolerance);
    EXPECT_EQ(result->memory.back().bytes, 4000000u); // y, merged
  }
}

TEST(V2Cases, UnderThePoolAPartiallyFreedParentBlockStaysInTheArena)
{
  // 9.5 MB fits the 9 MB of bytes, but the parent's 8 MB block returns to the pool only when all its parts are
  // gone: the second micro-op's output finds no block.
  std::string budgeted = split_plan();
  budgeted.insert(budgeted.find("\"steps\""), "\"budget_bytes\": 9500000, ");
  const EngineRuns bytes = run_both(kSplitTrace, switched(1, 16e9), budgeted, AllocatorKind::bytes);
  EXPECT_FALSE(bytes.fast.error);
  const EngineRuns pool = run_both(kSplitTrace, switched(1, 16e9), budgeted, AllocatorKind::pool);
  ASSERT_TRUE(pool.fast.error);
  EXPECT_EQ(pool.fast.error->kind, FailureKind::fragmentation);
  EXPECT_EQ(pool.fast.error->step, 3); // the second micro-op
}

TEST(V2Cases, AWeightPlacedOnTheHostIsPrefetchedBeforeTheGpuReadsIt)
{
  const std::string trace = trace_doc(
      R"({"id": 0, "name": "x", "bytes": 1000000, "kind": "input"},
         {"id": 1, "name": "w", "bytes": 4000000, "kind": "weight"},
         {"id": 2, "name": "a", "bytes": 1000000, "kind": "activation"})",
      R"({"id": 0, "name": "f", "phase": "forward", "inputs": [0, 1], "outputs": [2], "time_s": 0.001})");
  const std::string placement = R"("initial_placement": [{"kind": "weight", "where": "host"}],)";
  const EngineRuns runs =
      run_both(trace, switched(1, 16e9), plan_doc(placement, R"({"id": 0, "kind": "prefetch", "tensor": 1, "deps": []},
                                                    {"id": 1, "kind": "compute", "op": 0, "deps": [0]})"));
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_NEAR(result->timeline[0].end_s, 0.001, kTolerance); // 4 MB over the 4 GB/s switch uplink
    EXPECT_NEAR(result->metrics.iteration_time_s, 0.002, kTolerance);
    EXPECT_EQ(result->metrics.peak_host_bytes, 4000000u); // from t = 0
    EXPECT_EQ(result->metrics.peak_device_bytes, 6000000u);
    EXPECT_EQ(result->memory.front().bytes, 1000000u); // only x starts on the GPU
  }
  const EngineRuns missing =
      run_both(trace, switched(1, 16e9), plan_doc(placement, R"({"id": 0, "kind": "compute", "op": 0, "deps": []})"));
  ASSERT_TRUE(missing.fast.error);
  EXPECT_EQ(missing.fast.error->kind, FailureKind::not_resident);
  EXPECT_EQ(missing.fast.error->tensor, TensorId{1});
}

const std::string kUpdateTrace = trace_doc(
    R"({"id": 0, "name": "w", "bytes": 1000000, "kind": "weight"},
       {"id": 1, "name": "s", "bytes": 2000000, "kind": "optimizer_state"},
       {"id": 2, "name": "u", "bytes": 1000, "kind": "other"},
       {"id": 3, "name": "v", "bytes": 1000, "kind": "other"})",
    R"({"id": 0, "name": "adam", "phase": "update", "inputs": [0, 1], "outputs": [2], "time_s": 0.0001,
        "cpu_time_s": 0.003},
       {"id": 1, "name": "adam2", "phase": "update", "inputs": [0, 1], "outputs": [3], "time_s": 0.0001,
        "flops": 2e9, "bytes_accessed": 1e6})");

TEST(V2Cases, AHostStepTakesItsCpuTimeOrTheHostRoofline)
{
  const std::string placement = R"("initial_placement": [{"kind": "weight", "where": "host"},
                                                         {"kind": "optimizer_state", "where": "host"}],)";
  const EngineRuns runs = run_both(kUpdateTrace, switched(1, 16e9),
                                   plan_doc(placement, R"({"id": 0, "kind": "compute", "op": 0, "device": -1,
                                                     "stream": "cpu0", "deps": []},
                                                    {"id": 1, "kind": "compute", "op": 1, "device": -1,
                                                     "stream": "cpu0", "deps": []})"));
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_NEAR(result->timeline[0].end_s, 0.003, kTolerance); // cpu_time_s
    // max(2e9 FLOP / 1e12 FLOP/s, 1e6 B / 1e9 B/s) = 2 ms
    EXPECT_NEAR(result->timeline[1].end_s - result->timeline[1].start_s, 0.002, kTolerance);
    EXPECT_EQ(result->metrics.peak_host_bytes, 3002000u); // w, s and both outputs, on the host
    EXPECT_EQ(result->metrics.peak_device_bytes, 0u);
    EXPECT_EQ(result->metrics.compute_busy_s, 0.0); // GPU metrics leave the host out
  }
}

TEST(V2Cases, AHostStepReadingATensorOnlyOnTheGpuFailsAtRunTime)
{
  // w starts on gpu0 (a step there names it), the host step reads it before any offload: not resident on the host.
  // (The loader accepts it: the offload that would put w on the host comes earlier in list order.)
  const std::string placement = R"("initial_placement": [{"kind": "optimizer_state", "where": "host"}],)";
  const EngineRuns runs = run_both(kUpdateTrace, switched(1, 16e9),
                                   plan_doc(placement, R"({"id": 0, "kind": "offload", "tensor": 0, "deps": []},
                                                    {"id": 1, "kind": "compute", "op": 0, "device": -1,
                                                     "stream": "cpu0", "deps": []})"));
  ASSERT_TRUE(runs.fast.error);
  EXPECT_EQ(runs.fast.error->kind, FailureKind::not_resident);
  EXPECT_EQ(runs.fast.error->device, -1);
  EXPECT_THAT(runs.fast.error->message, HasSubstr("step 1 (compute on host/cpu0) reads tensor 0 'w'"));
}

const std::string kGradTrace = trace_doc(R"({"id": 0, "name": "g", "bytes": 8000000, "kind": "weight"})", R"()");

std::string allreduce_plan(int gpus)
{
  std::string group;
  for (int g = 0; g < gpus; ++g)
    group += (g ? ", " : "") + std::to_string(g);
  return plan_doc("", R"({"id": 0, "kind": "allreduce", "tensor": 0, "group": [)" + group +
                          R"(], "device": 0, "stream": "coll", "deps": []})");
}

TEST(V2Cases, RingAllReduceTakesTwoNMinusOneOverNTimesSizeOverBandwidth)
{
  // S = 8 MB over 8 GB/s links: 2 (N-1)/N S/W = 1 ms for N = 2, 1.5 ms for N = 4 (no link is shared: every GPU's
  // uplink carries one chunk up and one down per phase, split duplex).
  for (int gpus : {2, 4}) {
    const EngineRuns runs = run_both(kGradTrace, switched(gpus, 8e9), allreduce_plan(gpus));
    const double expected = 2.0 * (gpus - 1) / gpus * 8e6 / 8e9;
    for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
      ASSERT_FALSE(result->error) << result->error->message;
      EXPECT_NEAR(result->metrics.iteration_time_s, expected, kTolerance) << gpus;
      EXPECT_EQ(result->metrics.p2p_bytes, static_cast<std::uint64_t>(2 * (gpus - 1) * 8000000)); // N chunks of S/N
    }
  }
  // Latency: paid once per phase, per route (gpu -> switch -> gpu: two links of 1 us).
  const EngineRuns runs = run_both(kGradTrace, switched(2, 8e9, 1e-6), allreduce_plan(2));
  EXPECT_NEAR(runs.fast.metrics.iteration_time_s, 0.001 + 2 * 2e-6, kTolerance);
}

TEST(V2Cases, FourMicrobatchesAccumulateIntoOneSharedGradient)
{
  const std::string trace = trace_doc(
      R"({"id": 0, "name": "x", "bytes": 1000000, "kind": "input"},
         {"id": 1, "name": "w", "bytes": 2000000, "kind": "weight"},
         {"id": 2, "name": "dw", "bytes": 2000000, "kind": "weight_grad"})",
      R"({"id": 0, "name": "b", "phase": "backward", "inputs": [0, 1], "outputs": [2], "time_s": 0.001})");
  std::string steps;
  for (int i = 0; i < 4; ++i)
    steps +=
        fmt::format(R"({}{{"id": {}, "kind": "compute", "op": 0, "instance": {}, "deps": []}})", i ? "," : "", i, i);
  const EngineRuns runs =
      run_both(trace, switched(1, 16e9), plan_doc(R"("shared_across_instances": ["weight", "weight_grad"],)", steps));
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    int allocations = 0;
    for (const StepRecord& record : result->timeline)
      allocations += record.bytes > 0 ? 1 : 0;
    EXPECT_EQ(allocations, 1);
    EXPECT_EQ(result->timeline[0].bytes, 2000000u);
    // four inputs (one per microbatch), one weight, one gradient
    EXPECT_EQ(result->metrics.peak_device_bytes, 4 * 1000000u + 2000000u + 2000000u);
    EXPECT_NEAR(result->metrics.iteration_time_s, 0.004, kTolerance);
  }
  // Without sharing, the second microbatch's gradient is a second allocation of its own slot: 4 gradients.
  const EngineRuns unshared = run_both(trace, switched(1, 16e9), plan_doc("", steps));
  EXPECT_EQ(unshared.fast.metrics.peak_device_bytes, 4 * 1000000u + 4 * 2000000u + 4 * 2000000u);
}

TEST(V2Cases, ThreeIterationsHaveTheirOwnTimes)
{
  const std::string trace = trace_doc(
      R"({"id": 0, "name": "x", "bytes": 1000, "kind": "input"},
         {"id": 1, "name": "a0", "bytes": 1000, "kind": "activation"},
         {"id": 2, "name": "a1", "bytes": 1000, "kind": "activation"},
         {"id": 3, "name": "a2", "bytes": 1000, "kind": "activation"})",
      R"({"id": 0, "name": "f0", "phase": "forward", "inputs": [0], "outputs": [1], "time_s": 0.001},
         {"id": 1, "name": "f1", "phase": "forward", "inputs": [0], "outputs": [2], "time_s": 0.002, "iteration": 1},
         {"id": 2, "name": "f2", "phase": "forward", "inputs": [0], "outputs": [3], "time_s": 0.003, "iteration": 2})");
  const EngineRuns runs = run_both(trace, switched(1, 16e9), plan_doc("", R"(
      {"id": 0, "kind": "compute", "op": 0, "deps": []},
      {"id": 1, "kind": "compute", "op": 1, "iteration": 1, "deps": [0]},
      {"id": 2, "kind": "compute", "op": 2, "iteration": 2, "deps": [1]})"));
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    ASSERT_EQ(result->metrics.iteration_times_s.size(), 3u);
    EXPECT_NEAR(result->metrics.iteration_times_s[0], 0.001, kTolerance);
    EXPECT_NEAR(result->metrics.iteration_times_s[1], 0.002, kTolerance);
    EXPECT_NEAR(result->metrics.iteration_times_s[2], 0.003, kTolerance);
    EXPECT_NEAR(result->metrics.steady_iteration_time_s, 0.0025, kTolerance); // mean over iterations >= 1
    EXPECT_NEAR(result->metrics.iteration_time_s, 0.006, kTolerance);
  }
}

TEST(V2Cases, LoopsRunOneAfterAnotherAndTheirIterationsAdd)
{
  // Loop 0 runs f0 (1 ms, iteration 0) and f1 (2 ms, iteration 1); then loop 1 runs f2, f3, f4 (3, 4, 5 ms,
  // iterations 0, 1, 2), timed from the end of loop 0 (3 ms). Iteration i sums the loops' iteration i: 1 + 3, 2 + 4,
  // 5 ms; the steady time is the sum of the loops' steady times, 2 + (4 + 5) / 2 ms.
  const std::string trace = trace_doc(
      R"({"id": 0, "name": "x", "bytes": 1000, "kind": "input"},
         {"id": 1, "name": "a0", "bytes": 1000, "kind": "activation"},
         {"id": 2, "name": "a1", "bytes": 1000, "kind": "activation"},
         {"id": 3, "name": "a2", "bytes": 1000, "kind": "activation"},
         {"id": 4, "name": "a3", "bytes": 1000, "kind": "activation"},
         {"id": 5, "name": "a4", "bytes": 1000, "kind": "activation"})",
      R"({"id": 0, "name": "f0", "phase": "forward", "inputs": [0], "outputs": [1], "time_s": 0.001},
         {"id": 1, "name": "f1", "phase": "forward", "inputs": [0], "outputs": [2], "time_s": 0.002, "iteration": 1},
         {"id": 2, "name": "f2", "phase": "forward", "inputs": [0], "outputs": [3], "time_s": 0.003},
         {"id": 3, "name": "f3", "phase": "forward", "inputs": [0], "outputs": [4], "time_s": 0.004, "iteration": 1},
         {"id": 4, "name": "f4", "phase": "forward", "inputs": [0], "outputs": [5], "time_s": 0.005, "iteration": 2})");
  const std::string plan = plan_doc("", R"(
      {"id": 0, "kind": "compute", "op": 0, "deps": []},
      {"id": 1, "kind": "compute", "op": 1, "iteration": 1, "deps": [0]},
      {"id": 2, "kind": "compute", "op": 2, "loop": 1, "deps": [1]},
      {"id": 3, "kind": "compute", "op": 3, "iteration": 1, "loop": 1, "deps": [2]},
      {"id": 4, "kind": "compute", "op": 4, "iteration": 2, "loop": 1, "deps": [3]})");
  EXPECT_EQ(v2_feature(plan_from_text(plan_doc("", R"({"id": 0, "kind": "compute", "op": 2, "loop": 1, "deps": []})"),
                                      "test.plan.json")),
            "loops");
  EXPECT_EQ(plan_to_json(plan_from_text(plan, "test.plan.json"))["steps"][4]["loop"], 1);
  const EngineRuns runs = run_both(trace, switched(1, 16e9), plan);
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    ASSERT_EQ(result->metrics.iteration_times_s.size(), 3u);
    EXPECT_NEAR(result->metrics.iteration_times_s[0], 0.004, kTolerance);
    EXPECT_NEAR(result->metrics.iteration_times_s[1], 0.006, kTolerance);
    EXPECT_NEAR(result->metrics.iteration_times_s[2], 0.005, kTolerance);
    EXPECT_NEAR(result->metrics.steady_iteration_time_s, 0.002 + 0.0045, kTolerance);
    EXPECT_NEAR(result->metrics.iteration_time_s, 0.015, kTolerance);
  }
  // The timeline document keeps each step's loop: metrics read back from it are the same.
  const RunResult reread = timeline_from_json(timeline_to_json(runs.fast), "timeline.json");
  EXPECT_NEAR(reread.metrics.steady_iteration_time_s, 0.0065, kTolerance);
}

TEST(V2Cases, ARecvChecksThatItsSendHasDelivered)
{
  // (A tensor that exists from the start would be resident on every device whose steps name it, the receiver's
  // too: the sent tensor here is produced on gpu0.)
  const std::string trace = trace_doc(R"({"id": 0, "name": "x", "bytes": 1000, "kind": "input"},
                                         {"id": 1, "name": "a", "bytes": 8000000, "kind": "activation"})",
                                      R"({"id": 0, "name": "f", "phase": "forward", "inputs": [0], "outputs": [1],
                                          "time_s": 0})");
  const std::string send = R"({"id": 0, "kind": "compute", "op": 0, "device": 0, "deps": []},
                              {"id": 1, "kind": "send", "tensor": 1, "device": 0, "peer": 1, "deps": [0]},)";
  const EngineRuns ordered =
      run_both(trace, switched(2, 8e9), plan_doc("", send + R"({"id": 2, "kind": "recv", "tensor": 1, "device": 1,
                                                        "peer": 0, "deps": [1]})"));
  ASSERT_FALSE(ordered.fast.error) << ordered.fast.error->message;
  EXPECT_NEAR(ordered.fast.timeline[2].start_s, 0.001, kTolerance); // zero time, when the bytes have arrived
  EXPECT_NEAR(ordered.fast.timeline[2].end_s, 0.001, kTolerance);
  const EngineRuns racing =
      run_both(trace, switched(2, 8e9), plan_doc("", send + R"({"id": 2, "kind": "recv", "tensor": 1, "device": 1,
                                                       "peer": 0, "deps": [0]})"));
  ASSERT_TRUE(racing.fast.error);
  EXPECT_EQ(racing.fast.error->kind, FailureKind::not_resident);
  EXPECT_EQ(racing.fast.error->step, 2);
  EXPECT_THAT(racing.fast.error->message, HasSubstr("step 2 (recv on gpu1/p2p) receives tensor 1 'a'"));
}

} // namespace
} // namespace memsim
