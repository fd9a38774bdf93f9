// Online memory policies on hand-made traces whose answers are worked out by hand: lru-swap's victim order, the
// stall of an on-demand fetch, evict + rematerialize (a DTR-like test policy), the realized plan, whose replay
// without a policy must give the same run, and the online planner that returns it. Every scenario runs on the fast
// engine in-process and on SimGrid in a forked child (one SimGrid engine per process).
#include "engine_comparison.hpp"
#include "test_machines.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/policy_registry.hpp"

#include "memsim/planners/plan.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/memory_policy.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace memsim {
namespace {

using test::hand_trace;
using test::HandOp;
using test::one_gpu_machine;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::uint64_t kMB = 1000000;

// A DTR-like policy for the tests: evict (no copy) the least recently used activation that is not pinned; recompute
// a missing one from its producer.
class DropAndRecompute final : public MemoryPolicy {
public:
  void on_access(const TensorAccess& access, const PolicyView&) override { last_use_[access.tensor] = ++clock_; }
  std::vector<PolicyAction> on_allocation_denied(const AllocationDemand& demand, const PolicyView& view) override
  {
    std::vector<std::pair<std::uint64_t, TensorSlot>> by_age;
    for (const auto& [slot, clock] : last_use_)
      if (slot.space == demand.device && view.trace().tensor(slot.tensor).kind == TensorKind::activation &&
          view.resident(slot) && !view.pinned(slot))
        by_age.emplace_back(clock, slot);
    std::sort(by_age.begin(), by_age.end());
    std::vector<PolicyAction> actions;
    std::uint64_t freed = 0;
    for (const auto& [clock, slot] : by_age) {
      if (freed >= demand.shortfall())
        break;
      actions.push_back(PolicyAction::evict(slot));
      freed += view.trace().tensor(slot.tensor).bytes;
    }
    return actions;
  }
  std::vector<PolicyAction> on_missing_tensor(const MissingTensor& missing, const PolicyView&) override
  {
    return {PolicyAction::rematerialize(missing.tensor)};
  }

private:
  std::uint64_t clock_ = 0;
  std::map<TensorSlot, std::uint64_t> last_use_;
};

MEMSIM_REGISTER_POLICY(test_drop_and_recompute, "test-drop-and-recompute", "tests only: evict LRU, recompute",
                       [] { return std::make_unique<DropAndRecompute>(); });

Plan all_ops_in_order(const Trace& trace, std::uint64_t budget, std::optional<PolicyChoice> policy)
{
  Plan plan;
  plan.trace = trace.name;
  plan.machine = "one-gpu";
  plan.planner = "hand";
  plan.budget_bytes = budget;
  plan.policy = std::move(policy);
  PlanBuilder build(plan);
  for (const Op& op : trace.ops)
    build.compute(op.id);
  return plan;
}

// f0: x -> a0, f1: a0 -> a1, f2: a1 -> a2, f3: a2 -> a3, f4: a0, a3 -> a4 (2 MB), f5: a1 -> a5; budget 5 MB.
Trace lru_trace()
{
  return hand_trace({kMB, kMB, kMB, kMB, 2 * kMB, kMB},
                    {{{0}, {1}}, {{1}, {2}}, {{2}, {3}}, {{3}, {4}}, {{1, 4}, {5}}, {{2}, {6}}});
}

RunResult run(EngineKind engine, const Trace& trace, const Machine& machine, const Plan& plan,
              std::optional<PolicyChoice> policy = std::nullopt)
{
  SimOptions options;
  options.policy = std::move(policy);
  options.realized_plan = true;
  return test::run_on_engine(engine, trace, machine, plan, std::move(options));
}

// Labels of the records of `kind`, in start order.
std::vector<std::string> labels_of(const RunResult& result, StepKind kind)
{
  std::vector<const StepRecord*> records;
  for (const StepRecord& record : result.timeline)
    if (record.kind == kind)
      records.push_back(&record);
  std::stable_sort(records.begin(), records.end(),
                   [](const StepRecord* a, const StepRecord* b) { return a->start_s < b->start_s; });
  std::vector<std::string> labels;
  for (const StepRecord* record : records)
    labels.push_back(record->label);
  return labels;
}

const StepRecord& record_labeled(const RunResult& result, StepKind kind, const std::string& label)
{
  for (const StepRecord& record : result.timeline)
    if (record.kind == kind && record.label == label)
      return record;
  throw std::runtime_error("no record " + label);
}

// Same run: metrics, and the same (kind, label, device, stream, start, end) records.
void expect_same_run(const RunResult& live, const RunResult& replay)
{
  ASSERT_TRUE(replay.metrics.feasible) << (replay.error ? replay.error->message : "");
  EXPECT_DOUBLE_EQ(replay.metrics.iteration_time_s, live.metrics.iteration_time_s);
  EXPECT_DOUBLE_EQ(replay.metrics.stall_time_s, live.metrics.stall_time_s);
  EXPECT_DOUBLE_EQ(replay.metrics.compute_busy_s, live.metrics.compute_busy_s);
  EXPECT_DOUBLE_EQ(replay.metrics.recompute_time_s, live.metrics.recompute_time_s);
  EXPECT_EQ(replay.metrics.peak_device_bytes, live.metrics.peak_device_bytes);
  EXPECT_EQ(replay.metrics.peak_host_bytes, live.metrics.peak_host_bytes);
  EXPECT_EQ(replay.metrics.h2d_bytes, live.metrics.h2d_bytes);
  EXPECT_EQ(replay.metrics.d2h_bytes, live.metrics.d2h_bytes);
  auto key = [](const StepRecord& r) { return std::tuple(r.start_s, r.end_s, r.kind, r.label, r.device, r.stream); };
  std::vector<decltype(key(live.timeline.front()))> live_records, replay_records;
  for (const StepRecord& record : live.timeline)
    live_records.push_back(key(record));
  for (const StepRecord& record : replay.timeline)
    replay_records.push_back(key(record));
  std::sort(live_records.begin(), live_records.end());
  std::sort(replay_records.begin(), replay_records.end());
  EXPECT_EQ(replay_records, live_records);
}

class MemoryPolicyOnEngine : public ::testing::TestWithParam<EngineKind> {};

// t=4: f4 needs 2 MB more; a0 and a3 are pinned (f4 reads them), so the LRU victims are a1 (used at f2), then a2
// (f3): offloads 4-5 and 5-6 ms on the serial policy-d2h stream, f4 runs 6-7. t=7: f5 reads a1 -> fetch; the fetch
// needs 1 MB: victim a0 (last read by f4 before a3 was) offloaded 7-8, fetch 8-9. t=9: f5 needs 1 MB: a1 is pinned,
// so a3 goes 9-10; f5 runs 10-11.
TEST_P(MemoryPolicyOnEngine, LruSwapOffloadsLeastRecentlyUsedFirstAndFetchesOnDemand)
{
  const Trace trace = lru_trace();
  const Machine machine = one_gpu_machine();
  const Plan plan = all_ops_in_order(trace, 5 * kMB, PolicyChoice{"lru-swap", {}});
  const RunResult result = run(GetParam(), trace, machine, plan);
  ASSERT_TRUE(result.metrics.feasible) << (result.error ? result.error->message : "");
  EXPECT_THAT(labels_of(result, StepKind::offload), ElementsAre("a1", "a2", "a0", "a3"));
  EXPECT_THAT(labels_of(result, StepKind::prefetch), ElementsAre("a1"));
  EXPECT_NEAR(record_labeled(result, StepKind::compute, "f4").start_s, 0.006, 1e-12);
  EXPECT_NEAR(record_labeled(result, StepKind::prefetch, "a1").start_s, 0.008, 1e-12);
  EXPECT_NEAR(record_labeled(result, StepKind::prefetch, "a1").end_s, 0.009, 1e-12);
  EXPECT_NEAR(record_labeled(result, StepKind::compute, "f5").start_s, 0.010, 1e-12);
  EXPECT_NEAR(result.metrics.iteration_time_s, 0.011, 1e-12);
  EXPECT_NEAR(result.metrics.stall_time_s, 0.005, 1e-12); // 11 ms - 6 ms of compute
  EXPECT_EQ(result.metrics.d2h_bytes, 4 * kMB);
  EXPECT_EQ(result.metrics.h2d_bytes, kMB);
  EXPECT_EQ(result.metrics.peak_device_bytes, 5 * kMB);
  for (const StepRecord& record : result.timeline) {
    if (record.kind == StepKind::offload || record.kind == StepKind::prefetch) {
      EXPECT_THAT(record.stream, ::testing::StartsWith("policy-"));
    }
  }
}

TEST_P(MemoryPolicyOnEngine, WithoutAPolicyTheSamePlanRunsOutOfMemory)
{
  const Trace trace = lru_trace();
  const Plan plan = all_ops_in_order(trace, 5 * kMB, PolicyChoice{"lru-swap", {}});
  const RunResult result = run(GetParam(), trace, one_gpu_machine(), plan, PolicyChoice{"none", {}});
  EXPECT_FALSE(result.metrics.feasible);
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->step, 4);
  EXPECT_THAT(result.error->message, HasSubstr("out of memory"));
}

