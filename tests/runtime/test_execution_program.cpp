// Plan -> program: streams, minimal event waits, list-order allocations with the byte cap enforced
// physically (memory waits), OOM / fragmentation / residency failures.
#include "memsim/runtime/execution_program.hpp"

#include "memsim/common/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>

using namespace memsim;
using namespace memsim::runtime;
using ::testing::HasSubstr;

namespace {

const std::filesystem::path kData = MEMSIM_TEST_DATA_DIR;

PoolConfig pool_of(std::uint64_t budget, std::uint64_t arena = 0)
{
  return PoolConfig{budget, arena == 0 ? budget * 2 : arena, 256};
}

struct Loaded {
  Trace trace;
  Plan plan;
};

Loaded load(const char* plan_file)
{
  Loaded loaded{load_trace(kData / "chain.trace.json"), load_plan(kData / plan_file)};
  loaded.trace = trace_with_extras(loaded.trace, loaded.plan);
  return loaded;
}

// Two 4 MB activations made by two ops; `a` is offloaded and freed on the d2h stream.
Trace two_activation_trace(std::uint64_t workspace = 0)
{
  Trace trace;
  trace.name = "two";
  trace.tensors = {{0, "a", 4000000, TensorKind::activation, std::nullopt, {}, {}},
                   {1, "b", 4000000, TensorKind::activation, std::nullopt, {}, {}}};
  Op make_a;
  make_a.id = 0;
  make_a.name = "make_a";
  make_a.outputs = {0};
  make_a.time_s = 1e-3;
  Op make_b = make_a;
  make_b.id = 1;
  make_b.name = "make_b";
  make_b.outputs = {1};
  make_b.workspace_bytes = workspace;
  trace.ops = {make_a, make_b};
  return trace;
}

} // namespace

TEST(ExecutionProgram, OneStreamPerDeviceStreamInOrderOfFirstUse)
{
  Loaded chain = load("chain.plan.json");
  Program program = build_program(chain.plan, chain.trace, pool_of(chain.plan.budget_bytes));
  ASSERT_EQ(program.streams.size(), 3u);
  EXPECT_EQ(program.streams[0].name, "compute");
  EXPECT_EQ(program.streams[1].name, "d2h");
  EXPECT_EQ(program.streams[2].name, "h2d");
  ASSERT_EQ(program.steps.size(), 10u);
  EXPECT_FALSE(program.failure);
  std::vector<std::size_t> streams;
  for (const ProgramStep& step : program.steps)
    streams.push_back(step.stream);
  EXPECT_EQ(streams, (std::vector<std::size_t>{0, 1, 0, 1, 2, 0, 0, 0, 0, 0}));
}

TEST(ExecutionProgram, WaitsOnlyForDepsThatStreamOrderDoesNotImply)
{
  Loaded chain = load("chain.plan.json");
  Program program = build_program(chain.plan, chain.trace, pool_of(chain.plan.budget_bytes));
  // step 1 (d2h) waits for compute step 0; step 2's dep on 0 is its stream predecessor; step 3's dep on 1
  // is its stream predecessor, on 2 an event; step 4 waits for 3 (which implies 0..2); step 5 for 4.
  std::vector<std::vector<StepId>> waits;
  for (const ProgramStep& step : program.steps)
    waits.push_back(step.waits);
  EXPECT_EQ(waits, (std::vector<std::vector<StepId>>{{}, {0}, {}, {2}, {3}, {4}, {}, {}, {}, {}}));
  EXPECT_EQ(program.dependency_waits, 4u);
  EXPECT_EQ(program.memory_waits, 0u);
}

