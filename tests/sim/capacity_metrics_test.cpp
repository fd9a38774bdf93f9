// The capacity and throughput metrics (samples_per_s, pcie_*_utilization, swapped_bytes, recomputed_bytes,
// recompute_fraction, swap_overlap_fraction), worked
// out by hand on small plans, on both engines (the fast engine in process, SimGrid in a child).
#include "engine_comparison.hpp"

#include "memsim/planners/plan.hpp"

#include <gtest/gtest.h>

#include <string>

namespace memsim {
namespace {

constexpr double kTolerance = 1e-12;

// gpus GPUs on one switch (16 GB/s links), the switch to the host at 4 GB/s per direction.
Machine switched(int gpus)
{
  Machine machine;
  machine.name = "capacity-test";
  machine.host.memory = 1ull << 36;
  machine.switches = {"sw0"};
  for (int g = 0; g < gpus; ++g) {
    const std::string name = "gpu" + std::to_string(g);
    machine.gpus.push_back(Gpu{name, "test-gpu", 16ull << 30, {{"fp32", 10e12}}, 900e9, 0});
    machine.links.push_back(Link{name + "-sw0", name, "sw0", 16e9, 0, Duplex::split});
  }
  machine.links.push_back(Link{"sw0-host", "sw0", "host", 4e9, 0, Duplex::split});
  validate_machine(machine, machine.name);
  return machine;
}

// Both engines' metrics, after checking that they agree.
std::vector<Metrics> run_both(const std::string& trace_text, const Machine& machine, const std::string& plan_text)
{
  const test::EngineRuns runs = test::run_on_both_engines(trace_from_text(trace_text, "test.trace.json"), machine,
                                                          plan_from_text(plan_text, "test.plan.json"));
  EXPECT_FALSE(runs.fast.error) << runs.fast.error->message;
  return {runs.fast.metrics, runs.simgrid.metrics};
}

std::string plan_doc(const std::string& extra, const std::string& steps)
{
  return R"({"format": "memsim-plan", "version": 1, "trace": "t", "machine": "m", "planner": "hand", )" + extra +
         R"( "steps": [)" + steps + "]}";
}

// x (4 MB) -> op0 (2 ms) -> a (8 MB) -> op1 (1 ms) -> b (4 MB); batch 8 in the source.
const std::string kChain = R"({"format": "memsim-trace", "version": 1, "name": "t",
  "source": {"device": "test-gpu", "dtype": "fp32", "batch": 8},
  "tensors": [{"id": 0, "name": "x", "bytes": 4000000, "kind": "input"},
              {"id": 1, "name": "a", "bytes": 8000000, "kind": "activation"},
              {"id": 2, "name": "b", "bytes": 4000000, "kind": "activation"}],
  "ops": [{"id": 0, "name": "op0", "phase": "forward", "inputs": [0], "outputs": [1], "time_s": 0.002},
          {"id": 1, "name": "op1", "phase": "forward", "inputs": [1], "outputs": [2], "time_s": 0.001}]})";

