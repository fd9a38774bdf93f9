// The v2 plan additions through memsim-cuda's CPU-side program builder (no GPU): split/merge as views into the
// parent's block, gradients shared across instances, host placement and prefetch, host compute, iterations, and
// the refusal of collectives that need more than one GPU. The numbers are those tests/sim/v2_cases_test.cpp
// checks on both simulator engines.
#include "memsim/runtime/execution_program.hpp"

#include "memsim/common/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

using namespace memsim;
using namespace memsim::runtime;
using ::testing::HasSubstr;

namespace {

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

struct Built {
  Plan plan;
  Program program;
};

Built build(const std::string& trace_text, const std::string& plan_text, std::uint64_t budget, std::uint64_t arena = 0,
            const Machine& machine = Machine{})
{
  Built built{plan_from_text(plan_text, "test.plan.json"), {}};
  check_runtime_supports(built.plan, "test.plan.json");
  const Trace trace = trace_with_extras(trace_from_text(trace_text, "test.trace.json"), built.plan);
  built.program = build_program(built.plan, trace, PoolConfig{budget, arena == 0 ? 4 * budget : arena, 256}, machine);
  return built;
}

// An op reads X = 8 MB and writes Y = 4 MB, split into 4 micro-ops that each free their input part: peak 9 MB.
const std::string kSplitTrace = trace_doc(
    R"({"id": 0, "name": "x", "bytes": 8000000, "kind": "input"},
       {"id": 1, "name": "y", "bytes": 4000000, "kind": "activation"})",
    R"({"id": 0, "name": "op", "phase": "forward", "inputs": [0], "outputs": [1], "time_s": 0.004})");

std::string split_plan(const std::string& extra = "")
{
  std::string tensors;
  std::string ops;
  for (int i = 0; i < 4; ++i) {
    tensors += fmt::format(R"({}{{"id": {}, "name": "x#{}", "bytes": 2000000, "kind": "activation"}},)"
                           R"({{"id": {}, "name": "y#{}", "bytes": 1000000, "kind": "activation"}})",
                           i ? "," : "", 2 + 2 * i, i, 3 + 2 * i, i);
    ops += fmt::format(R"({}{{"id": {}, "name": "op#{}", "phase": "forward", "inputs": [{}], "outputs": [{}],
                          "time_s": 0.001}})",
                       i ? "," : "", 1 + i, i, 2 + 2 * i, 3 + 2 * i);
  }
  std::string steps = R"({"id": 0, "kind": "split", "tensor": 0, "parts": [2, 4, 6, 8], "deps": []})";
  StepId id = 1;
  for (int i = 0; i < 4; ++i) {
    steps += fmt::format(R"(, {{"id": {}, "kind": "compute", "op": {}, "deps": []}})", id, 1 + i);
    steps += fmt::format(R"(, {{"id": {}, "kind": "free", "tensor": {}, "deps": [{}]}})", id + 1, 2 + 2 * i, id);
    id += 2;
  }
  steps += fmt::format(R"(, {{"id": {}, "kind": "merge", "tensor": 1, "parts": [3, 5, 7, 9], "deps": []}})", id);
  return plan_doc(extra + R"("extra_tensors": [)" + tensors + R"(], "extra_ops": [)" + ops + "],", steps);
}

const Allocation& allocation_of(const Program& program, TensorId tensor)
{
  for (const Allocation& allocation : program.allocations)
    if (allocation.tensor == tensor)
      return allocation;
  throw std::logic_error("no allocation");
}

} // namespace

TEST(ExecutionProgramV2, SplitPartsAreViewsIntoTheParentBlockAndPeakAtNineMegabytes)
{
  const Built built = build(kSplitTrace, split_plan(), 16000000);
  ASSERT_FALSE(built.program.failure) << built.program.failure->what;
  EXPECT_EQ(built.program.peak_bytes, 9000000u);
  const std::uint64_t parent = allocation_of(built.program, 0).offset;
  for (TensorId part = 2, i = 0; part <= 8; part += 2, ++i)
    EXPECT_EQ(allocation_of(built.program, part).offset, parent + static_cast<std::uint64_t>(i) * 2000000u);
  // Views move no bytes: the split and the merge allocate and copy nothing.
  for (StepId view : {StepId{0}, StepId{9}}) {
    EXPECT_TRUE(built.program.steps[static_cast<std::size_t>(view)].allocations.empty());
    EXPECT_EQ(built.program.steps[static_cast<std::size_t>(view)].work, WorkKind::none);
  }
  // The merged parent lives where its first part did.
  EXPECT_EQ(allocation_of(built.program, 1).offset, allocation_of(built.program, 3).offset);
}