// f0: x -> a0, f1: x -> a1, f2: a0, a1 -> a2. The plan offloads and frees a0 after f0 but never prefetches it:
// f0 0-1 ms, offload 1-2, f1 1-2; f2 reads a0 at 2 -> fetched on demand 2-3 ms; f2 runs 3-4.
// Iteration = 3 ms of compute + 1 ms of fetch.
TEST_P(MemoryPolicyOnEngine, AnOnDemandFetchStallsTheReadingStep)
{
  const Trace trace = hand_trace({kMB, kMB, kMB}, {{{0}, {1}}, {{0}, {2}}, {{1, 2}, {3}}});
  Plan plan = all_ops_in_order(trace, 0, PolicyChoice{"lru-swap", {}});
  plan.steps.clear();
  PlanBuilder build(plan);
  const StepId f0 = build.compute(0);
  const StepId offload = build.offload(1, {f0});
  const StepId free = build.free(1, {offload}, "d2h");
  build.compute(1);
  const StepId f2 = build.compute(2, {free});
  const RunResult result = run(GetParam(), trace, one_gpu_machine(), plan);
  ASSERT_TRUE(result.metrics.feasible) << (result.error ? result.error->message : "");
  EXPECT_NEAR(record_labeled(result, StepKind::prefetch, "a0").start_s, 0.002, 1e-12);
  EXPECT_NEAR(record_labeled(result, StepKind::compute, "f2").start_s, 0.003, 1e-12);
  EXPECT_NEAR(result.metrics.iteration_time_s, 0.003 + 0.001, 1e-12);
  EXPECT_NEAR(result.metrics.stall_time_s, 0.001, 1e-12);
  EXPECT_EQ(result.metrics.h2d_bytes, kMB);

  const RunResult without = run(GetParam(), trace, one_gpu_machine(), plan, PolicyChoice{"none", {}});
  ASSERT_TRUE(without.error);
  EXPECT_THAT(without.error->message, HasSubstr("not resident"));
  EXPECT_EQ(without.error->step, f2);
}