TEST(CapacityMetrics, SwapRecomputeAndOverlappingCopiesOnOneGpu)
{
  // op0 [0, 2 ms]. Then a (8 MB) and x (4 MB) go to the host together over the 4 GB/s uplink: 2 GB/s each until x
  // is done at 4 ms, then a alone at 4 GB/s for its last 4 MB: a ends at 5 ms. Both are freed with a host copy; a
  // comes back [5, 7] (swapped: 8 MB; x never returns), op1 [7, 8], b is dropped and recomputed [8, 9].
  const std::string steps = R"(
    {"id": 0, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "deps": []},
    {"id": 1, "kind": "offload", "tensor": 1, "device": 0, "stream": "d2h", "deps": [0]},
    {"id": 2, "kind": "offload", "tensor": 0, "device": 0, "stream": "d2h2", "deps": [0]},
    {"id": 3, "kind": "free", "tensor": 1, "device": 0, "stream": "d2h", "deps": [1]},
    {"id": 4, "kind": "free", "tensor": 0, "device": 0, "stream": "d2h2", "deps": [2]},
    {"id": 5, "kind": "prefetch", "tensor": 1, "device": 0, "stream": "h2d", "deps": [3]},
    {"id": 6, "kind": "compute", "op": 1, "device": 0, "stream": "compute", "deps": [5]},
    {"id": 7, "kind": "free", "tensor": 2, "device": 0, "stream": "compute", "deps": [6]},
    {"id": 8, "kind": "recompute", "op": 1, "device": 0, "stream": "compute", "deps": [7]})";
  for (const Metrics& m : run_both(kChain, switched(1), plan_doc("", steps))) {
    EXPECT_NEAR(m.iteration_time_s, 0.009, kTolerance);
    EXPECT_NEAR(m.pcie_d2h_utilization, 3.0 / 9.0, kTolerance); // busy [2, 5] ms: the union, not 2 + 3 ms
    EXPECT_NEAR(m.pcie_h2d_utilization, 2.0 / 9.0, kTolerance); // [5, 7] ms
    EXPECT_EQ(m.swapped_bytes, 8000000u);
    EXPECT_EQ(m.recomputed_bytes, 4000000u);
    EXPECT_EQ(m.d2h_bytes, 12000000u);
    ASSERT_TRUE(m.samples_per_s);
    EXPECT_NEAR(*m.samples_per_s, 8 / 0.009, 1e-9);
  }
}

TEST(CapacityMetrics, RecomputeFractionAndSwapOverlapOfComputeBusyTime)
{
  // op0 [0, 2 ms]; a (8 MB) goes to the host at 4 GB/s [2, 4] while op1 runs [2, 3]; b is dropped and recomputed
  // [3, 4] (a is still on the GPU). Compute busy 4 ms, 1 ms of it recompute; the copy overlaps [2, 4] of it. op0's
  // [0, 2] overlaps nothing: 2 of 4 ms.
  const std::string steps = R"(
    {"id": 0, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "deps": []},
    {"id": 1, "kind": "offload", "tensor": 1, "device": 0, "stream": "d2h", "deps": [0]},
    {"id": 2, "kind": "compute", "op": 1, "device": 0, "stream": "compute", "deps": [0]},
    {"id": 3, "kind": "free", "tensor": 2, "device": 0, "stream": "compute", "deps": [2]},
    {"id": 4, "kind": "recompute", "op": 1, "device": 0, "stream": "compute", "deps": [3]})";
  for (const Metrics& m : run_both(kChain, switched(1), plan_doc("", steps))) {
    EXPECT_NEAR(m.iteration_time_s, 0.004, kTolerance);
    EXPECT_NEAR(m.compute_busy_s, 0.004, kTolerance);
    EXPECT_NEAR(m.recompute_fraction, 0.25, kTolerance);
    EXPECT_NEAR(m.swap_overlap_fraction, 0.5, kTolerance);
  }
  // The first plan's copies never overlap compute (each waits for or is waited on by it): fraction 0; its recompute
  // is 1 of 4 ms.
  const std::string serial = R"(
    {"id": 0, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "deps": []},
    {"id": 1, "kind": "offload", "tensor": 1, "device": 0, "stream": "d2h", "deps": [0]},
    {"id": 2, "kind": "compute", "op": 1, "device": 0, "stream": "compute", "deps": [1]},
    {"id": 3, "kind": "free", "tensor": 2, "device": 0, "stream": "compute", "deps": [2]},
    {"id": 4, "kind": "recompute", "op": 1, "device": 0, "stream": "compute", "deps": [3]})";
  for (const Metrics& m : run_both(kChain, switched(1), plan_doc("", serial))) {
    EXPECT_NEAR(m.iteration_time_s, 0.006, kTolerance);
    EXPECT_NEAR(m.recompute_fraction, 0.25, kTolerance);
    EXPECT_EQ(m.swap_overlap_fraction, 0.0);
  }
}

