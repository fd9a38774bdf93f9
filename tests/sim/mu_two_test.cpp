// The mu-two planner (μ-TWO, shared/specs/mu-two.md) on hand-made chains (1 GB/s link: 1 MB moves in 1 ms; forward
// ops 1 ms, backward ops 2 ms): the paper's partitions of 8 models; the unrolled ring's structure (shared weights,
// one activation copy per iteration, multiplexed order, the same when built into a reused ring's storage); with room
// for everything the ring is keep-all and a cycle is every op once; restricted to {N} it is hfta-capuchin's plan; under
// a budget below the ring's keep-all peak it swaps or recomputes until the plan fits, on both engines; N <= k*: never
// slower than hfta; deterministic; pair_mode=sequential: the steady iteration is the sum of the pairs' periods and only
// the active pair's weights are resident, so more models fit when weights dominate.
#include "engine_comparison.hpp"
#include "planner_test_support.hpp"
#include "test_traces.hpp"

#include "../../planners/src/mu_two/partitions.hpp"
#include "../../planners/src/mu_two/ring_trace.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

constexpr std::uint64_t MB = 1000000;

using planning::mu_two::all_partitions;
using planning::mu_two::build_ring_trace;
using planning::mu_two::candidate_partitions;
using planning::mu_two::paper_partitions;

Plan plan_with(const std::string& planner, const Trace& trace, std::uint64_t budget, nlohmann::json params)
{
  PlanRequest request;
  request.budget_bytes = budget;
  request.params = std::move(params);
  Plan plan = make_plan(planner, trace, test::one_gpu_machine(), request);
  validate_plan(plan, trace, 1, planner);
  return plan;
}

RunResult fast_run(const Trace& trace, const Plan& plan)
{
  SimOptions options;
  options.engine = EngineKind::fast;
  return simulate(trace, test::one_gpu_machine(), plan, options);
}

TEST(MuTwoPartitions, ThePapersExampleForEightModels)
{
  const std::vector<std::vector<int>> expected{{4, 4}, {3, 3, 1, 1}, {2, 2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1}};
  EXPECT_EQ(paper_partitions(8), expected);
  // Odd N: 5 = 2+2+1 (q = 2, r = 1 kept), 1x5; full fusion comes first when included.
  EXPECT_EQ(candidate_partitions(5, "paper", true), (std::vector<std::vector<int>>{{5}, {2, 2, 1}, {1, 1, 1, 1, 1}}));
  EXPECT_EQ(all_partitions(4), (std::vector<std::vector<int>>{{3, 1}, {2, 2}, {2, 1, 1}, {1, 1, 1, 1}}));
  EXPECT_EQ(candidate_partitions(3, "none", true), (std::vector<std::vector<int>>{{3}}));
  EXPECT_EQ(candidate_partitions(4, "finest", false), (std::vector<std::vector<int>>{{1, 1, 1, 1}}));
  EXPECT_EQ(candidate_partitions(3, "finest", true), (std::vector<std::vector<int>>{{3}, {1, 1, 1}}));
  EXPECT_EQ(candidate_partitions(1, "finest", false), (std::vector<std::vector<int>>{{1}}));
  EXPECT_THROW(candidate_partitions(4, "finer", true), InputError);
}

