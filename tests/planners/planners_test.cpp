// Planner invariants checked without the simulator: structure of the emitted plans and the planners' own memory
// accounting. planners_sim_test.cpp runs the same plans through SimGrid.
#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/views.hpp"
#include "planner_test_support.hpp"
#include "test_traces.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace memsim {
namespace {

using test::one_gpu_machine;
using test::plan_with;

constexpr std::uint64_t kA = 1'000'000;

std::map<StepKind, std::size_t> count_kinds(const Plan& plan)
{
  std::map<StepKind, std::size_t> counts;
  for (const Step& step : plan.steps)
    ++counts[step.kind];
  return counts;
}

TEST(Registry, ListsTheFourBaselines)
{
  std::set<std::string> names;
  for (const PlannerInfo* info : planner_registry().all())
    names.insert(info->name);
  for (const char* name : {"keep-all", "vdnn-all", "vdnn-conv", "checkpoint-sqrt", "superneurons"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST(Registry, UnknownPlannerListsValidNames)
{
  try {
    (void)planner_registry().get("nope");
    FAIL();
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("unknown planner 'nope' (valid: "), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("keep-all"), std::string::npos);
  }
}

TEST(Registry, ParametersAreTypedRangedAndDefaulted)
{
  const auto& registry = planner_registry();
  const PlannerInfo& vdnn = registry.get("vdnn-all");
  const nlohmann::json defaults{
      {"lookahead", 1}, {"sync", "memory"}, {"offload_start", "after_last_use"}, {"move_input", false}};
  EXPECT_EQ(registry.complete_params(vdnn, nlohmann::json::object()), defaults);
  nlohmann::json three = defaults;
  three["lookahead"] = 3;
  EXPECT_EQ(registry.complete_params(vdnn, {{"lookahead", 3}}), three);
  try {
    (void)registry.complete_params(vdnn, {{"look", 3}});
    FAIL();
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "unknown parameter 'look' for planner 'vdnn-all' (valid: lookahead, sync, offload_start, "
                 "move_input)");
  }
  EXPECT_THROW((void)registry.complete_params(vdnn, {{"lookahead", -1}}), InputError);
  EXPECT_THROW((void)registry.complete_params(vdnn, {{"lookahead", 1.5}}), InputError);
  EXPECT_THROW((void)registry.complete_params(vdnn, {{"sync", "op"}}), InputError);
  EXPECT_EQ(parse_param_assignments(vdnn, {"lookahead=2"}), (nlohmann::json{{"lookahead", 2}}));
  EXPECT_THROW((void)parse_param_assignments(vdnn, {"lookahead=two"}), InputError);
  EXPECT_THROW((void)parse_param_assignments(vdnn, {"lookahead"}), InputError);
}

TEST(MakePlan, FillsHeaderAndRejectsBudgetAboveTheGpu)
{
  const Trace trace = test::make_chain(4, kA);
  Plan plan = plan_with("keep-all", trace, 0);
  EXPECT_EQ(plan.budget_bytes, 1ull << 34); // 0 means the GPU's memory
  EXPECT_EQ(plan.planner, "keep-all");
  EXPECT_EQ(plan.trace, trace.name);
  EXPECT_EQ(plan.machine, "one-gpu");
  PlanRequest request;
  request.budget_bytes = (1ull << 34) + 1;
  EXPECT_THROW((void)make_plan("keep-all", trace, one_gpu_machine(), request), InputError);
}

TEST(KeepAll, ComputesEveryOpOnceAndFreesAtTheDefaultPoints)
{
  const Trace trace = test::make_chain(4, kA);
  const Plan plan = plan_with("keep-all", trace, 0);
  auto counts = count_kinds(plan);
  EXPECT_EQ(counts[StepKind::compute], trace.ops.size());
  EXPECT_EQ(counts[StepKind::recompute], 0u);
  EXPECT_EQ(counts[StepKind::offload], 0u);
  // Every produced tensor except the 4 weight gradients is freed once.
  std::size_t produced = 0;
  for (const Op& op : trace.ops)
    produced += op.outputs.size();
  EXPECT_EQ(counts[StepKind::free], produced - 4);
  EXPECT_EQ(plan.estimate.peak_bytes, default_memory_profile(trace).peak_bytes);
}

TEST(KeepAll, SaysInfeasibleBelowItsPeak)
{
  const Trace trace = test::make_chain(3, kA);
  const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
  EXPECT_NO_THROW((void)plan_with("keep-all", trace, peak));
  try {
    (void)plan_with("keep-all", trace, peak - 1);
    FAIL();
  } catch (const Infeasible& error) {
    EXPECT_NE(std::string(error.what()).find("keep-all needs"), std::string::npos) << error.what();
  }
}

TEST(VdnnAll, OffloadsEveryActivationTheBackwardReadsAndPrefetchesItBeforeUse)
{
  const Trace trace = test::make_chain(6, kA);
  const Plan plan = plan_with("vdnn-all", trace, 0);
  auto counts = count_kinds(plan);
  // a0..a4 are read by the backward (a5 only by the loss).
  EXPECT_EQ(counts[StepKind::offload], 5u);
  EXPECT_EQ(counts[StepKind::prefetch], 5u);
  EXPECT_EQ(counts[StepKind::compute], trace.ops.size());
  // Every backward compute reading a moved tensor depends on that tensor's prefetch.
  std::map<TensorId, StepId> prefetch_of;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::prefetch)
      prefetch_of[*step.tensor] = step.id;
    if (step.kind == StepKind::compute && trace.op(*step.op).phase == Phase::backward)
      for (TensorId input : trace.op(*step.op).inputs) {
        if (prefetch_of.count(input)) {
          EXPECT_NE(std::find(step.deps.begin(), step.deps.end(), prefetch_of[input]), step.deps.end());
        }
      }
  }
}