TEST_P(MemoryPolicyOnEngine, ReplayingTheRealizedPlanWithoutAPolicyGivesTheSameRun)
{
  const Trace trace = lru_trace();
  const Machine machine = one_gpu_machine();
  const RunResult live =
      run(GetParam(), trace, machine, all_ops_in_order(trace, 5 * kMB, PolicyChoice{"lru-swap", {}}));
  ASSERT_TRUE(live.realized_plan);
  const Plan& realized = *live.realized_plan;
  EXPECT_FALSE(realized.policy);
  ASSERT_EQ(realized.steps.size(), 6u + 4u + 4u + 1u); // ops, offloads, their frees, the fetch
  const RunResult replay = run(GetParam(), trace, machine, realized);
  expect_same_run(live, replay);
}

// Memory-safe under any timing: the realized plan stays feasible with a 10x slower or faster host link.
TEST_P(MemoryPolicyOnEngine, TheRealizedPlanIsMemorySafeUnderOtherTimings)
{
  const Trace trace = lru_trace();
  const RunResult live =
      run(GetParam(), trace, one_gpu_machine(), all_ops_in_order(trace, 5 * kMB, PolicyChoice{"lru-swap", {}}));
  ASSERT_TRUE(live.realized_plan);
  for (double bandwidth : {1e8, 1e10}) {
    const RunResult other = run(GetParam(), trace, one_gpu_machine(1ull << 34, bandwidth), *live.realized_plan);
    EXPECT_TRUE(other.metrics.feasible) << (other.error ? other.error->message : "");
    EXPECT_EQ(other.metrics.d2h_bytes, 4 * kMB);
    EXPECT_LE(other.metrics.peak_device_bytes, 5 * kMB);
  }
}