TEST(MuTwoRing, UnrollsIterationsSharingWeights)
{
  const Trace chain = test::make_chain(3, MB); // 3 forward + loss (FW, 4 ops), 3 backward
  const planning::mu_two::RingTrace ring = build_ring_trace({&chain, &chain}, 2);
  // Prologue FW_0(0); per cycle: BW_0, FW_1, BW_1, FW_0(next): 4 + 2 x (3 + 4 + 3 + 4).
  EXPECT_EQ(ring.trace.ops.size(), 4u + 2u * 14u);
  EXPECT_EQ(ring.prologue_ops, 4u);
  // Weights and the input once per sub-array; a0 once per iteration (sub-array 0: 3 forwards, sub-array 1: 2).
  int weights = 0, a0 = 0;
  for (const Tensor& tensor : ring.trace.tensors) {
    weights += tensor.kind == TensorKind::weight ? 1 : 0;
    a0 += tensor.name.ends_with(".a0") ? 1 : 0;
  }
  EXPECT_EQ(weights, 6);
  EXPECT_EQ(a0, 5);
  validate_trace(ring.trace, "ring");
  // Multiplexed: two ops of FW_1 before BW_0's second op.
  const planning::mu_two::RingTrace mixed = build_ring_trace({&chain, &chain}, 1, {{0, 2, 2}, {}});
  std::vector<std::string> names;
  for (std::size_t i = 4; i < 11; ++i)
    names.push_back(mixed.trace.ops[i].name);
  EXPECT_EQ(names, (std::vector<std::string>{"s0.it0.b2", "s1.it0.f0", "s1.it0.f1", "s0.it0.b1", "s0.it0.b0",
                                             "s1.it0.f2", "s1.it0.loss"}));
}

// Everything a ring holds, for comparing two builds.
nlohmann::json ring_json(const planning::mu_two::RingTrace& ring)
{
  auto origins = [](const std::vector<planning::mu_two::Origin>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const planning::mu_two::Origin& origin : list)
      out.push_back({origin.sub_array, origin.copy, origin.id});
    return out;
  };
  return {{"trace", trace_to_json(ring.trace)},
          {"op_origin", origins(ring.op_origin)},
          {"tensor_origin", origins(ring.tensor_origin)},
          {"tensor_copy", ring.tensor_copy},
          {"op_copy", ring.op_copy},
          {"prologue_ops", ring.prologue_ops},
          {"op_graph", ring.op_graph},
          {"cycle_first_op", ring.cycle_first_op},
          {"cycles", ring.cycles}};
}

TEST(MuTwoRing, ReusedStorageBuildsTheSameRing)
{
  // Sub-arrays of different sizes, so that the storage's per-sub-array tables and op lists must grow and shrink.
  const Trace small = test::make_chain(3, MB), large = test::make_chain(5, MB);
  const std::vector<const Trace*> graphs{&small, &large};
  const planning::mu_two::Placement placement{{0, 1, 3}, {}};
  using planning::mu_two::RingNames;
  for (const RingNames names : {RingNames::named, RingNames::none}) {
    const nlohmann::json fresh = ring_json(build_ring_trace(graphs, 2, placement, names));
    // Storage from a larger ring (more cycles, other order, other names) and from a smaller one.
    for (const auto& [storage_graphs, cycles] :
         {std::pair{std::vector<const Trace*>{&large, &small, &large}, 3}, std::pair{std::vector{&small}, 1}}) {
      planning::mu_two::RingTrace storage = build_ring_trace(storage_graphs, cycles, {}, RingNames::named);
      const std::size_t storage_ops = storage.trace.ops.size();
      const planning::mu_two::RingTrace reused = build_ring_trace(graphs, 2, placement, names, std::move(storage));
      EXPECT_EQ(ring_json(reused), fresh) << storage_ops << " ops of storage";
    }
  }
}

TEST(MuTwo, WithRoomForEverythingTheRingIsKeepAll)
{
  const Trace chain = test::make_chain(3, MB);
  const Plan plan = plan_with("mu-two", chain, 1ull << 34, {{"models", 2}, {"include_full_fusion", false}});
  EXPECT_EQ(plan.params["partition"], "1+1");
  EXPECT_EQ(plan.params["swaps"], 0);
  EXPECT_EQ(plan.params["recomputes"], 0);
  const RunResult run = fast_run(chain, plan);
  ASSERT_TRUE(run.metrics.feasible);
  // A cycle runs every op of both models once: 2 x (3 x 1 ms + 1 ms loss + 3 x 2 ms) plus one launch per op.
  const double launch = test::one_gpu_machine().gpus[0].kernel_launch_s;
  EXPECT_NEAR(run.metrics.steady_iteration_time_s, 2 * (0.010 + 7 * launch), 1e-9);
  ASSERT_TRUE(plan.estimate.iteration_time_s);
  EXPECT_NEAR(*plan.estimate.iteration_time_s, run.metrics.steady_iteration_time_s, 1e-9);
  EXPECT_EQ(run.metrics.iteration_times_s.size(), 3u);
  // Nothing was optimized: the ring's keep-all peak (Fig. 9d's pre-optimization peak) is the plan's.
  EXPECT_EQ(plan.params["keep_all_peak_bytes"].get<std::uint64_t>(), run.metrics.peak_device_bytes);
}

