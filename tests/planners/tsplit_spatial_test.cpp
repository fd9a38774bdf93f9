// tsplit's spatial dimension (issue 10: the spec's roles table, H of NCHW feature maps). A conv or pool over a band
// of output rows also reads halo rows of the neighbouring bands; the planner takes the halo at part granularity
// (micro-op u reads input parts u-1, u, u+1), so an input part is freed one micro-op later than under batch.
// Checked: Eq. 5 with the halo worked by hand against the simulated peak on both engines, the pipeline stall of a
// spatial split+swap, which ops and tensors may split spatially, and the planner's invariants on shaped CNN traces.
#include "planner_test_support.hpp"
#include "simulate_in_child.hpp"
#include "trace_builder.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace memsim {
namespace {

using Shape = std::vector<std::int64_t>;

constexpr std::uint64_t kUnit = 3 << 20; // 786,432 fp32 values: 12 rows of 65,536

// One GPU with room for everything (the planner's budget is what binds) behind a host link of `bandwidth`.
Machine machine(double bandwidth, double latency = 0) { return test::one_gpu_machine(1ull << 40, bandwidth, latency); }

Plan tsplit(const Trace& trace, const Machine& m, std::uint64_t budget, nlohmann::json params)
{
  return test::plan_on("tsplit", trace, m, budget, std::move(params));
}

RunResult run_on(EngineKind engine, const Trace& trace, const Machine& m, const Plan& plan)
{
  SimOptions options;
  options.engine = engine;
  options.record_timeline = false;
  return engine == EngineKind::fast ? simulate(trace, m, plan, options)
                                    : test::simulate_in_child(trace, m, plan, options);
}

void set_shape(Trace& trace, TensorId id, Shape shape)
{
  Tensor& tensor = trace.tensors[static_cast<std::size_t>(id)];
  tensor.shape = std::move(shape);
  tensor.batch_axis = 0;
}

// in -> produce -> x -> consume (conv2d, relu, ...) -> y -> loss, batch 1 (no batch split), x and y NCHW maps of
// 12 rows (`rank4` false: the same bytes as [N, C, L] token tensors; `shaped` false: no shapes at all). x is dead
// after consume, so only a split of consume (its input parts dropped) can lower the peak at consume.
struct OneOp {
  test::TraceBuilder t{"one-op", 1};
  TensorId x = 0;
  OneOp(const std::string& type, std::uint64_t x_units, std::uint64_t y_units, bool shaped = true, bool rank4 = true)
  {
    const TensorId in = t.tensor("in", kUnit, TensorKind::input);
    x = t.tensor("x", x_units * kUnit);
    const TensorId y = t.tensor("y", y_units * kUnit);
    const TensorId loss = t.tensor("loss", 4, TensorKind::other);
    if (shaped) {
      const auto channels = [](std::uint64_t units) { return static_cast<std::int64_t>(units * 256); };
      set_shape(t.trace, x, rank4 ? Shape{1, channels(x_units), 12, 256} : Shape{1, channels(x_units) * 12, 256});
      set_shape(t.trace, y, rank4 ? Shape{1, channels(y_units), 12, 256} : Shape{1, channels(y_units) * 12, 256});
    }
    t.op("produce", "copy", Phase::forward, {in}, {x}, 0.001);
    t.op("consume", type, Phase::forward, {x}, {y}, 0.004);
    t.op("loss", "cross_entropy", Phase::loss, {y}, {loss}, 0.001);
  }
  std::uint64_t unsplit() const { return default_memory_profile(t.trace).peak_bytes; }
};

const nlohmann::json kSpatial{{"dims", "spatial"}, {"split_dead_inputs", true}, {"max_split", 4}};

// Eq. 5 with the halo. Split in p equal parts (x = X/p, y = Y/p), micro-op u holds its output parts 0..u and the
// input parts not yet freed. Under batch (or an elementwise op) part v is freed after micro-op v:
//   M_u = X - u x + (u + 1) y,  max = X + Y - (p-1)/p min(X, Y)  (u = 0 if X > Y, else u = p-1).
// A conv reads parts u-1..u+1, so part v is freed after micro-op v+1:
//   M_0 = X + y,  M_u = X - (u-1) x + (u+1) y (u >= 1),  max = X + Y - (p-2)/p min(X, Y)  (u = 1, or u = p-1),
// one part of the smaller tensor above the batch form. Here X, Y = 8, 4 units (and 4, 8), p = 4 (3 rows a part),
// plus the 1-unit input: conv 13 - 2 = 11 units, relu 13 - 3 = 10. p = 2 saves nothing for the conv, p = 3 only
// 4/3 units, so at a budget 2 units under the peak the conv splits in 4 and reaches it exactly; 3 units under it
// cannot be met with p <= 4.
void check_halo(std::uint64_t x_units, std::uint64_t y_units)
{
  const std::string where = fmt::format("X = {}, Y = {} units", x_units, y_units);
  const Machine m = machine(10e9);
  const OneOp conv("conv2d", x_units, y_units);
  const std::uint64_t unsplit = conv.unsplit();
  ASSERT_EQ(unsplit, (1 + x_units + y_units) * kUnit) << where;
  const std::uint64_t halo_peak = unsplit - 2 * kUnit; // (p-2)/p min(X, Y) = 2 units lower
  const Plan plan = tsplit(conv.t.trace, m, halo_peak, kSpatial);
  ASSERT_EQ(plan.extra_ops.size(), 4u) << where;
  std::vector<std::size_t> reads; // input parts per micro-op: the band and its neighbours
  for (const Op& micro : plan.extra_ops) {
    EXPECT_EQ(micro.split_of->dim, "spatial") << where;
    reads.push_back(micro.inputs.size());
  }
  EXPECT_EQ(reads, (std::vector<std::size_t>{2, 3, 3, 2})) << where;
  for (EngineKind engine : {EngineKind::fast, EngineKind::simgrid}) {
    const RunResult run = run_on(engine, conv.t.trace, m, plan);
    ASSERT_TRUE(run.metrics.feasible) << where << ": " << run.error->message;
    EXPECT_EQ(run.metrics.peak_device_bytes, halo_peak) << where << " on " << to_string(engine);
  }
  EXPECT_EQ(*plan.estimate.peak_bytes, halo_peak) << where;
  EXPECT_THROW((void)tsplit(conv.t.trace, m, unsplit - 3 * kUnit, kSpatial), Infeasible) << where;

  const OneOp relu("relu", x_units, y_units); // elementwise: no halo, the batch form
  const Plan elementwise = tsplit(relu.t.trace, m, halo_peak, kSpatial);
  ASSERT_EQ(elementwise.extra_ops.size(), 4u) << where;
  for (const Op& micro : elementwise.extra_ops)
    EXPECT_EQ(micro.inputs.size(), 1u) << where;
  for (EngineKind engine : {EngineKind::fast, EngineKind::simgrid}) {
    const RunResult run = run_on(engine, relu.t.trace, m, elementwise);
    ASSERT_TRUE(run.metrics.feasible) << where << ": " << run.error->message;
    EXPECT_EQ(run.metrics.peak_device_bytes, unsplit - 3 * kUnit) << where << " on " << to_string(engine);
  }
}

TEST(TsplitSpatial, Eq5WithTheHaloKeepsOneMorePartOfTheSmallerTensor)
{
  check_halo(8, 4);
  check_halo(4, 8);
}

// A conv backward split along H: the incoming gradient dy and the saved input x (for dW) are partitioned and read
// with the halo, dx is partitioned, dW is reduced (micro-op 0 writes it, the others add into it). X = dY = dX = 4
// units, p = 4, so the partitioned inputs are I = 8 units (2 a part) and Eq. 5 with the halo saves
// (p-2)/p min(I, dX) = 2 units (M_1 = I + 2 dX/p is the worst micro-op); elementwise (a relu backward) saves 3.
struct ConvBackward {
  test::TraceBuilder t{"conv-backward", 1};
  TensorId dw = 0;
  std::vector<TensorId> partitioned; // dy, x
  explicit ConvBackward(const std::string& type)
  {
    const TensorId in = t.tensor("in", kUnit, TensorKind::input);
    const TensorId w = t.tensor("w", 4096, TensorKind::weight);
    const TensorId x = t.tensor("x", 4 * kUnit);
    const TensorId y = t.tensor("y", kUnit);
    const TensorId dy = t.tensor("dy", 4 * kUnit, TensorKind::gradient);
    const TensorId dx = t.tensor("dx", 4 * kUnit, TensorKind::gradient);
    dw = t.tensor("dw", 4096, TensorKind::weight_grad);
    const TensorId sink = t.tensor("sink", 4, TensorKind::other);
    for (TensorId id : {x, dy, dx})
      set_shape(t.trace, id, {1, 1024, 12, 256});
    t.op("produce", "copy", Phase::forward, {in}, {x}, 0.001);
    t.op("conv", "conv2d", Phase::forward, {x, w}, {y}, 0.001);
    t.op("loss", "cross_entropy", Phase::loss, {y}, {dy}, 0.001);
    t.op("conv.bwd", type, Phase::backward, {dy, x, w}, {dx, dw}, 0.004);
    t.op("sink", "sum", Phase::backward, {dx}, {sink}, 0.001);
    partitioned = {dy, x};
  }
};

TEST(TsplitSpatial, ConvBackwardReadsTheHaloAndReducesTheWeightGradient)
{
  const Machine m = machine(10e9);
  const ConvBackward conv("conv2d_backward");
  const std::uint64_t unsplit = default_memory_profile(conv.t.trace).peak_bytes;
  const Plan plan = tsplit(conv.t.trace, m, unsplit - 2 * kUnit, kSpatial);
  ASSERT_EQ(plan.extra_ops.size(), 4u);
  const auto part_of = [&](TensorId id, int u) {
    const std::string name = fmt::format("{}#{}/4", conv.t.trace.tensor(id).name, u + 1);
    for (const Tensor& tensor : plan.extra_tensors)
      if (tensor.name == name)
        return tensor.id;
    return TensorId{-1};
  };
  for (int u = 0; u < 4; ++u) {
    const Op& micro = plan.extra_ops[static_cast<std::size_t>(u)];
    for (TensorId whole : conv.partitioned)
      for (int v = 0; v < 4; ++v) {
        const bool reads = std::count(micro.inputs.begin(), micro.inputs.end(), part_of(whole, v)) > 0;
        EXPECT_EQ(reads, std::abs(u - v) <= 1) << micro.name << " part " << v << " of " << whole;
      }
    const bool writes_dw = std::count(micro.outputs.begin(), micro.outputs.end(), conv.dw) > 0;
    const bool adds_into_dw = std::count(micro.inputs.begin(), micro.inputs.end(), conv.dw) > 0;
    EXPECT_EQ(writes_dw, u == 0) << micro.name;
    EXPECT_EQ(adds_into_dw, u > 0) << micro.name;
  }
  for (EngineKind engine : {EngineKind::fast, EngineKind::simgrid}) {
    const RunResult run = run_on(engine, conv.t.trace, m, plan);
    ASSERT_TRUE(run.metrics.feasible) << to_string(engine) << ": " << run.error->message;
    EXPECT_EQ(run.metrics.peak_device_bytes, unsplit - 2 * kUnit) << to_string(engine);
  }
  EXPECT_THROW((void)tsplit(conv.t.trace, m, unsplit - 3 * kUnit, kSpatial), Infeasible);
  const ConvBackward relu("threshold_backward");
  const Plan elementwise = tsplit(relu.t.trace, m, unsplit - 3 * kUnit, kSpatial);
  EXPECT_EQ(run_on(EngineKind::fast, relu.t.trace, m, elementwise).metrics.peak_device_bytes, unsplit - 3 * kUnit);
}

// Which ops and tensors split spatially. The budget needs a split (2 units under the peak, the conv's halo form):
// a shaped rank-4 conv meets it; without shapes, with rank-3 tensors, as batch norm, or where the trace declares
// the op splittable along batch only, nothing can lower the peak. Unknown dims are refused.
TEST(TsplitSpatial, OnlyShapedNchwMapsOfOpsThatAllowIt)
{
  const Machine m = machine(10e9);
  const OneOp conv("conv2d", 8, 4);
  const std::uint64_t budget = conv.unsplit() - 2 * kUnit;
  EXPECT_NO_THROW((void)tsplit(conv.t.trace, m, budget, kSpatial));
  nlohmann::json named = kSpatial;
  named["dims"] = "heads, spatial";
  EXPECT_NO_THROW((void)tsplit(conv.t.trace, m, budget, named));
  named["dims"] = "space";
  EXPECT_THROW((void)tsplit(conv.t.trace, m, budget, named), InputError);

  EXPECT_THROW((void)tsplit(OneOp("conv2d", 8, 4, false).t.trace, m, budget, kSpatial), Infeasible);
  EXPECT_THROW((void)tsplit(OneOp("conv2d", 8, 4, true, false).t.trace, m, budget, kSpatial), Infeasible);
  EXPECT_THROW((void)tsplit(OneOp("batch_norm", 8, 4).t.trace, m, budget, kSpatial), Infeasible);
  OneOp batch_only("conv2d", 8, 4);
  for (Op& op : batch_only.t.trace.ops)
    op.split = {"batch"};
  EXPECT_THROW((void)tsplit(batch_only.t.trace, m, budget, kSpatial), Infeasible);
  for (Op& op : batch_only.t.trace.ops)
    op.split = {"batch", "spatial"};
  EXPECT_NO_THROW((void)tsplit(batch_only.t.trace, m, budget, kSpatial));
}

// Split + swap along H with the halo: micro-op k needs the room of part k-2 (part k-1 is still its neighbour), so
// with a = X/(pB) + latency per part and b = T/p per micro-op, micro-op k >= 2 starts at max((k-1) a, k b): the op
// ends at max((p-2) a + b, p b), a stall of max((p-2) a - (p-1) b, 0) (batch: (p-1)(a - b)). X = Y = 40 MB, p = 4:
// the peak is 1.5 X, the budget leaves no room for a third output part before part 0 has left.
TEST(TsplitSpatial, SplitSwapStallWaitsForThePartBeforeTheNeighbour)
{
  test::TraceBuilder t("spatial-swap", 1);
  const std::uint64_t x_bytes = 40'000'000;
  const double op_s = 0.04;
  const double bandwidth = 5e8;
  const double latency = 1e-5;
  const TensorId in = t.tensor("in", 1000, TensorKind::input);
  const TensorId x = t.tensor("x", x_bytes);
  const TensorId y = t.tensor("y", x_bytes);
  set_shape(t.trace, x, {1, 10, 1000, 1000});
  set_shape(t.trace, y, {1, 10, 1000, 1000});
  TensorId g = t.tensor("g", 4000, TensorKind::gradient);
  t.op("f0", "copy", Phase::forward, {in}, {x}, 0.01);
  t.op("f1", "conv2d", Phase::forward, {x}, {y}, op_s);
  t.op("loss", "cross_entropy", Phase::loss, {y}, {g}, 0.01);
  for (int k = 0; k < 10; ++k) { // room for the prefetch to hide
    const TensorId next = t.tensor("gf" + std::to_string(k), 4000, TensorKind::gradient);
    t.op("fill" + std::to_string(k), "fill", Phase::backward, {g}, {next}, 0.01);
    g = next;
  }
  const TensorId gx = t.tensor("gx", 4000, TensorKind::gradient);
  t.op("b0", "other", Phase::backward, {x, g}, {gx}, 0.01);
  const Machine m = machine(bandwidth, latency);
  const std::uint64_t budget = 1000 + x_bytes * 3 / 2 + 100'000;
  const Plan plan = tsplit(t.trace, m, budget, {{"dims", "spatial"}, {"recompute", false}, {"max_split", 4}});
  ASSERT_EQ(plan.extra_ops.size(), 4u);
  const int p = 4;
  const double a = static_cast<double>(x_bytes) / p / bandwidth + latency;
  const double b = op_s / p;
  const double expected_stall = std::max((p - 2) * a - (p - 1) * b, 0.0);
  ASSERT_GT(expected_stall, 0.0);
  for (EngineKind engine : {EngineKind::fast, EngineKind::simgrid}) {
    const RunResult run = run_on(engine, t.trace, m, plan);
    ASSERT_TRUE(run.metrics.feasible) << run.error->message;
    EXPECT_LE(run.metrics.peak_device_bytes, budget);
    const double stall = run.metrics.iteration_time_s - t.trace.total_time_s();
    EXPECT_NEAR(stall, expected_stall, 0.01 * expected_stall) << to_string(engine);
    EXPECT_NEAR(*plan.estimate.iteration_time_s, run.metrics.iteration_time_s, 1e-6) << to_string(engine);
  }
}

// On shaped CNN traces (plain and residual; conv, relu, add and pool declare spatial; few classes, so activations
// dominate the peak), dims=spatial at 0.3-1.0 of the keep-all peak: every plan runs within its budget on both
// engines, its estimate within 2 % of each, the same plan twice; some plans do split along H. (A stride-2 pool
// changes H and cannot split along it: the low budgets are infeasible.)
TEST(TsplitSpatial, PlansOnShapedCnnsRunWithinTheirBudgetOnBothEngines)
{
  const Machine m = machine(12e9, 1e-6);
  int feasible = 0;
  int spatial_plans = 0;
  for (const auto& [name, trace] :
       {std::pair{"cnn",
                  test::generated(
                      "cnn", {{"depth", 4}, {"batch", 8}, {"image", 64}, {"channel_scale", 0.25}, {"classes", 10}})},
        std::pair{"resnet", test::generated("cnn", {{"depth", 3},
                                                    {"batch", 4},
                                                    {"image", 64},
                                                    {"channel_scale", 0.25},
                                                    {"classes", 10},
                                                    {"residual", true}})}}) {
    const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
    for (double fraction : {0.3, 0.4, 0.5, 0.6, 0.8, 1.0}) {
      const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
      const std::string where = fmt::format("{} at {} of the peak", name, fraction);
      const nlohmann::json params{{"dims", "spatial"}, {"split_dead_inputs", true}};
      Plan plan;
      try {
        plan = tsplit(trace, m, budget, params);
      } catch (const Infeasible&) {
        EXPECT_LT(fraction, 1.0) << where << ": keep-all fits";
        continue;
      }
      EXPECT_EQ(plan_to_json(plan).dump(), plan_to_json(tsplit(trace, m, budget, params)).dump()) << where;
      spatial_plans += std::any_of(plan.extra_ops.begin(), plan.extra_ops.end(),
                                   [](const Op& micro) { return micro.split_of && micro.split_of->dim == "spatial"; });
      for (EngineKind engine : {EngineKind::fast, EngineKind::simgrid}) {
        const RunResult run = run_on(engine, trace, m, plan);
        ASSERT_TRUE(run.metrics.feasible) << where << " on " << to_string(engine) << ": " << run.error->message;
        EXPECT_LE(run.metrics.peak_device_bytes, budget) << where << " on " << to_string(engine);
        EXPECT_NEAR(*plan.estimate.iteration_time_s, run.metrics.iteration_time_s, 0.02 * run.metrics.iteration_time_s)
            << where << " on " << to_string(engine);
      }
      ++feasible;
    }
  }
  EXPECT_GE(feasible, 6);
  EXPECT_GT(spatial_plans, 0);
}

} // namespace
} // namespace memsim
