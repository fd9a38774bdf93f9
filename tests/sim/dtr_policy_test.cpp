// The `dtr` policy on hand-made graphs whose answers are worked out by hand: the victim h_DTR picks (and the one
// its variants and baselines pick instead), the evicted-neighbourhood cost, recursive rematerialization, and locks
// (the inputs of the step that asks, constants). Every case runs on the fast engine in-process and on SimGrid in a
// forked child, and the realized plan replays the same run.
#include "engine_comparison.hpp"
#include "test_machines.hpp"
#include "test_traces.hpp"

#include "memsim/planners/plan.hpp"
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
using test::HandOp;
using test::one_gpu_machine;

using ::testing::ElementsAre;

constexpr std::uint64_t kMB = 1000000;
constexpr double kMs = 0.001;

// Every op in order; `frees_after[k]` lists the tensors the framework releases after op k (simrd's eager eviction).
Plan in_order(const Trace& trace, std::uint64_t budget, const std::string& heuristic,
              const std::vector<std::vector<TensorId>>& frees_after = {})
{
  Plan plan;
  plan.trace = trace.name;
  plan.machine = "one-gpu";
  plan.planner = "hand";
  plan.budget_bytes = budget;
  PolicyChoice dtr{"dtr"};
  dtr.params["heuristic"] = heuristic;
  plan.policy = dtr;
  PlanBuilder build(plan);
  for (const Op& op : trace.ops) {
    build.compute(op.id);
    if (static_cast<std::size_t>(op.id) < frees_after.size())
      for (TensorId tensor : frees_after[static_cast<std::size_t>(op.id)])
        build.free(tensor);
  }
  return plan;
}

class DtrOnEngine : public ::testing::TestWithParam<EngineKind> {
protected:
  RunResult run(const Trace& trace, const Plan& plan) const
  {
    SimOptions options;
    options.realized_plan = true;
    return test::run_on_engine(GetParam(), trace, one_gpu_machine(), plan, options);
  }
  // The run, and its realized plan replayed without the policy, give the same time and peak.
  RunResult run_and_replay(const Trace& trace, const Plan& plan) const
  {
    RunResult live = run(trace, plan);
    EXPECT_TRUE(live.metrics.feasible) << (live.error ? live.error->message : "");
    if (live.metrics.feasible && live.realized_plan) {
      const RunResult replay = run(trace, *live.realized_plan);
      EXPECT_TRUE(replay.metrics.feasible) << (replay.error ? replay.error->message : "");
      EXPECT_DOUBLE_EQ(replay.metrics.iteration_time_s, live.metrics.iteration_time_s);
      EXPECT_EQ(replay.metrics.peak_device_bytes, live.metrics.peak_device_bytes);
    }
    return live;
  }
};

// Labels of the records of `kind` (on `stream` if given), in start order.
std::vector<std::string> labels_of(const RunResult& result, StepKind kind, const std::string& stream = "")
{
  std::vector<const StepRecord*> records;
  for (const StepRecord& record : result.timeline)
    if (record.kind == kind && (stream.empty() || record.stream == stream))
      records.push_back(&record);
  std::stable_sort(records.begin(), records.end(),
                   [](const StepRecord* a, const StepRecord* b) { return a->start_s < b->start_s; });
  std::vector<std::string> labels;
  for (const StepRecord* record : records)
    labels.push_back(record->label);
  return labels;
}
std::vector<std::string> evicted(const RunResult& result) { return labels_of(result, StepKind::free, "policy-evict"); }

// f0 (20 ms) x -> a0 (1 MB), f1 (3 ms) x -> a1 (1 MB), f2 (1 ms) x -> a2 (2 MB), f3 (1 ms) x -> a3 (2 MB),
// f4 (1 ms) a0, a1, a2 -> a4 (0 B); budget 6 MB. At t=24 f3 needs 2 MB with 5 MB in use: one victim. Stamps (ends
// of the first computations): a0 20, a1 23, a2 24 (staleness 0: h = inf). h_DTR = c0 / (MB x ms of staleness):
// a0 = 20 / (1 x 4) = 5, a1 = 3 / (1 x 1) = 3 -> a1 (LRU would take a0, size a2). f4 then misses a1: recompute
// f1 (3 ms), for which a3 is evicted (a0 and a2 are locked by f4). 20+3+1+1+3+1 = 29 ms.
Trace formula_trace()
{
  return hand_trace({kMB, kMB, 2 * kMB, 2 * kMB, 0},
                    {{{0}, {1}, 20}, {{0}, {2}, 3}, {{0}, {3}, 1}, {{0}, {4}, 1}, {{1, 2, 3}, {5}, 1}});
}