TEST(ExecutionProgramV2, APartiallyFreedParentBlockStaysInTheArena)
{
  // 9.5 MB holds the 9 MB of bytes, but an arena of exactly the budget has no block for the second micro-op's
  // output while parts of x still hold x's 8 MB block (the core's pool rule).
  const Built built = build(kSplitTrace, split_plan(R"("budget_bytes": 9500000, )"), 9500000, 9500000);
  ASSERT_TRUE(built.program.failure);
  EXPECT_EQ(built.program.failure->kind, FailureKind::fragmentation);
  EXPECT_EQ(built.program.failure->step, 3);
}

TEST(ExecutionProgramV2, FourMicrobatchesAccumulateIntoOneSharedGradient)
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
  const Built shared =
      build(trace, plan_doc(R"("shared_across_instances": ["weight", "weight_grad"],)", steps), 1u << 30);
  ASSERT_FALSE(shared.program.failure) << shared.program.failure->what;
  int gradients = 0;
  for (const Allocation& allocation : shared.program.allocations)
    gradients += allocation.tensor == TensorId{2} ? 1 : 0;
  EXPECT_EQ(gradients, 1);
  EXPECT_EQ(shared.program.steps[0].allocations.size(), 1u);
  for (std::size_t i = 1; i < 4; ++i)
    EXPECT_TRUE(shared.program.steps[i].allocations.empty());
  EXPECT_EQ(shared.program.peak_bytes, 4 * 1000000u + 2000000u + 2000000u);
  const Built unshared = build(trace, plan_doc("", steps), 1u << 30);
  EXPECT_EQ(unshared.program.peak_bytes, 4 * 1000000u + 4 * 2000000u + 4 * 2000000u);
}

const std::string kPrefetchTrace = trace_doc(
    R"({"id": 0, "name": "x", "bytes": 1000000, "kind": "input"},
       {"id": 1, "name": "w", "bytes": 4000000, "kind": "weight"},
       {"id": 2, "name": "a", "bytes": 1000000, "kind": "activation"})",
    R"({"id": 0, "name": "f", "phase": "forward", "inputs": [0, 1], "outputs": [2], "time_s": 0.001})");
const std::string kWeightOnHost = R"("initial_placement": [{"kind": "weight", "where": "host"}],)";

TEST(ExecutionProgramV2, AWeightPlacedOnTheHostIsPrefetchedFromItsPinnedBuffer)
{
  const Built built =
      build(kPrefetchTrace, plan_doc(kWeightOnHost, R"({"id": 0, "kind": "prefetch", "tensor": 1, "deps": []},
                                                      {"id": 1, "kind": "compute", "op": 0, "deps": [0]})"),
            1u << 30);
  ASSERT_FALSE(built.program.failure) << built.program.failure->what;
  ASSERT_EQ(built.program.initial_host_buffers.size(), 1u);
  const HostBuffer& buffer = built.program.host_buffers[built.program.initial_host_buffers[0]];
  EXPECT_EQ(buffer.tensor, TensorId{1});
  EXPECT_EQ(buffer.bytes, 4000000u);
  const ProgramStep& prefetch = built.program.steps[0];
  EXPECT_EQ(prefetch.work, WorkKind::copy_h2d);
  EXPECT_EQ(prefetch.host_buffer, built.program.initial_host_buffers[0]);
  EXPECT_EQ(prefetch.copy_bytes, 4000000u);
  EXPECT_EQ(built.program.initial_allocations.size(), 1u); // only x starts on the GPU
  EXPECT_EQ(built.program.peak_bytes, 6000000u);

  const Built missing =
      build(kPrefetchTrace, plan_doc(kWeightOnHost, R"({"id": 0, "kind": "compute", "op": 0, "deps": []})"), 1u << 30);
  ASSERT_TRUE(missing.program.failure);
  EXPECT_EQ(missing.program.failure->kind, FailureKind::not_resident);
  EXPECT_EQ(missing.program.failure->tensor, TensorId{1});
}