TEST(MuTwo, TheSingleSubArrayIsHftaCapuchin)
{
  const Trace chain = test::make_chain(4, MB);
  const std::uint64_t keep_all =
      TraceAnalysis(fuse_trace(chain, 2, FusionModel::efficiency, std::nullopt, "")).default_profile().peak_bytes;
  for (const std::uint64_t budget : {keep_all, keep_all - 2 * MB}) {
    const Plan mu_two = plan_with("mu-two", chain, budget, {{"models", 2}, {"partitions", "none"}});
    const Plan hfta_capuchin = plan_with("hfta-capuchin", chain, budget, {{"models", 2}});
    EXPECT_EQ(plan_to_json(mu_two)["steps"], plan_to_json(hfta_capuchin)["steps"]) << budget;
    EXPECT_EQ(mu_two.params["partition"], "2");
  }
}

TEST(MuTwo, UnderABudgetItFitsOnBothEngines)
{
  const Trace chain = test::make_chain(4, MB);
  const Plan roomy = plan_with("mu-two", chain, 1ull << 34, {{"models", 2}, {"include_full_fusion", false}});
  const RunResult keep = fast_run(chain, roomy);
  ASSERT_TRUE(keep.metrics.feasible);
  const std::uint64_t budget = keep.metrics.peak_device_bytes - MB;
  const Plan plan = plan_with("mu-two", chain, budget, {{"models", 2}, {"include_full_fusion", false}});
  EXPECT_GT(plan.params["swaps"].get<int>() + plan.params["recomputes"].get<int>(), 0);
  const test::EngineRuns runs = test::run_on_both_engines(chain, test::one_gpu_machine(), plan);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    ASSERT_TRUE(run->metrics.feasible) << (run->error ? run->error->message : "");
    EXPECT_LE(run->metrics.peak_device_bytes, budget);
  }
  test::expect_engines_agree(runs);
  // Deterministic: the same request gives the same plan.
  EXPECT_EQ(plan_to_json(plan),
            plan_to_json(plan_with("mu-two", chain, budget, {{"models", 2}, {"include_full_fusion", false}})));
}

// A long ring schedule reports its rounds through PlanRequest::progress; the plan does not depend on a listener.
TEST(MuTwo, ReportsItsRoundsToAProgressListener)
{
  const Trace chain = test::make_chain(4, MB);
  const nlohmann::json params = {{"models", 2}, {"include_full_fusion", false}};
  const std::uint64_t budget =
      fast_run(chain, plan_with("mu-two", chain, 1ull << 34, params)).metrics.peak_device_bytes - MB;
  PlanRequest request;
  request.budget_bytes = budget;
  request.params = params;
  std::vector<std::string> lines;
  request.progress = [&](const std::string& status) { lines.push_back(status); };
  const Plan plan = make_plan("mu-two", chain, test::one_gpu_machine(), request);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().rfind("ring 2x1: round 0, 0 decisions, estimated peak ", 0), 0u) << lines.front();
  EXPECT_EQ(plan_to_json(plan), plan_to_json(plan_with("mu-two", chain, budget, params)));
}

