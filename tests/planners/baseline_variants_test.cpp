// The TSPLIT paper's baselines (issue 10, spec tsplit.md section 7): superneurons, vDNN's sync/offload_start/
// move_input options and checkpoint-sqrt mode=budget. Each with a small case worked out by hand (which tensors move
// or are recomputed, the peak, the time on the fast engine), then feasibility at falling budgets, the not-applicable
// case and determinism.
#include "planner_test_support.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/generators.hpp"

#include <gtest/gtest.h>

#include <map>

namespace memsim {
namespace {

using test::one_gpu_machine;
using test::plan_with;

constexpr std::uint64_t kA = 1'000'000; // activation bytes: 1 ms over the 1 GB/s link
constexpr std::uint64_t kW = 1000;      // weight bytes

RunResult run_fast(const Trace& trace, const Plan& plan)
{
  SimOptions options;
  options.engine = EngineKind::fast;
  return simulate(trace, one_gpu_machine(), plan, options);
}

// Names of the ops (recompute) or tensors (offload, prefetch) of the steps of `kind`, in plan order.
std::vector<std::string> named(const Plan& plan, const Trace& trace, StepKind kind)
{
  std::vector<std::string> names;
  for (const Step& step : plan.steps)
    if (step.kind == kind)
      names.push_back(step.op ? trace.op(*step.op).name : trace.tensor(*step.tensor).name);
  return names;
}

double start_of(const RunResult& result, const std::string& label)
{
  for (const StepRecord& record : result.timeline)
    if (record.label == label && (record.kind == StepKind::compute || record.kind == StepKind::recompute))
      return record.start_s;
  ADD_FAILURE() << "no step " << label;
  return -1;
}

// make_chain with conv2d layers at even indices and relu layers at odd ones.
Trace conv_relu_chain(int layers)
{
  Trace trace = test::make_chain(layers, kA, 0.001, "conv2d", kW);
  for (Op& op : trace.ops)
    if (op.phase != Phase::loss) {
      const std::string type = op.layer % 2 == 0 ? "conv2d" : "relu";
      op.type = op.phase == Phase::forward ? type : type + "_backward";
    }
  return trace;
}

// f0 conv -> a0, f1 relu -> a1, f2 conv -> a2, f3 relu -> a3, loss; b_l reads a_{l-1}. The conv outputs a0 and a2 are
// offloaded after their last forward read (f1, f3); the relu output a1 that b2 reads is recomputed from a0 just
// before b2. With room to spare nothing is evicted from the cache, so both backward reads hit it: no prefetch.
// Peak (R0 = x + 4 weights = A + 4W): at b2, x, a0, a1, g2 and the new g1 (A each) and dw3, dw2: 5A + 6W.
// Time: 4 + 1 (loss) + 1 (recompute) ms of 1 ms ops and 4 backward ops of 2 ms, the offloads (1 ms) hidden: 14 ms.
TEST(SuperNeurons, SwapsConvOutputsThroughTheCacheAndRecomputesTheRest)
{
  const Trace trace = conv_relu_chain(4);
  const Plan plan = plan_with("superneurons", trace, 0);
  EXPECT_EQ(named(plan, trace, StepKind::offload), (std::vector<std::string>{"a0", "a2"}));
  EXPECT_TRUE(named(plan, trace, StepKind::prefetch).empty());
  EXPECT_EQ(named(plan, trace, StepKind::recompute), (std::vector<std::string>{"f1"}));
  ASSERT_TRUE(plan.estimate.peak_bytes);
  EXPECT_EQ(*plan.estimate.peak_bytes, 5 * kA + 6 * kW);
  const RunResult result = run_fast(trace, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  EXPECT_EQ(result.metrics.peak_device_bytes, 5 * kA + 6 * kW);
  EXPECT_NEAR(result.metrics.iteration_time_s, 0.014, 1e-12);
  // The peak is the budget it needs: one byte less and b2 does not fit.
  EXPECT_NO_THROW((void)plan_with("superneurons", trace, 5 * kA + 6 * kW));
  EXPECT_THROW((void)plan_with("superneurons", trace, 5 * kA + 6 * kW - 1), Infeasible);
}

// Six layers, conv outputs a0, a2, a4; the relu outputs the backward reads, a1 (b2) and a3 (b4), are recomputed just
// before their reader. f5 needs 2A of workspace. Roomy, every conv output hits the cache and the peak is f5's: x, a0,
// a2, a4, a5 and the workspace, 7A + 6W. At 6A + 8W (what b4 needs: x, a0, a2, a3, g4, g3 and 8 weights or
// gradients) f5 no longer fits, so the cache evicts its least recently offloaded copy, a0 (after its offload). a2 and
// a4 hit; a0 is prefetched one conv ahead: when a2's first backward reader (the recomputation of f3) is next, after
// b5, where the account has room (b4's peak is then 6A + 8W again, with a0 back).
// Time: 6 + 1 + 2 recomputations of 1 ms and 6 backward ops of 2 ms = 21 ms; the transfers (1 ms) are hidden.
TEST(SuperNeurons, EvictsTheLeastRecentlyOffloadedCopyAndPrefetchesItBack)
{
  Trace trace = conv_relu_chain(6);
  for (Op& op : trace.ops)
    if (op.name == "f5")
      op.workspace_bytes = 2 * kA;
  const Plan roomy = plan_with("superneurons", trace, 0);
  EXPECT_EQ(named(roomy, trace, StepKind::recompute), (std::vector<std::string>{"f3", "f1"}));
  EXPECT_TRUE(named(roomy, trace, StepKind::prefetch).empty());
  EXPECT_EQ(*roomy.estimate.peak_bytes, 7 * kA + 6 * kW);
  const std::uint64_t budget = 6 * kA + 8 * kW;
  const Plan plan = plan_with("superneurons", trace, budget);
  EXPECT_EQ(named(plan, trace, StepKind::offload), (std::vector<std::string>{"a0", "a2", "a4"}));
  EXPECT_EQ(named(plan, trace, StepKind::prefetch), (std::vector<std::string>{"a0"}));
  EXPECT_EQ(named(plan, trace, StepKind::recompute), (std::vector<std::string>{"f3", "f1"}));
  EXPECT_EQ(*plan.estimate.peak_bytes, 6 * kA + 8 * kW);
  const RunResult result = run_fast(trace, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  EXPECT_EQ(result.metrics.peak_device_bytes, 6 * kA + 8 * kW);
  EXPECT_EQ(result.metrics.h2d_bytes, kA);
  EXPECT_EQ(result.metrics.d2h_bytes, 3 * kA);
  EXPECT_NEAR(result.metrics.iteration_time_s, 0.021, 1e-12);
  EXPECT_NEAR(start_of(result, "b4"), 0.010, 1e-12);
}

// The same trace at 5A + 10W (R0 + 4A + 4W), what b2 needs (x, a0, a1, g2, the new g1, 10 weights or gradients). An
// early prefetch must leave room for what the entries before its consumer hold at once: prefetching a0 right after
// b5 would fit beside the largest single allocation after it (b4's A + W) but not beside the recomputed a3 that b4
// still needs (b4 would need R0 + 5A + 2W). So a0 comes back after b4, and the plan fits.
TEST(SuperNeurons, AnEarlyPrefetchLeavesRoomForWhatAccumulatesBeforeItsConsumer)
{
  Trace trace = conv_relu_chain(6);
  for (Op& op : trace.ops)
    if (op.name == "f5")
      op.workspace_bytes = 2 * kA;
  const std::uint64_t budget = 5 * kA + 10 * kW;
  const Plan plan = plan_with("superneurons", trace, budget);
  ASSERT_TRUE(plan.estimate.peak_bytes);
  EXPECT_EQ(*plan.estimate.peak_bytes, budget);
  StepId b4 = -1;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::compute && trace.op(*step.op).name == "b4")
      b4 = step.id;
    if (step.kind == StepKind::prefetch && trace.tensor(*step.tensor).name == "a0") {
      EXPECT_GT(step.id, b4) << "a0 is prefetched after b4";
      EXPECT_GE(b4, 0);
    }
  }
  const RunResult result = run_fast(trace, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  EXPECT_LE(result.metrics.peak_device_bytes, budget);
}

TEST(SuperNeurons, RecomputeModes)
{
  const Trace trace = conv_relu_chain(6);
  // Each relu output the backward reads is recomputed once in every mode here (one reader each); speed and
  // cost-aware keep it to its last read, which is the same op.
  for (const char* mode : {"memory", "speed", "cost-aware"}) {
    const Plan plan = plan_with("superneurons", trace, 0, {{"recompute_mode", mode}});
    EXPECT_EQ(named(plan, trace, StepKind::recompute), (std::vector<std::string>{"f3", "f1"})) << mode;
    EXPECT_TRUE(run_fast(trace, plan).metrics.feasible) << mode;
  }
  // With every layer a relu but the first, memory-centric recomputes the chain from a0 for each backward read,
  // speed-centric once: b5 reads a4 (f1..f4), b4 a3 (f1..f3), b3 a2, b2 a1.
  Trace relus = conv_relu_chain(6);
  for (Op& op : relus.ops)
    if (op.layer > 0 && op.phase != Phase::loss)
      op.type = op.phase == Phase::forward ? "relu" : "relu_backward";
  EXPECT_EQ(
      named(plan_with("superneurons", relus, 0, {{"recompute_mode", "memory"}}), relus, StepKind::recompute).size(),
      4u + 3u + 2u + 1u);
  EXPECT_EQ(named(plan_with("superneurons", relus, 0, {{"recompute_mode", "speed"}}), relus, StepKind::recompute),
            (std::vector<std::string>{"f1", "f2", "f3", "f4"}));
}

TEST(NotApplicable, VdnnConvAndSuperNeuronsNeedConvolutions)
{
  const Trace linear = test::make_chain(4, kA, 0.001, "linear");
  for (const char* planner : {"vdnn-conv", "superneurons"}) {
    try {
      (void)plan_with(planner, linear, 0);
      ADD_FAILURE() << planner;
    } catch (const Infeasible& error) {
      EXPECT_EQ(std::string(error.what()), std::string(planner) + " is not applicable: the model has no convolutions");
    }
  }
}

// vdnn-all on make_chain(4) with 3 ms offloads (A = 3 MB) against 2 ms forward and 4 ms backward ops. a0, a1, a2 are
// moved (a3 is read only by the loss). memory sync: f0 [0,2] f1 [2,4] f2 [4,6] f3 [6,8] loss [8,10], offloads on
// d2h a0 [4,7] a1 [7,10] a2 [10,13]. sync=layer: every op waits for the transfers that ran with the op before it, so
// f3 waits for a0's offload (f3 [7,9]) and the loss for a1's (loss [10,12]). Both end at 32 ms: the backward waits for
// the prefetches (a2 [13,16], a1 [16,19], then a0 [20,23] after b3 [16,20]; b2 [20,24], b1 [24,28], b0 [28,32]).
TEST(VdnnSync, LayerSyncMakesEachOpWaitForThePreviousOpsTransfers)
{
  const Trace trace = test::make_chain(4, 3 * kA, 0.002, "conv2d", kW);
  const Plan memory = plan_with("vdnn-all", trace, 0);
  const Plan layer = plan_with("vdnn-all", trace, 0, {{"sync", "layer"}});
  EXPECT_EQ(named(layer, trace, StepKind::offload), (std::vector<std::string>{"a0", "a1", "a2"}));
  EXPECT_EQ(named(layer, trace, StepKind::prefetch), (std::vector<std::string>{"a2", "a1", "a0"}));
  const RunResult free_running = run_fast(trace, memory);
  const RunResult synced = run_fast(trace, layer);
  ASSERT_TRUE(free_running.metrics.feasible && synced.metrics.feasible);
  EXPECT_NEAR(start_of(free_running, "f3"), 0.006, 1e-12);
  EXPECT_NEAR(start_of(synced, "f3"), 0.007, 1e-12);
  EXPECT_NEAR(start_of(free_running, "loss"), 0.008, 1e-12);
  EXPECT_NEAR(start_of(synced, "loss"), 0.010, 1e-12);
  EXPECT_NEAR(start_of(synced, "b3"), 0.016, 1e-12);
  EXPECT_NEAR(free_running.metrics.iteration_time_s, 0.032, 1e-12);
  EXPECT_NEAR(synced.metrics.iteration_time_s, 0.032, 1e-12);
  // The account frees a copy once an op has waited for its offload: the synchronised plan needs less memory.
  // Peak without sync, at b3: x, a0, a1, a2 (the account still counts offloaded copies no compute waited for), g3 and
  // the new g2 (3A each), 4 weights and dw3.
  ASSERT_TRUE(memory.estimate.peak_bytes && layer.estimate.peak_bytes);
  EXPECT_EQ(*memory.estimate.peak_bytes, 6 * 3 * kA + 5 * kW);
  EXPECT_LT(*layer.estimate.peak_bytes, *memory.estimate.peak_bytes);
  EXPECT_LE(synced.metrics.peak_device_bytes, *layer.estimate.peak_bytes);
}

// offload_start=consumer_start starts a0's offload with f1 (t = 2 ms), not after it; move_input also moves x, read
// by f0 and b0.
TEST(VdnnOptions, OffloadStartAndMoveInput)
{
  const Trace trace = test::make_chain(4, 3 * kA, 0.002, "conv2d", kW);
  const Plan plan = plan_with("vdnn-all", trace, 0, {{"offload_start", "consumer_start"}, {"move_input", true}});
  EXPECT_EQ(named(plan, trace, StepKind::offload), (std::vector<std::string>{"x", "a0", "a1", "a2"}));
  EXPECT_EQ(named(plan, trace, StepKind::prefetch), (std::vector<std::string>{"a2", "a1", "a0", "x"}));
  const RunResult result = run_fast(trace, plan);
  ASSERT_TRUE(result.metrics.feasible) << result.error->message;
  std::map<std::string, double> offload_start;
  for (const StepRecord& record : result.timeline)
    if (record.kind == StepKind::offload)
      offload_start[record.label] = record.start_s;
  EXPECT_NEAR(offload_start["x"], 0.0, 1e-12);    // with f0
  EXPECT_NEAR(offload_start["a0"], 0.003, 1e-12); // with f1 (2 ms), after x's offload on the d2h stream (3 ms)
}

// make_chain(6): forward outputs a0..a5 of A bytes each. Pass 1 (B = 0) makes every op a checkpoint: x = 6A, y = A,
// so B = sqrt(6) A = 2.45A. Pass 2: a0 + a1 + a2 = 3A > B: f2 is a checkpoint; likewise f5. Dropped: f0, f1, f3, f4.
// Speed-centric: b5 reads a4, recomputed with a3 (f3, f4); b4 reuses a3; b2 reads a1 (f0, f1); b1 reuses a0. Time:
// 6 + 1 + 4 recomputations of 1 ms and 6 backward ops of 2 ms = 23 ms. Peak at b5: x, a2, a3, a4, g5 and the new g4
// (A each) and 7 weights or gradients: 6A + 7W.
// Memory-centric: b4 and b1 recompute again (f3, f0): 25 ms; a3 and a0 die after their recomputed reader, so the peak
// is at b4: x, a2, a3, g4, g3 and 8 weights or gradients: 5A + 8W.
TEST(CheckpointBudget, ChensGreedyWithBudgetSqrtXY)
{
  const Trace trace = test::make_chain(6, kA, 0.001, "conv2d", kW);
  const Plan speed = plan_with("checkpoint-sqrt", trace, 0, {{"mode", "budget"}, {"recompute_mode", "speed"}});
  EXPECT_EQ(named(speed, trace, StepKind::recompute), (std::vector<std::string>{"f3", "f4", "f0", "f1"}));
  ASSERT_TRUE(speed.estimate.peak_bytes);
  EXPECT_EQ(*speed.estimate.peak_bytes, 6 * kA + 7 * kW);
  const RunResult speed_run = run_fast(trace, speed);
  ASSERT_TRUE(speed_run.metrics.feasible);
  EXPECT_EQ(speed_run.metrics.peak_device_bytes, 6 * kA + 7 * kW);
  EXPECT_NEAR(speed_run.metrics.iteration_time_s, 0.023, 1e-12);

  const Plan memory = plan_with("checkpoint-sqrt", trace, 0, {{"mode", "budget"}, {"recompute_mode", "memory"}});
  EXPECT_EQ(named(memory, trace, StepKind::recompute), (std::vector<std::string>{"f3", "f4", "f3", "f0", "f1", "f0"}));
  ASSERT_TRUE(memory.estimate.peak_bytes);
  EXPECT_EQ(*memory.estimate.peak_bytes, 5 * kA + 8 * kW);
  const RunResult memory_run = run_fast(trace, memory);
  ASSERT_TRUE(memory_run.metrics.feasible);
  EXPECT_EQ(memory_run.metrics.peak_device_bytes, 5 * kA + 8 * kW);
  EXPECT_NEAR(memory_run.metrics.iteration_time_s, 0.025, 1e-12);

  EXPECT_NO_THROW((void)plan_with("checkpoint-sqrt", trace, 5 * kA + 8 * kW,
                                  {{"mode", "budget"}, {"recompute_mode", "memory"}}));
  EXPECT_THROW((void)plan_with("checkpoint-sqrt", trace, 5 * kA + 8 * kW - 1,
                               {{"mode", "budget"}, {"recompute_mode", "memory"}}),
               Infeasible);
}

Trace small_cnn()
{
  CnnSpec spec;
  spec.depth = 8;
  spec.batch = 32;
  spec.image = 64;
  spec.channel_scale = 0.5;
  return generate_cnn(spec, Roofline{14e12, 900e9, 5e-6, "test-gpu"});
}

struct Variant {
  std::string planner;
  nlohmann::json params;
};

std::vector<Variant> variants()
{
  return {{"superneurons", {{"recompute_mode", "memory"}}},
          {"superneurons", {{"recompute_mode", "speed"}}},
          {"superneurons", {{"recompute_mode", "cost-aware"}}},
          {"vdnn-all", {{"sync", "layer"}}},
          {"vdnn-conv", {{"sync", "layer"}, {"offload_start", "consumer_start"}}},
          {"vdnn-all", {{"offload_start", "consumer_start"}, {"move_input", true}}},
          {"checkpoint-sqrt", {{"mode", "budget"}, {"recompute_mode", "speed"}}},
          {"checkpoint-sqrt", {{"mode", "budget"}, {"recompute_mode", "memory"}}}};
}

// DESIGN rule: every plan a planner makes simulates feasibly within its budget, or the planner says infeasible.
TEST(BaselineVariants, EveryPlanSimulatesFeasibleAtItsBudget)
{
  for (const Trace& trace : {small_cnn(), conv_relu_chain(8)}) {
    const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
    for (const Variant& variant : variants()) {
      int planned = 0;
      for (double fraction : {1.0, 0.8, 0.6, 0.5, 0.4, 0.3}) {
        const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
        Plan plan;
        try {
          plan = plan_with(variant.planner, trace, budget, variant.params);
        } catch (const Infeasible&) {
          continue;
        }
        ++planned;
        const RunResult result = run_fast(trace, plan);
        const std::string what = variant.planner + " " + variant.params.dump() + " at " + std::to_string(fraction);
        EXPECT_TRUE(result.metrics.feasible) << what << ": " << (result.error ? result.error->message : "");
        EXPECT_LE(result.metrics.peak_device_bytes, budget) << what;
        ASSERT_TRUE(plan.estimate.peak_bytes);
        EXPECT_LE(result.metrics.peak_device_bytes, *plan.estimate.peak_bytes) << what;
      }
      EXPECT_GE(planned, 1) << variant.planner << " " << variant.params.dump() << " on " << trace.name;
    }
  }
}

TEST(BaselineVariants, Deterministic)
{
  const Trace trace = small_cnn();
  const std::uint64_t budget = default_memory_profile(trace).peak_bytes;
  for (const Variant& variant : variants())
    EXPECT_EQ(plan_to_json(plan_with(variant.planner, trace, budget, variant.params)).dump(),
              plan_to_json(plan_with(variant.planner, trace, budget, variant.params)).dump())
        << variant.planner;
}

} // namespace
} // namespace memsim