TEST(VdnnAll, FitsBelowKeepAllAndSaysWhenItCannot)
{
  const Trace trace = test::make_chain(8, kA);
  const std::uint64_t keep_all_peak = default_memory_profile(trace).peak_bytes;
  const Plan plan = plan_with("vdnn-all", trace, keep_all_peak / 2);
  ASSERT_TRUE(plan.estimate.peak_bytes);
  EXPECT_LE(*plan.estimate.peak_bytes, keep_all_peak / 2);
  EXPECT_THROW((void)plan_with("vdnn-all", trace, 3 * kA), Infeasible);
}

TEST(VdnnConv, MovesOnlyConvolutionInputs)
{
  const Trace linear = test::make_chain(5, kA, 0.001, "linear");
  EXPECT_THROW((void)plan_with("vdnn-conv", linear, 0), Infeasible); // not applicable (baseline_variants_test)
  const Trace conv = test::make_chain(5, kA, 0.001, "conv2d");
  // Inputs of convs that the backward reads: a0..a3 (x is resident and never moved).
  EXPECT_EQ(count_kinds(plan_with("vdnn-conv", conv, 0))[StepKind::offload], 4u);
}

TEST(CheckpointSqrt, RecomputesAllButTheLastSegment)
{
  const Trace trace = test::make_chain(9, kA);
  const Plan plan = plan_with("checkpoint-sqrt", trace, 0);
  auto counts = count_kinds(plan);
  // 3 segments of 3 layers; segment inputs a2 and a5 are kept. Segments 0 and 1 recompute their 3 forward ops
  // except the one producing the kept input: 2 + 2.
  EXPECT_EQ(counts[StepKind::recompute], 4u);
  EXPECT_EQ(counts[StepKind::compute], trace.ops.size());
  const std::uint64_t keep_all_peak = default_memory_profile(trace).peak_bytes;
  ASSERT_TRUE(plan.estimate.peak_bytes);
  EXPECT_LT(*plan.estimate.peak_bytes, keep_all_peak);
  EXPECT_NO_THROW((void)plan_with("checkpoint-sqrt", trace, *plan.estimate.peak_bytes));
  EXPECT_THROW((void)plan_with("checkpoint-sqrt", trace, *plan.estimate.peak_bytes - 1), Infeasible);
}

TEST(CheckpointSqrt, SegmentsParameter)
{
  const Trace trace = test::make_chain(9, kA);
  // One segment: nothing is recomputed, like keep-all.
  EXPECT_EQ(count_kinds(plan_with("checkpoint-sqrt", trace, 0, {{"segments", 1}}))[StepKind::recompute], 0u);
  // Nine segments of one layer: each layer's output is kept, so there is nothing to recompute either.
  EXPECT_EQ(count_kinds(plan_with("checkpoint-sqrt", trace, 0, {{"segments", 9}}))[StepKind::recompute], 0u);
}

// As a recorded batch norm: each forward op also writes small statistics that its backward reads. The op producing a
// kept segment input is not recomputed; its statistics stay resident with the input.
TEST(CheckpointSqrt, KeepsEveryOutputOfTheOpProducingASegmentInput)
{
  Trace trace = test::make_chain(9, kA);
  std::vector<TensorId> stats;
  for (Op& op : trace.ops) {
    if (op.phase != Phase::forward)
      continue;
    const auto id = static_cast<TensorId>(trace.tensors.size());
    trace.tensors.push_back(Tensor{id, fmt::format("stats{}", op.layer), 64, TensorKind::activation, {}, {}, {}});
    op.outputs.push_back(id);
    stats.push_back(id);
  }
  for (Op& op : trace.ops)
    if (op.phase == Phase::backward)
      op.inputs.push_back(stats[static_cast<std::size_t>(op.layer)]);
  validate_trace(trace, trace.name);
  const Plan plan = plan_with("checkpoint-sqrt", trace, 0);
  EXPECT_EQ(count_kinds(plan)[StepKind::recompute], 4u); // as in RecomputesAllButTheLastSegment
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::recompute) {
      EXPECT_NE(trace.op(*step.op).name, "f2") << "f2 produces the kept segment input a2";
    }
  }
}

TEST(CheckpointSqrt, RefusesANonChain)
{
  Trace trace = test::make_chain(4, kA);
  trace.ops[3].inputs.push_back(2);
  EXPECT_THROW((void)plan_with("checkpoint-sqrt", trace, 0), Infeasible);
}

TEST(Planners, Deterministic)
{
  const Trace trace = test::make_chain(7, kA);
  for (const char* name : {"keep-all", "vdnn-all", "vdnn-conv", "checkpoint-sqrt", "superneurons"})
    EXPECT_EQ(plan_to_json(plan_with(name, trace, 0)).dump(), plan_to_json(plan_with(name, trace, 0)).dump()) << name;
}

} // namespace
} // namespace memsim