TEST(ExecutionProgram, ADepImpliedByAnotherDepNeedsNoWait)
{
  Plan plan;
  plan.budget_bytes = 100000000;
  PlanBuilder build(plan);
  Trace trace = two_activation_trace();
  build.compute(0);             // 0 compute
  build.offload(0, {0});        // 1 d2h, waits for 0
  build.compute(1, {0, 1});     // 2 compute: 0 is the stream predecessor, 1 an event
  build.free(0, {1, 2}, "d2h"); // 3 d2h: 1 is the stream predecessor, 2 an event
  Program program = build_program(plan, trace, pool_of(plan.budget_bytes));
  ASSERT_FALSE(program.failure);
  EXPECT_EQ(program.steps[2].waits, std::vector<StepId>{1});
  EXPECT_EQ(program.steps[3].waits, std::vector<StepId>{2});

  // A dep on 0 from a third stream is implied by the dep on 1 (which waited for 0).
  Plan third;
  third.budget_bytes = 100000000;
  PlanBuilder build_third(third);
  build_third.compute(0);
  build_third.offload(0, {0});
  build_third.compute(1, {0, 1}, 0, 0, "side");
  Program side = build_program(third, trace, pool_of(third.budget_bytes));
  EXPECT_EQ(side.steps[2].waits, std::vector<StepId>{1});
}

TEST(ExecutionProgram, AllocationsFollowListOrderAndReuseFreedBlocks)
{
  Loaded chain = load("chain.plan.json");
  Program program = build_program(chain.plan, chain.trace, pool_of(chain.plan.budget_bytes));
  // Initially resident: x, w1, w2 (input + weights), 1002000 bytes.
  ASSERT_EQ(program.initial_allocations.size(), 3u);
  EXPECT_EQ(program.peak_bytes, 7003000u); // at l2.bwd: x w1 w2 a1 a2 g_a1 wg2
  const Allocation& first_a1 = program.allocations[program.steps[0].allocations.at(0)];
  const Allocation& prefetched_a1 = program.allocations[program.steps[4].allocations.at(0)];
  EXPECT_EQ(first_a1.tensor, TensorId{3});
  EXPECT_EQ(first_a1.released_by, StepId{3});
  // The prefetch is ordered after the free (through its dep), so it takes a1's old block, exactly.
  EXPECT_EQ(prefetched_a1.offset, first_a1.offset);
  EXPECT_EQ(program.steps[4].device_offset, first_a1.offset);
  EXPECT_EQ(program.steps[1].host_buffer, program.steps[4].host_buffer);
  ASSERT_EQ(program.host_buffers.size(), 1u);
  EXPECT_EQ(program.host_buffers[0].bytes, 2000000u);
  // l2.fwd's workspace is allocated and released by the step itself.
  EXPECT_EQ(program.steps[2].allocations.size(), 2u);
  EXPECT_EQ(program.steps[2].releases, std::vector<std::size_t>{program.steps[2].allocations[1]});
  EXPECT_EQ(program.steps[2].record_bytes, 2000000u);
  EXPECT_EQ(program.steps[1].work, WorkKind::copy_d2h);
  EXPECT_EQ(program.steps[4].work, WorkKind::copy_h2d);
  EXPECT_EQ(program.steps[3].work, WorkKind::none);
  EXPECT_DOUBLE_EQ(program.steps[5].kernel_time_s, 0.002);
}

TEST(ExecutionProgram, AnAllocationThatNeedsFreedBytesWaitsForTheFree)
{
  // b is made on the compute stream right after a's free on d2h, with no dep on it. 4 MB + 4 MB do
  // not fit in 5 MB, so b must wait for the free's event; with 9 MB it fits in fresh space.
  Trace trace = two_activation_trace();
  Plan plan;
  PlanBuilder build(plan);
  build.compute(0);          // 0
  build.offload(0, {0});     // 1 d2h
  build.free(0, {1}, "d2h"); // 2 d2h
  build.compute(1);          // 3 compute, no dep on 2
  plan.budget_bytes = 5000000;
  Program tight = build_program(plan, trace, pool_of(5000000, 5000000 / 256 * 256 + 256));
  ASSERT_FALSE(tight.failure) << tight.failure->what;
  EXPECT_EQ(tight.steps[3].waits, std::vector<StepId>{2});
  EXPECT_EQ(tight.steps[3].memory_waits, 1u);
  EXPECT_EQ(tight.memory_waits, 1u);

  plan.budget_bytes = 9000000;
  Program roomy = build_program(plan, trace, pool_of(9000000, 9000000));
  ASSERT_FALSE(roomy.failure);
  EXPECT_TRUE(roomy.steps[3].waits.empty());
  EXPECT_EQ(roomy.memory_waits, 0u);
}