TEST_P(DtrOnEngine, EvictsTheSmallestHDtr)
{
  const Trace trace = formula_trace();
  const RunResult result = run_and_replay(trace, in_order(trace, 6 * kMB, "dtr"));
  EXPECT_THAT(evicted(result), ElementsAre("a1", "a3"));
  EXPECT_THAT(labels_of(result, StepKind::recompute), ElementsAre("f1"));
  EXPECT_NEAR(result.metrics.iteration_time_s, 29 * kMs, 1e-12);
  EXPECT_NEAR(result.metrics.recompute_time_s, 3 * kMs, 1e-12);
  EXPECT_EQ(result.metrics.peak_device_bytes, 6 * kMB);
}

// The same graph under the baselines: LRU evicts a0 (oldest stamp, 20), recomputed for 20 ms (46 ms in all);
// size evicts a2 (the largest), recomputed for 1 ms, which needs a3 out too (27 ms).
TEST_P(DtrOnEngine, TheBaselinesPickTheirOwnVictims)
{
  const Trace trace = formula_trace();
  const RunResult lru = run_and_replay(trace, in_order(trace, 6 * kMB, "lru"));
  EXPECT_THAT(evicted(lru), ElementsAre("a0", "a3"));
  EXPECT_NEAR(lru.metrics.iteration_time_s, 46 * kMs, 1e-12);
  const RunResult size = run_and_replay(trace, in_order(trace, 6 * kMB, "size"));
  EXPECT_THAT(evicted(size), ElementsAre("a2", "a3"));
  EXPECT_NEAR(size.metrics.iteration_time_s, 27 * kMs, 1e-12);
}

// f0 (5 ms) x -> a0 (c), f1 (1 ms) x -> a1 (b0), f2 (1 ms) a1 -> a2 (b1), f3 (1 ms) x -> a3 (z), f4 (1 ms)
// x -> a4 (2 MB); the framework releases b0 after f2 and z after f3 (evicted, still rematerializable); budget
// 4 MB. At t=8 f4 needs 2 MB with 3 MB in use (x, c, b1). c: c0 5, staleness 3 -> 5/3. b1: c0 1, staleness 1,
// evicted neighbourhood {b0} (c0 1): h_DTR = (1 + 1) / 1 = 2, h_eq = 2 as well, h_local = 1. So dtr and dtr-eq
// evict c, dtr-local evicts b1.
TEST_P(DtrOnEngine, TheEvictedNeighbourhoodAddsToTheCost)
{
  const Trace trace = hand_trace({kMB, kMB, kMB, kMB, 2 * kMB},
                                 {{{0}, {1}, 5}, {{0}, {2}, 1}, {{2}, {3}, 1}, {{0}, {4}, 1}, {{0}, {5}, 1}});
  const std::vector<std::vector<TensorId>> frees{{}, {}, {2}, {4}};
  for (const char* heuristic : {"dtr", "dtr-eq"}) {
    const RunResult result = run_and_replay(trace, in_order(trace, 4 * kMB, heuristic, frees));
    EXPECT_THAT(evicted(result), ElementsAre("a0")) << heuristic;
  }
  const RunResult local = run_and_replay(trace, in_order(trace, 4 * kMB, "dtr-local", frees));
  EXPECT_THAT(evicted(local), ElementsAre("a2"));
  EXPECT_NEAR(local.metrics.iteration_time_s, 9 * kMs, 1e-12);
}

// MSPS: (c0 + c0 of the evicted ancestors) / bytes, no staleness. The graph above with f0 at 1.5 ms: at t=4.5 a0 is
// 1.5 / 1 MB and a2 (c0 1 plus its evicted parent a1's 1) is 2 / 1 MB, so a0 goes; on its own cost alone a2 (1)
// would. Nothing reads a0 again: 1.5 + 4 x 1 = 5.5 ms, no recomputation.
TEST_P(DtrOnEngine, MspsAddsTheEvictedAncestorsCost)
{
  const Trace trace = hand_trace({kMB, kMB, kMB, kMB, 2 * kMB},
                                 {{{0}, {1}, 1.5}, {{0}, {2}, 1}, {{2}, {3}, 1}, {{0}, {4}, 1}, {{0}, {5}, 1}});
  const std::vector<std::vector<TensorId>> frees{{}, {}, {2}, {4}};
  const RunResult msps = run_and_replay(trace, in_order(trace, 4 * kMB, "msps", frees));
  EXPECT_THAT(evicted(msps), ElementsAre("a0"));
  EXPECT_TRUE(labels_of(msps, StepKind::recompute).empty());
  EXPECT_NEAR(msps.metrics.iteration_time_s, 5.5 * kMs, 1e-12);
}