// f0: x -> a0, f1: a0 -> a1, f2: a1 -> a2, f3: a0, a2 -> a3, f4: a1 -> a4; budget 4 MB.
// t=3: f3 needs 1 MB, a0/a2 pinned: a1 is evicted (no copy, no time); f3 runs 3-4. t=4: f4 reads a1 -> recompute
// f1 (reads a0, pinned); it needs 1 MB: evict a2 (read by f3 before a3 was written); recompute 4-5 ms. t=5: f4
// needs 1 MB: a1 is pinned, a0 was read by the recompute after a3 was written: evict a3. f4 runs 5-6 ms.
TEST_P(MemoryPolicyOnEngine, EvictAndRematerializeRecomputeTheProducer)
{
  const Trace trace =
      hand_trace({kMB, kMB, kMB, kMB, kMB}, {{{0}, {1}}, {{1}, {2}}, {{2}, {3}}, {{1, 3}, {4}}, {{2}, {5}}});
  const Machine machine = one_gpu_machine();
  const RunResult live =
      run(GetParam(), trace, machine, all_ops_in_order(trace, 4 * kMB, PolicyChoice{"test-drop-and-recompute", {}}));
  ASSERT_TRUE(live.metrics.feasible) << (live.error ? live.error->message : "");
  EXPECT_THAT(labels_of(live, StepKind::free), ElementsAre("a1", "a2", "a3"));
  EXPECT_THAT(labels_of(live, StepKind::recompute), ElementsAre("f1"));
  EXPECT_NEAR(live.metrics.recompute_time_s, 0.001, 1e-12);
  EXPECT_NEAR(live.metrics.iteration_time_s, 0.006, 1e-12);
  EXPECT_EQ(live.metrics.d2h_bytes + live.metrics.h2d_bytes, 0u);
  EXPECT_EQ(live.metrics.peak_device_bytes, 4 * kMB);
  ASSERT_TRUE(live.realized_plan);
  expect_same_run(live, run(GetParam(), trace, machine, *live.realized_plan));
}

// A policy that is never needed changes nothing, and the realized plan is the plan itself.
TEST_P(MemoryPolicyOnEngine, APolicyThatIsNeverNeededChangesNothing)
{
  const Trace trace = lru_trace();
  const Machine machine = one_gpu_machine();
  const Plan plan = all_ops_in_order(trace, 0, std::nullopt);
  const RunResult without = run(GetParam(), trace, machine, plan);
  const RunResult with = run(GetParam(), trace, machine, plan, PolicyChoice{"lru-swap", {}});
  expect_same_run(without, with);
  ASSERT_TRUE(without.realized_plan && with.realized_plan);
  EXPECT_EQ(plan_to_json(*with.realized_plan), plan_to_json(plan));
  EXPECT_EQ(plan_to_json(*without.realized_plan), plan_to_json(plan));
}