TEST(ExecutionProgram, TheCapCountsReleasedButUnorderedBlocksEvenWithArenaSlack)
{
  // With a big arena the block would fit in fresh space, but then a and b could both be on the GPU:
  // 8 MB over a 5 MB budget. The cap forces the wait anyway.
  Trace trace = two_activation_trace();
  Plan plan;
  PlanBuilder build(plan);
  build.compute(0);
  build.offload(0, {0});
  build.free(0, {1}, "d2h");
  build.compute(1);
  plan.budget_bytes = 5000000;
  Program program = build_program(plan, trace, pool_of(5000000, 50000000));
  ASSERT_FALSE(program.failure);
  EXPECT_EQ(program.steps[3].waits, std::vector<StepId>{2});
  EXPECT_EQ(program.steps[3].memory_waits, 1u);
}

TEST(ExecutionProgram, OutOfMemoryNamesStepTensorAndBytes)
{
  Loaded oom = load("oom.plan.json");
  Program program = build_program(oom.plan, oom.trace, pool_of(oom.plan.budget_bytes));
  ASSERT_TRUE(program.failure);
  const ProgramFailure& failure = *program.failure;
  EXPECT_EQ(failure.kind, FailureKind::out_of_memory);
  EXPECT_EQ(failure.step, 5);
  EXPECT_EQ(failure.tensor, TensorId{5});
  EXPECT_EQ(failure.bytes_in_use, 5002000u);
  EXPECT_EQ(failure.bytes_requested, 2000000u);
  EXPECT_EQ(failure.after_steps, (std::vector<StepId>{2, 4})); // stream predecessor and dep
  // The core's message (sim/src/ledger.cpp: failure_message), without a time before the run.
  EXPECT_EQ(failure.what, "out of memory: step 5 (compute on gpu0/compute) allocates tensor 5 'g_a1' (2000000 bytes) "
                          "on gpu0 before it runs with 5002000 bytes in use; budget is 7000000 bytes");
  EXPECT_THAT(failure.message(0.0025), HasSubstr("on gpu0 at t=0.002500000s with 5002000 bytes in use"));
  EXPECT_EQ(program.steps.size(), 5u); // steps 0..4 still run
}

TEST(ExecutionProgram, InitialResidentsOverTheBudgetFailBeforeAnyStep)
{
  Loaded chain = load("chain.plan.json");
  Program program = build_program(chain.plan, chain.trace, pool_of(1001000));
  ASSERT_TRUE(program.failure);
  EXPECT_EQ(program.failure->step, -1);
  EXPECT_EQ(program.failure->kind, FailureKind::out_of_memory);
  EXPECT_FALSE(program.failure->tensor);
  // x, w1 and w2 (the core's initial-residency rule), checked together as in the simulators.
  EXPECT_THAT(program.failure->what, HasSubstr("the tensors resident from the start need 1002000 bytes, budget is "
                                               "1001000 bytes"));
  EXPECT_TRUE(program.steps.empty());
}

TEST(ExecutionProgram, FragmentationIsReportedApartFromOutOfMemory)
{
  // t0 t1 t2 take 256 bytes each of a 1024-byte arena; freeing t1 leaves two 256-byte holes, so t3
  // (600 bytes) is within the 1200-byte cap but has no room.
  Trace trace;
  trace.name = "frag";
  for (TensorId id = 0; id < 4; ++id)
    trace.tensors.push_back(
        {id, fmt::format("t{}", id), id == 3 ? 600u : 256u, TensorKind::activation, std::nullopt, {}, {}});
  for (OpId id = 0; id < 4; ++id) {
    Op op;
    op.id = id;
    op.name = fmt::format("make_t{}", id);
    op.outputs = {id};
    op.time_s = 1e-3;
    trace.ops.push_back(op);
  }
  Plan plan;
  PlanBuilder build(plan);
  build.compute(0);
  build.compute(1);
  build.compute(2);
  build.free(1);
  build.compute(3);
  plan.budget_bytes = 1200;
  Program program = build_program(plan, trace, PoolConfig{1200, 1024, 256});
  ASSERT_TRUE(program.failure);
  EXPECT_EQ(program.failure->kind, FailureKind::fragmentation);
  EXPECT_EQ(program.failure->step, 4);
  EXPECT_EQ(program.failure->largest_free_block, 256u);
  EXPECT_THAT(program.failure->what, HasSubstr("512 bytes in use of the budget of 1200 bytes, but the largest free "
                                               "block is 256 bytes"));
}