// No batch in the source: the input's shape [8, 250000] with batch_axis 0 gives it. A 2 MB weight.
const std::string kShaped = R"({"format": "memsim-trace", "version": 1, "name": "t",
  "source": {"device": "test-gpu", "dtype": "fp32"},
  "tensors": [{"id": 0, "name": "x", "bytes": 8000000, "kind": "input", "shape": [8, 250000], "batch_axis": 0},
              {"id": 1, "name": "w", "bytes": 2000000, "kind": "weight"},
              {"id": 2, "name": "a", "bytes": 4000000, "kind": "activation"}],
  "ops": [{"id": 0, "name": "op0", "phase": "forward", "inputs": [0, 1], "outputs": [2], "time_s": 0.001}]})";

TEST(CapacityMetrics, TwoGpusAverageTheirLinksAndAWeightFetchedAgainAfterADropCountsAsSwapped)
{
  // Weights start on the host. Each GPU (instance 0 on gpu0, 1 on gpu1) prefetches w; the two 2 MB copies share the
  // uplink's 4 GB/s: [0, 1 ms]. op0 [1, 2] on both. gpu0 offloads a alone [2, 3]; gpu1 drops w and fetches it
  // again [2, 2.5] (swapped 2 MB, though nothing went to the host; its first fetch is no swap). Iteration 3 ms; h2d
  // busy 1 + 1.5 ms, d2h 1 + 0 ms, over 2 GPUs x 3 ms.
  const std::string steps = R"(
    {"id": 0, "kind": "prefetch", "tensor": 1, "device": 0, "stream": "h2d", "deps": []},
    {"id": 1, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "deps": [0]},
    {"id": 2, "kind": "offload", "tensor": 2, "device": 0, "stream": "d2h", "deps": [1]},
    {"id": 3, "kind": "prefetch", "tensor": 1, "device": 1, "stream": "h2d", "deps": [], "instance": 1},
    {"id": 4, "kind": "compute", "op": 0, "device": 1, "stream": "compute", "deps": [3], "instance": 1},
    {"id": 5, "kind": "free", "tensor": 1, "device": 1, "stream": "compute", "deps": [4], "instance": 1},
    {"id": 6, "kind": "prefetch", "tensor": 1, "device": 1, "stream": "h2d", "deps": [5], "instance": 1})";
  const std::string placement = R"("initial_placement": [{"kind": "weight", "where": "host"}],)";
  for (const Metrics& m : run_both(kShaped, switched(2), plan_doc(placement, steps))) {
    EXPECT_NEAR(m.iteration_time_s, 0.003, kTolerance);
    EXPECT_NEAR(m.pcie_h2d_utilization, 2.5 / 6.0, kTolerance);
    EXPECT_NEAR(m.pcie_d2h_utilization, 1.0 / 6.0, kTolerance);
    EXPECT_EQ(m.swapped_bytes, 2000000u);
    EXPECT_EQ(m.recomputed_bytes, 0u);
    ASSERT_TRUE(m.samples_per_s);
    EXPECT_NEAR(*m.samples_per_s, 8.0 * 2 / 0.003, 1e-9); // two instances, 8 samples each
  }
}

TEST(CapacityMetrics, NoBatchNoSamplesPerSecond)
{
  std::string trace = kChain;
  trace.replace(trace.find(", \"batch\": 8"), 12, "");
  const std::string steps = R"({"id": 0, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "deps": []})";
  for (const Metrics& m : run_both(trace, switched(1), plan_doc("", steps))) {
    EXPECT_FALSE(m.samples_per_s);
    EXPECT_EQ(m.pcie_h2d_utilization, 0.0);
    EXPECT_EQ(m.swapped_bytes, 0u);
  }
}

} // namespace
} // namespace memsim