TEST(MuTwo, NoSlowerThanHftaWhenAllModelsFit)
{
  const Trace chain = test::make_chain(4, MB);
  for (int models : {1, 2, 3}) {
    const Plan mu_two = plan_with("mu-two", chain, 1ull << 34, {{"models", models}});
    const Plan hfta = plan_with("hfta", chain, 1ull << 34, {{"models", models}});
    EXPECT_LE(fast_run(chain, mu_two).metrics.steady_iteration_time_s,
              fast_run(chain, hfta).metrics.steady_iteration_time_s + 1e-12)
        << models;
  }
}

// Static memory dominates: 20 MB weights per layer, 1 MB activations. A pair of single models (a 1+1 ring) holds
// 2 x (3 x 20 MB + the 1 MB input) = 122 MB of weights and inputs; its keep-all working set peaks in b2, which reads
// g2 and a1 (a0 waits for b1) and writes g1 and dw2: 4 MB + 20 MB, 146 MB in all. The 150 MB budget holds one such
// pair, never three models' 183 MB.
Trace weight_heavy_chain() { return test::make_chain(3, MB, 0.001, "conv2d", 20 * MB); }
constexpr std::uint64_t kOnePairBudget = 150 * MB;
constexpr std::uint64_t kOnePairPeak = 2 * (3 * 20 * MB + MB) + 4 * MB + 20 * MB;

TEST(MuTwo, SequentialPairsAddTheirPeriodsAndHoldOnlyTheActivePair)
{
  const Trace chain = weight_heavy_chain();
  const Plan plan = plan_with("mu-two", chain, kOnePairBudget, {{"models", 4}, {"pair_mode", "sequential"}});
  // {4} and the pair 2+2 hold four models' weights at once; only 1+1+1+1, trained as two pairs, fits.
  EXPECT_EQ(plan.params["partition"], "1+1+1+1");
  EXPECT_EQ(plan.params["pairs"], nlohmann::json::array({"1+1", "1+1"}));
  EXPECT_EQ(plan.params["swaps"].get<int>() + plan.params["recomputes"].get<int>(), 0);
  // Each pair's period is a keep-all cycle of its two models: 2 x (3 x 1 ms + 1 ms loss + 3 x 2 ms + 7 launches).
  const double launch = test::one_gpu_machine().gpus[0].kernel_launch_s;
  const double pair_period = 2 * (0.010 + 7 * launch);
  const test::EngineRuns runs = test::run_on_both_engines(chain, test::one_gpu_machine(), plan);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    ASSERT_TRUE(run->metrics.feasible) << (run->error ? run->error->message : "");
    EXPECT_NEAR(run->metrics.steady_iteration_time_s, 2 * pair_period, 1e-9);
    EXPECT_EQ(run->metrics.iteration_times_s.size(), 3u); // cycles = 3 per pair
    EXPECT_EQ(run->metrics.peak_device_bytes, kOnePairPeak);
  }
  test::expect_engines_agree(runs);
  ASSERT_TRUE(plan.estimate.iteration_time_s);
  EXPECT_NEAR(*plan.estimate.iteration_time_s, 2 * pair_period, 1e-9);
  // Ring mode holds all four models: 244 MB of weights and inputs exceed the budget in every partition.
  EXPECT_THROW((void)plan_with("mu-two", chain, kOnePairBudget, {{"models", 4}}), Infeasible);
}