TEST(ExecutionProgramV2, PlacementNoneLeavesATensorToThePlan)
{
  const Built built = build(kPrefetchTrace,
                            plan_doc(R"("initial_placement": [{"tensor": 1, "where": "none"}],)",
                                     R"({"id": 0, "kind": "compute", "op": 0, "deps": []})"),
                            1u << 30);
  ASSERT_TRUE(built.program.failure);
  EXPECT_EQ(built.program.failure->kind, FailureKind::not_resident);
  EXPECT_TRUE(built.program.host_buffers.empty());
}

TEST(ExecutionProgramV2, HostComputeBusiesTheHostForTheSimulatorsHostTime)
{
  const std::string trace = trace_doc(
      R"({"id": 0, "name": "w", "bytes": 1000000, "kind": "weight"},
         {"id": 1, "name": "s", "bytes": 2000000, "kind": "optimizer_state"},
         {"id": 2, "name": "u", "bytes": 1000, "kind": "other"},
         {"id": 3, "name": "v", "bytes": 1000, "kind": "other"})",
      R"({"id": 0, "name": "adam", "phase": "update", "inputs": [0, 1], "outputs": [2], "time_s": 0.0001,
          "cpu_time_s": 0.003},
         {"id": 1, "name": "adam2", "phase": "update", "inputs": [0, 1], "outputs": [3], "time_s": 0.0001,
          "flops": 2e9, "bytes_accessed": 1e6})");
  const std::string plan = plan_doc(R"("initial_placement": [{"kind": "weight", "where": "host"},
                                                             {"kind": "optimizer_state", "where": "host"}],)",
                                    R"({"id": 0, "kind": "compute", "op": 0, "device": -1, "stream": "cpu0",
                                        "deps": []},
                                       {"id": 1, "kind": "compute", "op": 1, "device": -1, "stream": "cpu0",
                                        "deps": [], "iteration": 1})");
  Machine machine;
  machine.host.flops = 1e12;
  machine.host.memory_bandwidth = 1e9;
  const Built built = build(trace, plan, 1u << 30, 0, machine);
  ASSERT_FALSE(built.program.failure) << built.program.failure->what;
  ASSERT_EQ(built.program.steps.size(), 2u);
  EXPECT_EQ(built.program.steps[0].work, WorkKind::host_busy);
  EXPECT_DOUBLE_EQ(built.program.steps[0].kernel_time_s, 0.003); // cpu_time_s
  EXPECT_DOUBLE_EQ(built.program.steps[1].kernel_time_s, 0.002); // max(2e9 / 1e12, 1e6 / 1e9)
  EXPECT_EQ(built.program.steps[1].iteration, 1);
  EXPECT_EQ(built.program.streams[0].device, kHostDevice);
  EXPECT_EQ(built.program.peak_bytes, 0u); // nothing on the GPU
  // The outputs live in pinned host buffers a later prefetch could copy from.
  EXPECT_EQ(built.program.host_buffers.size(), 4u);
}

TEST(ExecutionProgramV2, ACollectiveOverTwoGpusIsRefusedNamingTheGroup)
{
  const std::string plan = plan_doc("", R"({"id": 0, "kind": "allreduce", "tensor": 0, "group": [0, 1],
                                            "deps": []})");
  try {
    check_runtime_supports(plan_from_text(plan, "p.json"), "p.json");
    FAIL() << "a two-GPU allreduce accepted";
  } catch (const InputError& error) {
    EXPECT_THAT(error.message(), HasSubstr("step 0: allreduce over group [0, 1] needs 2 GPUs"));
  }
}

TEST(ExecutionProgramV2, ACollectiveOverTheOneGpuMovesNothing)
{
  const Built built = build(kPrefetchTrace, plan_doc("", R"({"id": 0, "kind": "allreduce", "tensor": 1,
                                                            "group": [0], "deps": []})"),
                            1u << 30);
  ASSERT_FALSE(built.program.failure) << built.program.failure->what;
  EXPECT_EQ(built.program.steps[0].work, WorkKind::none);
}