// lru_trace twice over, on a0..a5 then b0..b5 (hand_trace names them a6..a11; x feeds both), with the plan freeing each
// activation after its last read (a4, a5, b4, b5 right after their producers); budget 5 MB. First half: f3 ends at 4 ms
// and a2 is freed; f4 needs 2 MB with 1 MB free, a0 and a3 are pinned, so a1 goes to the host 4-5 ms; f4 5-6; f5
// fetches a1 6-7 and runs 7-8, and the plan's free of a1 leaves the policy's host copy dead: a policy free on the host
// drops it. The second half repeats 8-16 ms with b1. So the host never holds more than one 1 MB copy (2 MB if the
// copies were kept).
TEST_P(MemoryPolicyOnEngine, APolicyHostCopyIsDroppedWhenThePlanFreesTheTensor)
{
  const std::vector<std::uint64_t> half{kMB, kMB, kMB, kMB, 2 * kMB, kMB};
  std::vector<std::uint64_t> sizes = half;
  sizes.insert(sizes.end(), half.begin(), half.end());
  std::vector<HandOp> ops;
  std::vector<std::vector<TensorId>> freed_after;
  for (TensorId base : {0, 6}) {
    const TensorId a0 = base + 1, a1 = base + 2, a2 = base + 3, a3 = base + 4, a4 = base + 5, a5 = base + 6;
    ops.insert(ops.end(), {{{0}, {a0}}, {{a0}, {a1}}, {{a1}, {a2}}, {{a2}, {a3}}, {{a0, a3}, {a4}}, {{a1}, {a5}}});
    freed_after.insert(freed_after.end(), {{}, {}, {}, {a2}, {a0, a3, a4}, {a1, a5}});
  }
  const Trace trace = hand_trace(sizes, ops);
  Plan plan = all_ops_in_order(trace, 5 * kMB, PolicyChoice{"lru-swap", {}});
  plan.steps.clear();
  PlanBuilder build(plan);
  for (const Op& op : trace.ops) {
    build.compute(op.id);
    for (TensorId tensor : freed_after[static_cast<std::size_t>(op.id)])
      build.free(tensor);
  }
  const RunResult live = run(GetParam(), trace, one_gpu_machine(), plan);
  ASSERT_TRUE(live.metrics.feasible) << (live.error ? live.error->message : "");
  EXPECT_THAT(labels_of(live, StepKind::offload), ElementsAre("a1", "a7"));
  EXPECT_THAT(labels_of(live, StepKind::prefetch), ElementsAre("a1", "a7"));
  EXPECT_NEAR(live.metrics.iteration_time_s, 0.016, 1e-12);
  EXPECT_EQ(live.metrics.peak_host_bytes, kMB);
  ASSERT_TRUE(live.realized_plan);
  std::vector<std::string> host_frees;
  for (const Step& step : live.realized_plan->steps)
    if (step.kind == StepKind::free && step.device == kHostDevice)
      host_frees.push_back(trace.tensor(*step.tensor).name + "@" + step.stream);
  EXPECT_THAT(host_frees, ElementsAre("a1@policy-host", "a7@policy-host"));
  expect_same_run(live, run(GetParam(), trace, one_gpu_machine(), *live.realized_plan));
}