TEST(ExecutionProgram, ResidencyErrorsMatchTheSimulatorRules)
{
  Trace trace = two_activation_trace();
  trace.ops[1].inputs = {0}; // make_b reads a
  {
    Plan plan;
    PlanBuilder build(plan);
    build.compute(0);
    build.free(0);
    build.compute(1); // reads freed a
    plan.budget_bytes = 100000000;
    Program program = build_program(plan, trace, pool_of(plan.budget_bytes));
    ASSERT_TRUE(program.failure);
    EXPECT_EQ(program.failure->kind, FailureKind::not_resident);
    EXPECT_EQ(program.failure->step, 2);
    EXPECT_THAT(program.failure->what, HasSubstr("reads tensor 0 'a' (4000000 bytes) but it is not resident on gpu0"));
  }
  {
    Plan plan;
    PlanBuilder build(plan);
    build.free(0);
    plan.budget_bytes = 100000000;
    Program program = build_program(plan, trace, pool_of(plan.budget_bytes));
    ASSERT_TRUE(program.failure);
    EXPECT_EQ(program.failure->kind, FailureKind::not_resident);
    EXPECT_THAT(program.failure->what, HasSubstr("frees tensor 0 'a'"));
  }
  {
    Plan plan;
    PlanBuilder build(plan);
    build.compute(0);
    build.free(0);
    build.prefetch(0); // never offloaded
    plan.budget_bytes = 100000000;
    Program program = build_program(plan, trace, pool_of(plan.budget_bytes));
    ASSERT_TRUE(program.failure);
    EXPECT_EQ(program.failure->kind, FailureKind::no_host_copy);
  }
  {
    Plan plan;
    PlanBuilder build(plan);
    build.compute(0);
    build.offload(0, {0});
    build.prefetch(0, {1}); // a is still resident
    plan.budget_bytes = 100000000;
    Program program = build_program(plan, trace, pool_of(plan.budget_bytes));
    ASSERT_TRUE(program.failure);
    EXPECT_EQ(program.failure->kind, FailureKind::double_allocation);
    EXPECT_EQ(program.failure->step, 2);
  }
}

TEST(ExecutionProgram, RejectsSendRecvAndSeveralDevices)
{
  Plan plan = load_plan(kData / "send.plan.json");
  try {
    check_runtime_supports(plan, "send.plan.json");
    FAIL() << "send accepted";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "send.plan.json: at /steps/1/kind");
    EXPECT_THAT(error.message(), HasSubstr("single-GPU plans; step 1 is a send"));
  }
  Plan two_devices;
  PlanBuilder build(two_devices);
  build.compute(0, {}, 0);
  build.compute(1, {}, 1);
  EXPECT_THROW(check_runtime_supports(two_devices, "p.json"), InputError);
  Plan with_policy;
  PlanBuilder(with_policy).compute(0);
  with_policy.policy = PolicyChoice{"lru-swap", nlohmann::json::object()};
  try {
    check_runtime_supports(with_policy, "p.json");
    FAIL() << "a plan with an online policy accepted";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "p.json: at /policy");
    EXPECT_THAT(error.message(), HasSubstr("--realized-plan"));
  }
  Plan with_service;
  PlanBuilder(with_service).compute(0);
  Step fetch;
  fetch.id = 1;
  fetch.kind = StepKind::prefetch;
  fetch.tensor = 0;
  fetch.stream = "h2d";
  fetch.service_s = 30e-6;
  with_service.steps.push_back(fetch);
  try {
    check_runtime_supports(with_service, "uvm.plan.json");
    FAIL() << "a copy with a service time accepted";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "uvm.plan.json: at /steps/1/service_s");
    EXPECT_THAT(error.message(), HasSubstr("simulate this plan instead"));
  }
}

