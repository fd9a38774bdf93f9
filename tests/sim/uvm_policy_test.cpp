// The `uvm` policy on hand-made traces whose answers are worked out by hand, on a 1 GB/s host link (1 MiB moves in
// 1.048576 ms): fault batches and migration time, the density prefetcher taking neighbours in a shared VA block, LRU
// eviction of VA blocks (allocation order, not access order), the oversubscription cap, and the online planner.
// Every case runs on the fast engine in-process and on SimGrid in a forked child, and the realized plan replays the
// same run.
#include "engine_comparison.hpp"
#include "test_machines.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace memsim {
namespace {

using test::hand_trace;
using test::one_gpu_machine;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr double kMs = 0.001;
constexpr double kMiBMs = 1.048576; // ms for 1 MiB at 1 GB/s
constexpr double kBatchMs = 0.030;  // the default fault_batch_s

// Every op in order under `uvm` with `params`; the tensors in `on_host` start on the host only.
Plan in_order(const Trace& trace, std::uint64_t budget, const std::vector<TensorId>& on_host = {},
              const nlohmann::json& params = nlohmann::json::object())
{
  Plan plan;
  plan.trace = trace.name;
  plan.machine = "one-gpu";
  plan.planner = "hand";
  plan.budget_bytes = budget;
  plan.policy = PolicyChoice{"uvm", params};
  for (TensorId tensor : on_host)
    plan.initial_placement.push_back(PlacementRule{std::nullopt, tensor, Placement::host, std::nullopt});
  PlanBuilder build(plan);
  for (const Op& op : trace.ops)
    build.compute(op.id);
  return plan;
}

std::vector<std::string> labels_of(const RunResult& result, StepKind kind, const std::string& stream)
{
  std::vector<const StepRecord*> records;
  for (const StepRecord& record : result.timeline)
    if (record.kind == kind && record.stream == stream)
      records.push_back(&record);
  std::stable_sort(records.begin(), records.end(),
                   [](const StepRecord* a, const StepRecord* b) { return a->start_s < b->start_s; });
  std::vector<std::string> labels;
  for (const StepRecord* record : records)
    labels.push_back(record->label);
  return labels;
}
std::vector<std::string> fetched(const RunResult& result)
{
  return labels_of(result, StepKind::prefetch, "policy-h2d");
}
std::vector<std::string> written_back(const RunResult& result)
{
  return labels_of(result, StepKind::offload, "policy-d2h");
}
std::vector<double> service_times(const Plan& plan)
{
  std::vector<double> times;
  for (const Step& step : plan.steps)
    if (step.kind == StepKind::prefetch)
      times.push_back(step.service_s);
  return times;
}

class UvmOnEngine : public ::testing::TestWithParam<EngineKind> {
protected:
  RunResult run(const Trace& trace, const Plan& plan, const Machine& machine = one_gpu_machine()) const
  {
    SimOptions options;
    options.realized_plan = true;
    return test::run_on_engine(GetParam(), trace, machine, plan, options);
  }
  // The run, and its realized plan replayed without the policy (through its JSON), give the same time and peak.
  RunResult run_and_replay(const Trace& trace, const Plan& plan) const
  {
    RunResult live = run(trace, plan);
    EXPECT_TRUE(live.metrics.feasible) << (live.error ? live.error->message : "");
    if (live.metrics.feasible && live.realized_plan) {
      const Plan replayed = plan_from_json(plan_to_json(*live.realized_plan), "realized");
      EXPECT_EQ(service_times(replayed), service_times(*live.realized_plan));
      const RunResult replay = run(trace, replayed);
      EXPECT_TRUE(replay.metrics.feasible) << (replay.error ? replay.error->message : "");
      EXPECT_DOUBLE_EQ(replay.metrics.iteration_time_s, live.metrics.iteration_time_s);
      EXPECT_EQ(replay.metrics.peak_device_bytes, live.metrics.peak_device_bytes);
    }
    return live;
  }
};

// x (4 MiB, on the host) spans VA blocks 0 and 1: f0 (1 ms) faults 2 x 32 units, one batch per block, then the
// 4 MiB cross: 2 x 0.030 + 4 x 1.048576 + 1 = 5.254304 ms.
TEST_P(UvmOnEngine, OneFourMiBTensorIsTwoFaultBatchesAndFourMiBOfMigration)
{
  const Trace trace = hand_trace({0}, {{{0}, {1}}}, {4 * kMiB, {}});
  const RunResult result = run_and_replay(trace, in_order(trace, 0, {0}));
  EXPECT_THAT(fetched(result), ElementsAre("x"));
  EXPECT_EQ(result.metrics.h2d_bytes, 4 * kMiB);
  EXPECT_NEAR(result.metrics.iteration_time_s, (2 * kBatchMs + 4 * kMiBMs + 1) * kMs, 1e-12);
  ASSERT_TRUE(result.realized_plan);
  EXPECT_THAT(service_times(*result.realized_plan), ElementsAre(::testing::DoubleEq(2 * kBatchMs * kMs)));
  EXPECT_EQ(result.metrics.policy.fault_batches, 2u);
  EXPECT_EQ(result.metrics.policy.fault_missing_bytes, 4 * kMiB);
  EXPECT_EQ(result.metrics.policy.fault_migrated_bytes, 4 * kMiB);
}

// uvm_bw_fraction 0.5: the same fault's 4 MiB move at half the 1 GB/s link, 4 MiB / (0.5 x 1 GB/s) = 8.388608 ms;
// the first copy's service time is the two batches plus the 4.194304 ms the slower path adds:
// 2 x 0.030 + 8.388608 + 1 = 9.448608 ms. The bytes moved do not change.
TEST_P(UvmOnEngine, AtHalfTheLinkBandwidthAFaultTakesTwiceItsCopyTime)
{
  const Trace trace = hand_trace({0}, {{{0}, {1}}}, {4 * kMiB, {}});
  const RunResult result = run_and_replay(trace, in_order(trace, 0, {0}, {{"uvm_bw_fraction", 0.5}}));
  EXPECT_THAT(fetched(result), ElementsAre("x"));
  EXPECT_EQ(result.metrics.h2d_bytes, 4 * kMiB);
  EXPECT_NEAR(result.metrics.iteration_time_s, (2 * kBatchMs + 4 * kMiBMs / 0.5 + 1) * kMs, 1e-12);
  ASSERT_TRUE(result.realized_plan);
  EXPECT_THAT(service_times(*result.realized_plan),
              ElementsAre(::testing::DoubleNear((2 * kBatchMs + 4 * kMiBMs) * kMs, 1e-15)));
}

// Three 640 KiB weights share VA block 1 (units 0-9, 10-19, 20-29; x, 2 MiB, has block 0), all on the host. f0
// reads a0: its 10 faults (one batch) fill the 16-unit subtree [0, 16) past 51 % (10/16), which is taken whole and
// brings a1 along; the root [0, 32) then has 16/32 = 50 %: a2 stays. f1 reads a1 (already there, 1 ms); f2 reads
// a2: a fault of its own. 0.030 + 2 x 0.65536 + 1 + 1 + 0.030 + 0.65536 + 1 = 5.02608 ms.
TEST_P(UvmOnEngine, SmallTensorsInOneVaBlockMigrateTogether)
{
  const Trace trace = hand_trace({640 * kKiB, 640 * kKiB, 640 * kKiB, 0, 0, 0}, {{{1}, {4}}, {{2}, {5}}, {{3}, {6}}},
                                 {2 * kMiB, {1, 2, 3}});
  const RunResult result = run_and_replay(trace, in_order(trace, 0, {1, 2, 3}));
  EXPECT_THAT(fetched(result), ElementsAre("a0", "a1", "a2"));
  EXPECT_EQ(result.metrics.h2d_bytes, 3 * 640 * kKiB);
  EXPECT_NEAR(result.metrics.iteration_time_s, (2 * kBatchMs + 3 * 0.625 * kMiBMs + 3) * kMs, 1e-12);
  ASSERT_TRUE(result.realized_plan);
  // a1 came with a0's fault (no service time of its own); a2 is a second fault of one batch.
  EXPECT_THAT(service_times(*result.realized_plan),
              ElementsAre(::testing::DoubleEq(kBatchMs * kMs), 0.0, ::testing::DoubleEq(kBatchMs * kMs)));
  // Two faults (a0, a2) of one batch each missed 2 x 640 KiB; a0's brought a1 along: 3 x 640 KiB migrated.
  EXPECT_EQ(result.metrics.policy.fault_batches, 2u);
  EXPECT_EQ(result.metrics.policy.fault_missing_bytes, 2 * 640 * kKiB);
  EXPECT_EQ(result.metrics.policy.fault_migrated_bytes, 3 * 640 * kKiB);
  // With the prefetcher off (threshold 100 %), a1 faults on its own too: one batch more.
  const RunResult off = run_and_replay(trace, in_order(trace, 0, {1, 2, 3}, {{"prefetch_threshold", 100}}));
  EXPECT_NEAR(off.metrics.iteration_time_s, (3 * kBatchMs + 3 * 0.625 * kMiBMs + 3) * kMs, 1e-12);
  EXPECT_EQ(off.metrics.policy.fault_batches, 3u);
  EXPECT_EQ(off.metrics.policy.fault_missing_bytes, off.metrics.policy.fault_migrated_bytes);
}

// x and a0..a2 are 2 MiB each, one VA block each; budget 6 MiB. f0 x -> a0, f1 x -> a1, f2 x -> a2 (1 ms each):
// f2 needs 2 MiB; x is in use, and of a0 and a1 the block allocated first (a0) goes, written back (2 MiB, 2.097152
// ms). f3 reads x and a0: a0 faults back (one batch) and needs room: a1's block is now the oldest unused one and is
// written back first. 3 + 2.097152 + 2.097152 + 0.030 + 2.097152 + 1 = 10.321456 ms.
TEST_P(UvmOnEngine, EvictsTheLeastRecentlyAllocatedVaBlock)
{
  const Trace trace = hand_trace({2 * kMiB, 2 * kMiB, 2 * kMiB, 0}, {{{0}, {1}}, {{0}, {2}}, {{0}, {3}}, {{0, 1}, {4}}},
                                 {2 * kMiB, {}});
  const RunResult result = run_and_replay(trace, in_order(trace, 6 * kMiB));
  EXPECT_THAT(written_back(result), ElementsAre("a0", "a1"));
  EXPECT_THAT(fetched(result), ElementsAre("a0"));
  EXPECT_NEAR(result.metrics.iteration_time_s, (4 + 3 * 2 * kMiBMs + kBatchMs) * kMs, 1e-12);
  EXPECT_EQ(result.metrics.peak_device_bytes, 6 * kMiB);
}

// The same run at uvm_bw_fraction 0.25: the two write-backs and the fault's copy (2 MiB each) take 4 x 2.097152 ms
// each: 4 + 3 x 8.388608 + 0.030 = 29.195824 ms; a write-back's service time is its 3 x 2.097152 ms extra.
TEST_P(UvmOnEngine, WriteBacksMoveAtTheBandwidthFractionToo)
{
  const Trace trace = hand_trace({2 * kMiB, 2 * kMiB, 2 * kMiB, 0}, {{{0}, {1}}, {{0}, {2}}, {{0}, {3}}, {{0, 1}, {4}}},
                                 {2 * kMiB, {}});
  const RunResult result = run_and_replay(trace, in_order(trace, 6 * kMiB, {}, {{"uvm_bw_fraction", 0.25}}));
  EXPECT_THAT(written_back(result), ElementsAre("a0", "a1"));
  EXPECT_THAT(fetched(result), ElementsAre("a0"));
  EXPECT_NEAR(result.metrics.iteration_time_s, (4 + 3 * 2 * kMiBMs / 0.25 + kBatchMs) * kMs, 1e-12);
  ASSERT_TRUE(result.realized_plan);
  for (const Step& step : result.realized_plan->steps) {
    if (step.kind == StepKind::offload) {
      EXPECT_NEAR(step.service_s, 3 * 2 * kMiBMs * kMs, 1e-15);
    }
  }
}

// A clean block (fetched, not written since) is dropped without a copy. x 2 MiB on the device, w (2 MiB weight)
// on the host, budget 4 MiB: f0 reads w (fault: 0.030 + 2.097152), f1 x -> a1 (2 MiB) needs room: w's block is the
// oldest unused one and is clean: dropped, no write-back. 0.030 + 2.097152 + 1 + 1 = 4.127152 ms.
TEST_P(UvmOnEngine, DropsACleanBlockWithoutWritingItBack)
{
  const Trace trace = hand_trace({2 * kMiB, 2 * kMiB, 0}, {{{1}, {3}}, {{0}, {2}}}, {2 * kMiB, {1}});
  const RunResult result = run_and_replay(trace, in_order(trace, 4 * kMiB, {1}));
  EXPECT_THAT(fetched(result), ElementsAre("a0"));
  EXPECT_THAT(written_back(result), ElementsAre());
  EXPECT_THAT(labels_of(result, StepKind::free, "policy-evict"), ElementsAre("a0"));
  EXPECT_NEAR(result.metrics.iteration_time_s, (kBatchMs + 2 * kMiBMs + 2) * kMs, 1e-12);
}

// x and a0..a3 are 2 MiB each, budget 4 MiB, f_i x -> a_i. f1 and f2 oversubscribe (footprint 6 and 8 MiB <= 2 x
// 4 MiB): a0 and a1 are written back. f3 would make it 10 MiB > 8 MiB: refused, f3 fails out of memory. With the
// cap at 3 the run goes on.
TEST_P(UvmOnEngine, RefusesToOversubscribeBeyondTheCap)
{
  const Trace trace = hand_trace({2 * kMiB, 2 * kMiB, 2 * kMiB, 2 * kMiB},
                                 {{{0}, {1}}, {{0}, {2}}, {{0}, {3}}, {{0}, {4}}}, {2 * kMiB, {}});
  const RunResult capped = run(trace, in_order(trace, 4 * kMiB));
  EXPECT_FALSE(capped.metrics.feasible);
  ASSERT_TRUE(capped.error);
  EXPECT_EQ(capped.error->kind, FailureKind::out_of_memory);
  EXPECT_THAT(capped.error->message, HasSubstr("step 3 (compute on gpu0/compute) allocates tensor 4 'a3'"));
  EXPECT_THAT(capped.error->message,
              HasSubstr("(uvm: the footprint would be 10485760 bytes (4194304 on the GPU, 2097152 more wanted, 4194304 "
                        "evicted to the host), over oversubscription 2 x 4194304 bytes of GPU memory)"));
  const RunResult wider = run_and_replay(trace, in_order(trace, 4 * kMiB, {}, {{"oversubscription", 3.0}}));
  EXPECT_THAT(written_back(wider), ElementsAre("a0", "a1", "a2"));
}

// Same inputs, same run: the realized plan's JSON is byte-identical across runs.
TEST_P(UvmOnEngine, IsDeterministic)
{
  const Trace trace = hand_trace({2 * kMiB, 2 * kMiB, 2 * kMiB, 0}, {{{0}, {1}}, {{0}, {2}}, {{0}, {3}}, {{0, 1}, {4}}},
                                 {2 * kMiB, {}});
  const RunResult first = run(trace, in_order(trace, 6 * kMiB));
  const RunResult second = run(trace, in_order(trace, 6 * kMiB));
  ASSERT_TRUE(first.realized_plan && second.realized_plan);
  EXPECT_EQ(plan_to_json(*first.realized_plan).dump(), plan_to_json(*second.realized_plan).dump());
}

INSTANTIATE_TEST_SUITE_P(Engines, UvmOnEngine, ::testing::Values(EngineKind::fast, EngineKind::simgrid),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// `memsim plan --planner online --param policy=uvm`: the default schedule under uvm below keep-all's peak (x and
// a0..a2, 2 MiB each, live together: 8 MiB; budget 6 MiB): a0 is written back for f2 and faults back for f3; the
// plan carries the fault's service time and replays to its estimate on both engines.
TEST(UvmOnlinePlanner, EmitsTheRealizedPlanWithFaultServiceTimes)
{
  const Trace trace = hand_trace({2 * kMiB, 2 * kMiB, 2 * kMiB, 0, 0},
                                 {{{0}, {1}}, {{0}, {2}}, {{0}, {3}}, {{0, 1}, {4}}, {{0, 2}, {5}}}, {2 * kMiB, {}});
  const Machine machine = one_gpu_machine();
  PlanRequest request;
  request.budget_bytes = 6 * kMiB;
  request.params = {{"policy", "uvm"}, {"policy_params", "fault_batch_s=0.001"}};
  const Plan plan = make_plan("online", trace, machine, request);
  EXPECT_FALSE(plan.policy.has_value());
  EXPECT_THAT(service_times(plan), ::testing::Contains(::testing::DoubleEq(0.001)));
  for (EngineKind engine : {EngineKind::fast, EngineKind::simgrid}) {
    const RunResult replay = test::run_on_engine(engine, trace, machine, plan);
    ASSERT_TRUE(replay.metrics.feasible) << (replay.error ? replay.error->message : "");
    ASSERT_TRUE(plan.estimate.iteration_time_s.has_value());
    EXPECT_DOUBLE_EQ(replay.metrics.iteration_time_s, *plan.estimate.iteration_time_s);
  }
}

} // namespace
} // namespace memsim