INSTANTIATE_TEST_SUITE_P(Engines, MemoryPolicyOnEngine, ::testing::Values(EngineKind::fast, EngineKind::simgrid),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// With the pool allocator the policy is asked until the step's blocks can be placed, and the replay (with the pool
// too) is the same run.
TEST(MemoryPolicy, LruSwapWithThePoolAllocatorReplaysTheSame)
{
  const Trace trace = lru_trace();
  SimOptions options;
  options.engine = EngineKind::fast;
  options.allocator = AllocatorKind::pool;
  options.realized_plan = true;
  const RunResult live =
      simulate(trace, one_gpu_machine(), all_ops_in_order(trace, 6 * kMB, PolicyChoice{"lru-swap", {}}), options);
  ASSERT_TRUE(live.metrics.feasible) << (live.error ? live.error->message : "");
  EXPECT_GT(live.metrics.d2h_bytes, 0u);
  ASSERT_TRUE(live.realized_plan);
  expect_same_run(live, simulate(trace, one_gpu_machine(), *live.realized_plan, options));
}

TEST(MemoryPolicy, LruSwapMinBytesLeavesSmallTensorsAlone)
{
  const Trace trace = lru_trace();
  const Plan plan = all_ops_in_order(trace, 5 * kMB, PolicyChoice{"lru-swap", {{"min_bytes", 2 * kMB}}});
  SimOptions options;
  options.engine = EngineKind::fast;
  const RunResult result = simulate(trace, one_gpu_machine(), plan, options);
  ASSERT_TRUE(result.error); // only a4 is that large, and nothing needs room after it is written
  EXPECT_EQ(result.error->step, 4);
}

TEST(MemoryPolicy, UnknownPoliciesAndParametersAreInputErrors)
{
  const Trace trace = lru_trace();
  SimOptions options;
  options.engine = EngineKind::fast;
  options.policy = PolicyChoice{"no-such-policy", {}};
  const Plan plan = all_ops_in_order(trace, 0, std::nullopt);
  EXPECT_THROW(
      {
        try {
          simulate(trace, one_gpu_machine(), plan, options);
        } catch (const InputError& error) {
          EXPECT_THAT(error.what(), HasSubstr("unknown policy 'no-such-policy' (valid: "));
          EXPECT_THAT(error.what(), HasSubstr("lru-swap"));
          throw;
        }
      },
      InputError);
  options.policy = PolicyChoice{"lru-swap", {{"no_such_param", 1}}};
  EXPECT_THROW(simulate(trace, one_gpu_machine(), plan, options), InputError);
}

TEST(MemoryPolicy, ThePlanPolicyFieldRoundTrips)
{
  Plan plan = all_ops_in_order(lru_trace(), 5 * kMB, PolicyChoice{"lru-swap", {{"min_bytes", 10}}});
  const nlohmann::json document = plan_to_json(plan);
  EXPECT_EQ(document["policy"], (nlohmann::json{{"name", "lru-swap"}, {"params", {{"min_bytes", 10}}}}));
  const Plan back = plan_from_json(document, "round trip");
  ASSERT_TRUE(back.policy);
  EXPECT_EQ(back.policy->name, "lru-swap");
  EXPECT_EQ(back.policy->params, (nlohmann::json{{"min_bytes", 10}}));
  EXPECT_EQ(plan_to_json(back), document);
  plan.policy.reset();
  EXPECT_FALSE(plan_to_json(plan).contains("policy"));
}

// The online planner: keep-all's schedule run under the policy at the budget, returned as the realized plan. Below
// keep-all's peak keep-all has no plan, the online planner has one with the policy's offloads and fetches as steps,
// and replaying it with no policy on either engine gives its estimate.
TEST(OnlinePlanner, RunsTheDefaultScheduleUnderThePolicyAndReturnsWhatHappened)
{
  const Trace trace = lru_trace();
  const Machine machine = one_gpu_machine();
  const std::uint64_t peak = TraceAnalysis(trace).default_profile().peak_bytes;
  PlanRequest request;
  request.budget_bytes = peak - kMB;
  EXPECT_THROW((void)make_plan("keep-all", trace, machine, request), Infeasible);
  request.params = {{"policy", "lru-swap"}};
  const Plan plan = make_plan("online", trace, machine, request);
  EXPECT_FALSE(plan.policy.has_value());
  EXPECT_EQ(plan.budget_bytes, peak - kMB);
  const auto count = [&](StepKind kind) {
    return std::count_if(plan.steps.begin(), plan.steps.end(), [&](const Step& step) { return step.kind == kind; });
  };
  EXPECT_GE(count(StepKind::offload), 1);
  EXPECT_EQ(count(StepKind::compute), static_cast<std::ptrdiff_t>(trace.ops.size()));
  for (EngineKind engine : {EngineKind::fast, EngineKind::simgrid}) {
    const RunResult replay = run(engine, trace, machine, plan);
    ASSERT_TRUE(replay.metrics.feasible) << (replay.error ? replay.error->message : "");
    ASSERT_TRUE(plan.estimate.iteration_time_s.has_value());
    EXPECT_DOUBLE_EQ(replay.metrics.iteration_time_s, *plan.estimate.iteration_time_s);
    EXPECT_EQ(replay.metrics.peak_device_bytes, plan.estimate.peak_bytes);
    EXPECT_LE(replay.metrics.peak_device_bytes, peak - kMB);
    // Offloads and fetches take time the default schedule does not spend.
    EXPECT_GT(replay.metrics.iteration_time_s, 0.001 * static_cast<double>(trace.ops.size()));
  }
  // The policy's own parameters: lru-swap may not offload any of these 1-2 MB tensors, so nothing fits.
  request.params = {{"policy", "lru-swap"}, {"policy_params", "min_bytes=3000000"}};
  EXPECT_THROW((void)make_plan("online", trace, machine, request), Infeasible);
  request.params = {{"policy", "no-such-policy"}};
  EXPECT_THROW((void)make_plan("online", trace, machine, request), InputError);
  request.params = {{"policy", "lru-swap"}, {"policy_params", "min_bytes=-1"}};
  EXPECT_THROW((void)make_plan("online", trace, machine, request), InputError);
}

} // namespace
} // namespace memsim