TEST(ExecutionProgram, RefusesCollectivesOverSeveralGpusAndSendRecv)
{
  Plan ring;
  Step step;
  step.kind = StepKind::allgather;
  step.tensor = 0;
  step.group = {0, 1, 2};
  PlanBuilder(ring).add(step);
  try {
    check_runtime_supports(ring, "p.json");
    FAIL() << "a three-GPU allgather accepted";
  } catch (const InputError& error) {
    EXPECT_THAT(error.message(), HasSubstr("step 0: allgather over group [0, 1, 2] needs 3 GPUs; memsim-cuda runs a "
                                           "plan on one GPU (ring collectives over several GPUs are not supported)"));
  }
  // v2 host steps run beside the plan's GPU.
  Plan host;
  PlanBuilder(host).compute(0, {}, kHostDevice);
  PlanBuilder(host).compute(0, {}, 0);
  EXPECT_NO_THROW(check_runtime_supports(host, "p.json"));
  EXPECT_EQ(program_device(host), 0);
}

TEST(ExecutionProgram, PipelineFixtureFitsItsBudgetAndReusesBlocks)
{
  Trace trace = load_trace(kData / "pipeline.trace.json");
  Plan plan = load_plan(kData / "pipeline.plan.json");
  Program program = build_program(plan, trace, pool_of(plan.budget_bytes, plan.budget_bytes + (1 << 20)));
  ASSERT_FALSE(program.failure) << program.failure->what;
  EXPECT_EQ(program.steps.size(), plan.steps.size());
  EXPECT_LE(program.peak_bytes, plan.budget_bytes);
  EXPECT_EQ(program.host_buffers.size(), 6u); // a0..a5 offloaded
}

// The fixtures tests/sim/core_cases_test.cpp runs on both simulator engines: memsim-cuda's builder must agree.
TEST(ExecutionProgram, AWeightNoOpReadsStillTakesMemoryFromTheStart)
{
  const Trace trace = load_trace(kData / "unused-weight.trace.json");
  const Plan plan = load_plan(kData / "unused-weight.plan.json");
  Program program = build_program(plan, trace, pool_of(plan.budget_bytes));
  ASSERT_TRUE(program.failure);
  EXPECT_EQ(program.failure->kind, FailureKind::out_of_memory);
  EXPECT_EQ(program.failure->step, -1);
  EXPECT_EQ(program.failure->bytes_in_use, 51000000u);
  EXPECT_THAT(program.failure->what, HasSubstr("the tensors resident from the start need 51000000 bytes, budget is "
                                               "10000000 bytes"));
  EXPECT_TRUE(program.steps.empty());
}

TEST(ExecutionProgram, FreedOuterBlocksFitByBytesButFragmentAnArenaOfTheBudget)
{
  const Trace trace = load_trace(kData / "fragment.trace.json");
  const Plan plan = load_plan(kData / "fragment.plan.json");
  // An arena with room to spare: only the byte cap counts (the simulators' --allocator bytes).
  Program roomy = build_program(plan, trace, pool_of(plan.budget_bytes, 2 * plan.budget_bytes));
  ASSERT_FALSE(roomy.failure) << roomy.failure->what;
  EXPECT_EQ(roomy.peak_bytes, 3145728u);
  // An arena of exactly the budget (the simulators' --allocator pool, memsim-cuda --allocator pool).
  Program exact = build_program(plan, trace, pool_of(plan.budget_bytes, plan.budget_bytes));
  ASSERT_TRUE(exact.failure);
  const ProgramFailure& failure = *exact.failure;
  EXPECT_EQ(failure.kind, FailureKind::fragmentation);
  EXPECT_EQ(failure.step, 5);
  EXPECT_EQ(failure.tensor, TensorId{3});
  EXPECT_EQ(failure.bytes_in_use, 1048576u);
  EXPECT_EQ(failure.bytes_requested, 2097152u);
  EXPECT_EQ(failure.largest_free_block, 1048576u);
  EXPECT_EQ(failure.message(0.003),
            "out of memory (fragmentation): step 5 (compute on gpu0/compute) allocates tensor 3 'd' (2097152 bytes) "
            "on gpu0 at t=0.003000000s with 1048576 bytes in use of the budget of 3145728 bytes, but the largest "
            "free block is 1048576 bytes");
}