// f0 x -> a0, f1 a0 -> a1, f2 a1 -> a2 (1 MB, 1 ms each); a0 released after f1, a1 after f2; f3 x -> a3 (2 MB)
// evicts a2 (budget 3 MB); f4 a2 -> a4 (1 MB). f4 misses a2 -> recompute f2, which misses a1 -> recompute f1,
// which misses a0 -> recompute f0 (a3 evicted for it); f2's recompute needs room: a0 goes; f4 needs room: a1
// goes. Recomputes run f0, f1, f2 (3 ms): 8 ms in all.
TEST_P(DtrOnEngine, RematerializesRecursively)
{
  const Trace trace =
      hand_trace({kMB, kMB, kMB, 2 * kMB, kMB}, {{{0}, {1}}, {{1}, {2}}, {{2}, {3}}, {{0}, {4}}, {{3}, {5}}});
  const RunResult result = run_and_replay(trace, in_order(trace, 3 * kMB, "dtr", {{}, {1}, {2}}));
  EXPECT_THAT(labels_of(result, StepKind::recompute), ElementsAre("f0", "f1", "f2"));
  EXPECT_THAT(evicted(result), ElementsAre("a2", "a3", "a0", "a1"));
  EXPECT_NEAR(result.metrics.iteration_time_s, 8 * kMs, 1e-12);
  EXPECT_NEAR(result.metrics.recompute_time_s, 3 * kMs, 1e-12);
  EXPECT_EQ(result.metrics.peak_device_bytes, 3 * kMB);
}

// f0 (1 ms) x -> a0, f1 (10 ms) x -> a1, f2 (1 ms) a0 -> a2, 1 MB each, budget 3 MB. At t=11 f2 needs 1 MB:
// a0 has the smallest h (1 / (1 x 10)) but f2 reads it (locked); a1 (just made: h = inf) is evicted instead.
TEST_P(DtrOnEngine, NeverEvictsALockedTensor)
{
  const Trace trace = hand_trace({kMB, kMB, kMB}, {{{0}, {1}, 1}, {{0}, {2}, 10}, {{1}, {3}, 1}});
  const RunResult result = run_and_replay(trace, in_order(trace, 3 * kMB, "dtr"));
  EXPECT_THAT(evicted(result), ElementsAre("a1"));
  EXPECT_NEAR(result.metrics.iteration_time_s, 12 * kMs, 1e-12);
}

// Constants (here the input x) are pinned: f0 x -> a0 (2 MB) in a 2 MB budget has nothing to evict.
TEST_P(DtrOnEngine, ConstantsAreNeverEvicted)
{
  const Trace trace = hand_trace({2 * kMB}, {{{0}, {1}}});
  const RunResult result = run(trace, in_order(trace, 2 * kMB, "dtr"));
  EXPECT_FALSE(result.metrics.feasible);
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->kind, FailureKind::out_of_memory);
}

// The core rule DTR needs (no policy here): a recompute whose op has an output still resident writes that one in
// place and allocates only the missing one. f0 x -> a0, a1 (1 MB each); a1 freed; recomputing f0 brings a1 back
// and leaves a0 where it is: the peak stays at x + a0 + a1.
TEST_P(DtrOnEngine, ARecomputeWritesAStillResidentOutputInPlace)
{
  const Trace trace = hand_trace({kMB, kMB}, {{{0}, {1, 2}}});
  Plan plan;
  plan.trace = trace.name;
  plan.machine = "one-gpu";
  plan.planner = "hand";
  plan.budget_bytes = 3 * kMB;
  PlanBuilder build(plan);
  build.compute(0);
  build.free(2);
  build.recompute(0);
  const RunResult result = run(trace, plan);
  ASSERT_TRUE(result.metrics.feasible) << (result.error ? result.error->message : "");
  EXPECT_EQ(result.metrics.peak_device_bytes, 3 * kMB);
  EXPECT_NEAR(result.metrics.iteration_time_s, 2 * kMs, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Engines, DtrOnEngine, ::testing::Values(EngineKind::fast, EngineKind::simgrid),
                         [](const auto& info) { return std::string(to_string(info.param)); });

} // namespace
} // namespace memsim