TEST(MuTwo, SequentialPairsFitMoreModelsWhenWeightsDominate)
{
  const Trace chain = weight_heavy_chain();
  // Two models fit either way (the ring 1+1 is the pair itself).
  const Plan two = plan_with("mu-two", chain, kOnePairBudget, {{"models", 2}, {"include_full_fusion", false}});
  EXPECT_EQ(fast_run(chain, two).metrics.peak_device_bytes, kOnePairPeak);
  EXPECT_THROW((void)plan_with("mu-two", chain, kOnePairBudget, {{"models", 3}}), Infeasible);
  // Three: the pair 1+1, then the third model alone (FW then BW; 61 MB + 24 MB), as many iterations as the pair's
  // cycles, so that after the pair's first cycle (which holds its prologue) every iteration is the pair's period plus
  // the lone model's.
  const Plan three = plan_with("mu-two", chain, kOnePairBudget, {{"models", 3}, {"pair_mode", "sequential"}});
  EXPECT_EQ(three.params["pairs"], nlohmann::json::array({"1+1", "1"}));
  const double launch = test::one_gpu_machine().gpus[0].kernel_launch_s;
  const test::EngineRuns runs = test::run_on_both_engines(chain, test::one_gpu_machine(), three);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    ASSERT_TRUE(run->metrics.feasible) << (run->error ? run->error->message : "");
    EXPECT_NEAR(run->metrics.steady_iteration_time_s, 3 * (0.010 + 7 * launch), 1e-9);
    ASSERT_EQ(run->metrics.iteration_times_s.size(), 3u);
    for (std::size_t i : {1u, 2u})
      EXPECT_NEAR(run->metrics.iteration_times_s[i], 3 * (0.010 + 7 * launch), 1e-9) << i;
    EXPECT_EQ(run->metrics.peak_device_bytes, kOnePairPeak);
  }
  test::expect_engines_agree(runs);
  // The models waiting their turn live on the host: three models' 180 MB of weights need more than 150 MB there.
  Machine small_host = test::one_gpu_machine();
  PlanRequest request;
  request.budget_bytes = kOnePairBudget;
  request.params = {{"models", 3}, {"pair_mode", "sequential"}};
  small_host.host.memory = 150 * MB;
  EXPECT_THROW((void)make_plan("mu-two", chain, small_host, request), Infeasible);
  small_host.host.memory = 180 * MB;
  EXPECT_NO_THROW((void)make_plan("mu-two", chain, small_host, request));
}

// A ring's floor: every sub-array's weights and inputs (never candidates) stay resident while each op holds its own
// inputs, outputs and workspace. 1+1 of the weight-heavy chain: 2 x 61 MB, and b2's g2, a1, g1 and dw2 (23 MB).
TEST(MuTwo, RefusesARingBelowItsFloorAtOnce)
{
  const Trace chain = weight_heavy_chain();
  constexpr std::uint64_t floor = 2 * (3 * 20 * MB + MB) + 23 * MB;
  const nlohmann::json params = {{"models", 2}, {"include_full_fusion", false}};
  try {
    (void)plan_with("mu-two", chain, floor - 1, params);
    ADD_FAILURE() << "planned below the floor";
  } catch (const Infeasible& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("whatever is swapped or recomputed"), std::string::npos) << message;
    EXPECT_NE(message.find("(122000000 bytes) throughout, and op 'b2' of sub-array 0 holds 21.93MiB (23000000 "
                           "bytes) more"),
              std::string::npos)
        << message;
  }
  // The loop that spends every candidate agrees: with one cycle, where the floor is not checked, it refuses too.
  nlohmann::json one_cycle = params;
  one_cycle["cycles"] = 1;
  try {
    (void)plan_with("mu-two", chain, floor - 1, one_cycle);
    ADD_FAILURE() << "one cycle planned below the floor";
  } catch (const Infeasible& error) {
    EXPECT_EQ(std::string(error.what()).find("whatever is swapped"), std::string::npos) << error.what();
  }
  // Whatever fits holds at least the floor.
  int planned = 0;
  for (const std::uint64_t budget : {floor, floor + MB, floor + 3 * MB, kOnePairPeak}) {
    try {
      const Plan plan = plan_with("mu-two", chain, budget, params);
      const RunResult run = fast_run(chain, plan);
      ASSERT_TRUE(run.metrics.feasible) << budget;
      EXPECT_GE(run.metrics.peak_device_bytes, floor) << budget;
      EXPECT_LE(run.metrics.peak_device_bytes, budget);
      ++planned;
    } catch (const Infeasible& error) {
      EXPECT_EQ(std::string(error.what()).find("whatever is swapped"), std::string::npos) << error.what();
    }
  }
  EXPECT_GE(planned, 1);
}

} // namespace
} // namespace memsim
