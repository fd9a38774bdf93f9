// The `fusion` parameter of the planners that fuse copies of the model (hfta, hfta-capuchin, mu-two): their fused
// ops are timed as fuse_trace times them under that model (tests/hwmodels/fuse_test.cpp). On a two-layer chain whose
// first forward op and an update op do `half` flops (the efficiency curve's half-work), two models take, per op:
// efficiency: (2 half + half) / (half + half) = 1.5 x for both sized ops; batch-proxy: the forward op rescaled to
// batch 2 on the same curve (1.5 x) but the update 2 x (μ-TWO's update rule); ops without work: 2 x under both.
// An unknown fusion model is refused by the parameter check, measured (a directory of recordings) by the planners.
#include "planner_test_support.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/efficiency.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace memsim {
namespace {

using ::testing::HasSubstr;

constexpr double kOpS = 0.001; // make_chain's forward op time; its backward ops take 2 x

double half_work() { return default_efficiency().gemm.half; }

// make_chain(2) (x, w0, a0, w1, a1, g1, dw1, g0, dw0; f0 f1 loss b1 b0) with f0 a GEMM of `half` flops and an SGD
// step u0 of w0 (also `half` flops), on "test-gpu" (no preset: the default curves).
Trace sized_chain()
{
  Trace trace = test::make_chain(2, 1000000, kOpS, "linear");
  trace.ops[0].flops = half_work();
  Op update;
  update.id = static_cast<OpId>(trace.ops.size());
  update.name = "u0";
  update.type = "linear";
  update.phase = Phase::update;
  update.inputs = {1, 8}; // w0, dw0
  update.time_s = kOpS;
  update.flops = half_work();
  trace.ops.push_back(update);
  validate_trace(trace, trace.name);
  return trace;
}

// Two models' op times by op name under each fusion model, worked out above.
std::map<std::string, double> two_model_times(const std::string& fusion)
{
  return {{"f0", 1.5 * kOpS},   {"f1", 2 * kOpS},     {"loss", 2 * kOpS},
          {"b1", 2 * 2 * kOpS}, {"b0", 2 * 2 * kOpS}, {"u0", (fusion == "batch-proxy" ? 2 : 1.5) * kOpS}};
}

Plan plan_fused(const std::string& planner, const nlohmann::json& params)
{
  return test::plan_with(planner, sized_chain(), 1ull << 34, params);
}

TEST(FusionParam, HalfWorkIsPositiveSoTheModelsDiffer)
{
  // The worked values need a small-size penalty: with half = 0 efficiency would give the update 2 x as well.
  EXPECT_GT(half_work(), 0);
}

// hfta (N <= k*: one fused block), hfta-capuchin and mu-two's single sub-array {N} carry the fused graph in the
// plan's extras: its ops, in trace order, at the fused times.
TEST(FusionParam, FusedOpsAreTimedByTheChosenModel)
{
  const Trace single = sized_chain();
  for (const char* planner : {"hfta", "hfta-capuchin", "mu-two"}) {
    for (const char* fusion : {"efficiency", "batch-proxy"}) {
      nlohmann::json params = {{"models", 2}, {"fusion", fusion}};
      if (std::string(planner) == "mu-two")
        params["partitions"] = "none";
      const Plan plan = plan_fused(planner, params);
      EXPECT_EQ(plan.params["fusion"], fusion);
      EXPECT_EQ(plan.params["partition"], "2") << planner;
      ASSERT_EQ(plan.extra_ops.size(), single.ops.size()) << planner;
      const std::map<std::string, double> expected = two_model_times(fusion);
      for (const Op& op : plan.extra_ops)
        EXPECT_NEAR(op.time_s, expected.at(op.name), 1e-15) << planner << " " << fusion << " " << op.name;
      // Both models fuse the bytes alike: every tensor x 2.
      ASSERT_EQ(plan.extra_tensors.size(), single.tensors.size());
      for (std::size_t i = 0; i < single.tensors.size(); ++i)
        EXPECT_EQ(plan.extra_tensors[i].bytes, 2 * single.tensors[i].bytes) << planner;
    }
  }
}

// mu-two's rings fuse their sub-arrays with the same model: in the winning partition of three models into two or
// more sub-arrays, every copy of u0 in a sub-array of two is 1.5 x (efficiency) or 2 x (batch-proxy) the single
// model's, in a sub-array of one 1 x.
TEST(FusionParam, MuTwoRingsFuseTheirSubArraysByTheChosenModel)
{
  for (const char* fusion : {"efficiency", "batch-proxy"}) {
    const Plan plan =
        plan_fused("mu-two",
                   {{"models", 3}, {"fusion", fusion}, {"partitions", "all"}, {"include_full_fusion", false}});
    ASSERT_EQ(plan.params["partition"], "2+1") << "the ring must hold a fused sub-array for this check";
    const double fused_update = two_model_times(fusion).at("u0");
    int updates = 0;
    for (const Op& op : plan.extra_ops) {
      if (op.name.ends_with(".u0")) {
        ++updates;
        EXPECT_NEAR(op.time_s, op.name.starts_with("s0.") ? fused_update : kOpS, 1e-15) << fusion << " " << op.name;
      }
    }
    EXPECT_GT(updates, 0);
  }
}

// The parameter's default is efficiency: the same plan as without it.
TEST(FusionParam, DefaultIsEfficiency)
{
  for (const char* planner : {"hfta", "hfta-capuchin", "mu-two"}) {
    const Plan unset = plan_fused(planner, {{"models", 2}});
    const Plan efficiency = plan_fused(planner, {{"models", 2}, {"fusion", "efficiency"}});
    EXPECT_EQ(unset.params["fusion"], "efficiency");
    EXPECT_EQ(plan_to_json(unset).dump(), plan_to_json(efficiency).dump()) << planner;
  }
}

std::string plan_error(const std::string& planner, const std::string& fusion)
{
  try {
    (void)plan_fused(planner, {{"models", 2}, {"fusion", fusion}});
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(FusionParam, UnknownAndMeasuredModelsAreRefused)
{
  for (const char* planner : {"hfta", "hfta-capuchin", "mu-two"}) {
    EXPECT_THAT(plan_error(planner, "linear"),
                HasSubstr(fmt::format("parameter 'fusion' of planner '{}': 'linear' is not one of efficiency, "
                                      "batch-proxy, measured",
                                      planner)));
    const std::string measured = plan_error(planner, "measured");
    EXPECT_THAT(measured, HasSubstr(fmt::format("parameter 'fusion' of planner '{}': measured fusion reads recorded "
                                                "fused traces from a directory, which a planner does not have",
                                                planner)));
  }
}

// batch-proxy rescales to batch k*b: a trace that does not say its batch is refused, naming where.
TEST(FusionParam, BatchProxyNeedsTheTracesBatch)
{
  Trace trace = sized_chain();
  trace.source.batch = 0;
  for (const char* planner : {"hfta", "hfta-capuchin", "mu-two"}) {
    try {
      (void)test::plan_with(planner, trace, 1ull << 34, {{"models", 2}, {"fusion", "batch-proxy"}});
      ADD_FAILURE() << planner << ": no error";
    } catch (const InputError& error) {
      EXPECT_EQ(error.where(), "chain2: at /source/batch") << planner;
    }
  }
}

} // namespace
} // namespace memsim
