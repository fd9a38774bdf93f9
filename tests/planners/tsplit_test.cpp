// The tsplit planner (issue 10, item 1) on hand-built traces whose answers are worked out from the paper's
// formulas (spec tsplit.md §9): Eq. 5's saving in the simulated peak, the Fig. 7/8 choice between a swap and a
// split (ties go to non-split), the split+swap pipeline stall, and determinism. Plans run on the fast engine.
#include "planner_test_support.hpp"
#include "trace_builder.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace memsim {
namespace {

constexpr std::uint64_t kUnit = 3 << 20; // divisible by the batch, so parts are exact

// A trace built op by op: every op may be split along the batch; times are exact.
struct TinyTrace : test::TraceBuilder {
  explicit TinyTrace(std::int64_t batch = 4) : TraceBuilder("tiny", batch) {}
  OpId op(const std::string& name, Phase phase, std::vector<TensorId> in, std::vector<TensorId> out, double seconds)
  {
    Op& added = TraceBuilder::op(name, "conv2d", phase, std::move(in), std::move(out), seconds);
    added.split = {"batch"};
    return added.id;
  }
};

// One GPU with room for everything (the planner's budget is what binds) behind a host link of `bandwidth`.
Machine machine(double bandwidth, double latency = 0) { return test::one_gpu_machine(1ull << 40, bandwidth, latency); }

Plan tsplit(const Trace& trace, const Machine& m, std::uint64_t budget, nlohmann::json params)
{
  return test::plan_on("tsplit", trace, m, budget, std::move(params));
}

RunResult run_fast(const Trace& trace, const Machine& m, const Plan& plan)
{
  SimOptions options;
  options.engine = EngineKind::fast;
  options.record_timeline = false;
  return simulate(trace, m, plan, options);
}

std::size_t count(const Plan& plan, StepKind kind)
{
  return static_cast<std::size_t>(std::count_if(plan.steps.begin(), plan.steps.end(),
                                                [&](const Step& s) { return s.kind == kind; }));
}

bool offloads(const Plan& plan, TensorId tensor)
{
  return std::any_of(plan.steps.begin(), plan.steps.end(),
                     [&](const Step& s) { return s.kind == StepKind::offload && s.tensor == tensor; });
}

// Eq. 5: one op reading X and writing Y, split in p = 4 with its input parts freed per micro-op, needs
// (p-1)/p * min(X, Y) less than unsplit: 3 units for X = 8, Y = 4 (and for X = 4, Y = 8).
// Batch 12: p = 3 splits in exact thirds and saves 2/3 * 4 units, not enough.
void check_eq5(std::uint64_t x_units, std::uint64_t y_units)
{
  TinyTrace t(12);
  const TensorId in = t.tensor("in", kUnit, TensorKind::input);
  const TensorId x = t.tensor("x", x_units * kUnit);
  const TensorId y = t.tensor("y", y_units * kUnit);
  const TensorId loss = t.tensor("loss", 4, TensorKind::other);
  t.op("produce", Phase::forward, {in}, {x}, 0.001);
  t.op("consume", Phase::forward, {x}, {y}, 0.004);
  t.op("loss", Phase::loss, {y}, {loss}, 0.001);
  const Machine m = machine(10e9);
  const std::uint64_t unsplit = default_memory_profile(t.trace).peak_bytes;
  ASSERT_EQ(unsplit, (1 + x_units + y_units) * kUnit);
  const std::uint64_t budget = unsplit - 3 * kUnit;
  const Plan plan = tsplit(t.trace, m, budget, {{"split_dead_inputs", true}, {"max_split", 4}});
  EXPECT_EQ(plan.extra_ops.size(), 4u); // p = 3 saves only 2/3 * 4 units
  const RunResult run = run_fast(t.trace, m, plan);
  ASSERT_TRUE(run.metrics.feasible) << run.error->message;
  EXPECT_EQ(run.metrics.peak_device_bytes, unsplit - 3 * kUnit);
  EXPECT_EQ(*plan.estimate.peak_bytes, run.metrics.peak_device_bytes);
}

TEST(Tsplit, Eq5SplitLowersThePeakByThreeQuartersOfTheSmallerTensor)
{
  check_eq5(8, 4);
  check_eq5(4, 8);
}

// dims: at batch 1 no op splits along the batch, but a pooling op declared splittable along batch and channel,
// whose NCHW tensors carry shapes with 12 channels, splits along channel with every activation partitioned (§2):
// Eq. 5 again, the peak 3 units lower for X = 8, Y = 4 and p = 4 (3 channels a part). A conv's channel split is an
// output-channel split that reads its input whole, so it frees nothing before the op ends: no plan at that budget.
struct ChannelCase {
  TinyTrace t{1};
  TensorId x = 0;
  explicit ChannelCase(const std::string& consumer_type)
  {
    const TensorId in = t.tensor("in", kUnit, TensorKind::input);
    x = t.tensor("x", 8 * kUnit);
    const TensorId y = t.tensor("y", 4 * kUnit);
    const TensorId loss = t.tensor("loss", 4, TensorKind::other);
    t.trace.tensors[static_cast<std::size_t>(x)].shape = {1, 12, 256, 2048}; // fp32: 8 units
    t.trace.tensors[static_cast<std::size_t>(y)].shape = {1, 12, 256, 1024};
    for (TensorId id : {x, y})
      t.trace.tensors[static_cast<std::size_t>(id)].batch_axis = 0;
    t.op("produce", Phase::forward, {in}, {x}, 0.001);
    const OpId consume = t.op("consume", Phase::forward, {x}, {y}, 0.004);
    t.trace.ops[static_cast<std::size_t>(consume)].type = consumer_type;
    t.trace.ops[static_cast<std::size_t>(consume)].split = {"batch", "channel"};
    t.op("loss", Phase::loss, {y}, {loss}, 0.001);
  }
};

TEST(Tsplit, ChannelSplitsWhatBatchOneCannot)
{
  const ChannelCase pool("maxpool2d");
  const Machine m = machine(10e9);
  const std::uint64_t unsplit = default_memory_profile(pool.t.trace).peak_bytes;
  ASSERT_EQ(unsplit, 13 * kUnit);
  const std::uint64_t budget = unsplit - 3 * kUnit;
  const nlohmann::json base{{"split_dead_inputs", true}, {"max_split", 4}};
  nlohmann::json batch_only = base;
  batch_only["dims"] = "batch";
  EXPECT_THROW((void)tsplit(pool.t.trace, m, budget, batch_only), Infeasible);
  nlohmann::json with_channel = base;
  with_channel["dims"] = "batch,channel";
  const Plan plan = tsplit(pool.t.trace, m, budget, with_channel);
  ASSERT_EQ(plan.extra_ops.size(), 4u);
  for (const Op& micro : plan.extra_ops)
    EXPECT_EQ(micro.split_of->dim, "channel");
  const RunResult run = run_fast(pool.t.trace, m, plan);
  ASSERT_TRUE(run.metrics.feasible) << run.error->message;
  EXPECT_EQ(run.metrics.peak_device_bytes, unsplit - 3 * kUnit);
  EXPECT_EQ(*plan.estimate.peak_bytes, run.metrics.peak_device_bytes);

  const ChannelCase conv("conv2d");
  EXPECT_THROW((void)tsplit(conv.t.trace, m, budget, with_channel), Infeasible);
  nlohmann::json unknown = base;
  unknown["dims"] = "batch,width";
  EXPECT_THROW((void)tsplit(pool.t.trace, m, budget, unknown), InputError);
}

// The Fig. 7/8 toy: f1 -> s1 -> f2 -> s2 -> f3 -> s3, each S, budget 2.5 S, every op t. At f3, Step 1 offers
// swap(s1) and Step 2 a split of s2 (p <= 4). Backward: b3 reads s3, `fillers` ops, then b2 reads s2, b1 reads s1.
struct Toy {
  static constexpr std::uint64_t kS = 100'000'000;
  static constexpr double kT = 0.01;
  TinyTrace t;
  TensorId s1 = 0, s2 = 0;
  explicit Toy(bool f1_has_second_output, int fillers = 2)
  {
    const TensorId in = t.tensor("in", 1000, TensorKind::input);
    s1 = t.tensor("s1", kS);
    std::vector<TensorId> f1_out{s1};
    if (f1_has_second_output) // then s1 alone cannot be recomputed (the unit is the whole output set)
      f1_out.push_back(t.tensor("aux", 4000));
    s2 = t.tensor("s2", kS);
    const TensorId s3 = t.tensor("s3", kS);
    t.op("f1", Phase::forward, {in}, f1_out, kT);
    t.op("f2", Phase::forward, {s1}, {s2}, kT);
    t.op("f3", Phase::forward, {s2}, {s3}, kT);
    TensorId g = t.tensor("g3", 4000, TensorKind::gradient);
    t.op("b3", Phase::backward, {s3}, {g}, kT);
    for (int k = 0; k < fillers; ++k) {
      const TensorId next = t.tensor("gf" + std::to_string(k), 4000, TensorKind::gradient);
      t.op("fill" + std::to_string(k), Phase::backward, {g}, {next}, kT);
      g = next;
    }
    const TensorId g2 = t.tensor("g2", 4000, TensorKind::gradient);
    t.op("b2", Phase::backward, {s2, g}, {g2}, kT);
    const TensorId g1 = t.tensor("g1", 4000, TensorKind::gradient);
    t.op("b1", Phase::backward, {s1, g2}, {g1}, kT);
  }
  std::uint64_t budget() const { return kS * 5 / 2 + 100'000; }
};

// Eq. 3 for swap(s1) at f3: the copy has f2 to hide in; the prefetch starts after b3 (the last op over budget) and
// has the fillers and b2 to hide in.
double swap_s1_ratio(double c, int fillers)
{
  const double t = Toy::kT;
  return (std::max(c - t, 0.0) + std::max(c - (fillers + 1) * t, 0.0)) / Toy::kS;
}
// Eq. 6 for split(s2, p, swap): no split overhead (no launch cost; time splits evenly), the pipeline stall
// (p-1) max(a - b, 0) with a = c/p and b = t/p, and the prefetch hidden by the fillers.
double split_swap_ratio(double c, int fillers, int p)
{
  const double t = Toy::kT;
  const double stall = (p - 1) * std::max(c / p - t / p, 0.0);
  const double saved = (p - 1.0) / p * Toy::kS;
  return (stall + std::max(c - fillers * t, 0.0)) / saved;
}

TEST(Tsplit, ToyChoosesTheCheaperRatioAndTiesGoToNonSplit)
{
  const int fillers = 2;
  const nlohmann::json swap_only{{"recompute", false}, {"max_split", 4}};
  { // a slow link: swap(s1) costs 16 t / S, split(s2, 4) 19.7 t / S
    const double c = 10 * Toy::kT;
    double best_split = split_swap_ratio(c, fillers, 2);
    for (int p : {3, 4})
      best_split = std::min(best_split, split_swap_ratio(c, fillers, p));
    ASSERT_LT(swap_s1_ratio(c, fillers), best_split);
    Toy toy(false, fillers);
    const Machine m = machine(Toy::kS / c);
    const Plan plan = tsplit(toy.t.trace, m, toy.budget(), swap_only);
    EXPECT_TRUE(offloads(plan, toy.s1));
    EXPECT_EQ(count(plan, StepKind::split), 0u);
    EXPECT_TRUE(run_fast(toy.t.trace, m, plan).metrics.feasible);
  }
  { // a fast link: both are free (ratio 0): the tie goes to non-split
    const double c = 0.5 * Toy::kT;
    ASSERT_EQ(swap_s1_ratio(c, fillers), 0.0);
    ASSERT_EQ(split_swap_ratio(c, fillers, 4), 0.0);
    Toy toy(false, fillers);
    const Machine m = machine(Toy::kS / c);
    const Plan plan = tsplit(toy.t.trace, m, toy.budget(), swap_only);
    EXPECT_TRUE(offloads(plan, toy.s1));
    EXPECT_EQ(count(plan, StepKind::split), 0u);
  }
  { // s1 cannot be recomputed; a split of s2 with its parts recomputed costs t (re-running f2) for 3/4 S, against
    // 16 t / S for swapping s1: the split wins, at p = 4 (the best ratio)
    const double c = 10 * Toy::kT;
    ASSERT_LT(Toy::kT / (0.75 * Toy::kS), swap_s1_ratio(c, fillers));
    Toy toy(true, fillers);
    const Machine m = machine(Toy::kS / c);
    const Plan plan = tsplit(toy.t.trace, m, toy.budget(), {{"max_split", 4}});
    EXPECT_FALSE(offloads(plan, toy.s1));
    EXPECT_EQ(count(plan, StepKind::split), 1u);
    EXPECT_EQ(plan.extra_ops.size(), 4u);
    EXPECT_EQ(count(plan, StepKind::recompute), 1u);
    const RunResult run = run_fast(toy.t.trace, m, plan);
    ASSERT_TRUE(run.metrics.feasible);
    EXPECT_LE(run.metrics.peak_device_bytes, toy.budget());
  }
}

// Split + swap with a tight budget: micro-op u+1 waits until part u has left, so the op stalls (p-1)(a - b) with
// a = X/(pB) + latency and b = T/p.
TEST(Tsplit, SplitSwapPipelineStallMatchesTheClosedForm)
{
  TinyTrace t;
  const std::uint64_t x_bytes = 40'000'000;
  const double op_s = 0.04;
  const double bandwidth = 5e8;
  const double latency = 1e-5;
  const TensorId in = t.tensor("in", 1000, TensorKind::input);
  const TensorId x = t.tensor("x", x_bytes);
  const TensorId y = t.tensor("y", x_bytes);
  TensorId g = t.tensor("g", 4000, TensorKind::gradient);
  t.op("f0", Phase::forward, {in}, {x}, 0.01);
  t.op("f1", Phase::forward, {x}, {y}, op_s);
  t.op("loss", Phase::loss, {y}, {g}, 0.01);
  for (int k = 0; k < 10; ++k) { // room for the prefetch to hide
    const TensorId next = t.tensor("gf" + std::to_string(k), 4000, TensorKind::gradient);
    t.op("fill" + std::to_string(k), Phase::backward, {g}, {next}, 0.01);
    g = next;
  }
  const TensorId gx = t.tensor("gx", 4000, TensorKind::gradient);
  t.op("b0", Phase::backward, {x, g}, {gx}, 0.01);
  const Machine m = machine(bandwidth, latency);
  const std::uint64_t budget = 1000 + x_bytes * 5 / 4 + 100'000; // room for the small gradients, not for a part
  const Plan plan = tsplit(t.trace, m, budget, {{"recompute", false}, {"max_split", 4}});
  ASSERT_EQ(plan.extra_ops.size(), 4u);
  const RunResult run = run_fast(t.trace, m, plan);
  ASSERT_TRUE(run.metrics.feasible) << run.error->message;
  const int p = 4;
  const double a = static_cast<double>(x_bytes) / p / bandwidth + latency;
  const double b = op_s / p;
  const double expected_stall = (p - 1) * std::max(a - b, 0.0);
  const double stall = run.metrics.iteration_time_s - t.trace.total_time_s();
  EXPECT_NEAR(stall, expected_stall, 0.01 * expected_stall);
  EXPECT_NEAR(*plan.estimate.iteration_time_s, run.metrics.iteration_time_s, 1e-9);
}

// recompute_mode on a chain where s1 (S, from the resident input) is read by f2 and by two backward ops with a
// `fill` op between them whose workspace is 1.4 S. At f3 (in + s1 + s2 + s3 = 3 S) s1 is dropped after f2 and
// regenerated at b2 (the link is too slow for a swap; split is off). Then:
//   memory: s1 is freed after b2 and regenerated for b1: 2 recomputations, 9 t; the peak is at b2:
//           in + s1 + s2 + g3 + g2 = 2 S + 9000.
//   speed:  s1 stays from b2 to b1: 1 recomputation, 8 t; the peak is at fill: in + s1 + g2 + h + 1.4 S = 2.4 S + 9000.
//   lru:    s1 stays over fill when 2.4 S + 9000 fits the budget (as speed), else it goes (as memory).
struct TwoReaderChain {
  static constexpr std::uint64_t kS = 100'000'000;
  static constexpr double kT = 0.01;
  TinyTrace t;
  TwoReaderChain()
  {
    const TensorId in = t.tensor("in", 1000, TensorKind::input);
    const TensorId s1 = t.tensor("s1", kS);
    const TensorId s2 = t.tensor("s2", kS);
    const TensorId s3 = t.tensor("s3", kS);
    const TensorId g3 = t.tensor("g3", 4000, TensorKind::gradient);
    const TensorId g2 = t.tensor("g2", 4000, TensorKind::gradient);
    const TensorId h = t.tensor("h", 4000, TensorKind::gradient);
    const TensorId g1 = t.tensor("g1", 4000, TensorKind::gradient);
    t.op("f1", Phase::forward, {in}, {s1}, kT);
    t.op("f2", Phase::forward, {s1}, {s2}, kT);
    t.op("f3", Phase::forward, {s2}, {s3}, kT);
    t.op("b3", Phase::backward, {s3}, {g3}, kT);
    t.op("b2", Phase::backward, {s2, g3, s1}, {g2}, kT);
    const OpId fill = t.op("fill", Phase::backward, {g2}, {h}, kT);
    t.trace.ops[static_cast<std::size_t>(fill)].workspace_bytes = kS * 14 / 10;
    t.op("b1", Phase::backward, {s1, h}, {g1}, kT);
  }
  struct Outcome {
    std::size_t recomputes = 0;
    std::uint64_t peak = 0;
    double seconds = 0;
  };
  Outcome run(const std::string& mode, std::uint64_t budget) const
  {
    const Machine m = machine(kS / (100 * kT));
    const Plan plan = tsplit(t.trace, m, budget, {{"split", false}, {"recompute_mode", mode}});
    const RunResult result = run_fast(t.trace, m, plan);
    EXPECT_TRUE(result.metrics.feasible) << mode;
    EXPECT_EQ(*plan.estimate.peak_bytes, result.metrics.peak_device_bytes) << mode;
    EXPECT_NEAR(*plan.estimate.iteration_time_s, result.metrics.iteration_time_s, 1e-9) << mode;
    EXPECT_LE(result.metrics.peak_device_bytes, budget) << mode;
    return {count(plan, StepKind::recompute), result.metrics.peak_device_bytes, result.metrics.iteration_time_s};
  }
};

TEST(Tsplit, RecomputeModesDifferOnATensorReadTwiceLater)
{
  const TwoReaderChain chain;
  const std::uint64_t s = TwoReaderChain::kS;
  const double t = TwoReaderChain::kT;
  const std::uint64_t roomy = s * 5 / 2;
  const auto memory = chain.run("memory", roomy);
  EXPECT_EQ(memory.recomputes, 2u);
  EXPECT_EQ(memory.peak, 2 * s + 9000);
  EXPECT_NEAR(memory.seconds, 9 * t, 1e-9);
  const auto speed = chain.run("speed", roomy);
  EXPECT_EQ(speed.recomputes, 1u);
  EXPECT_EQ(speed.peak, s * 24 / 10 + 9000);
  EXPECT_NEAR(speed.seconds, 8 * t, 1e-9);
  const auto lru_room = chain.run("lru", roomy);
  EXPECT_EQ(lru_room.recomputes, 1u);
  EXPECT_EQ(lru_room.peak, speed.peak);
  const auto lru_tight = chain.run("lru", s * 23 / 10); // 2.4 S + 9000 does not fit: s1 goes over fill
  EXPECT_EQ(lru_tight.recomputes, 2u);
  EXPECT_EQ(lru_tight.peak, memory.peak);
}

TEST(Tsplit, SamePlanTwice)
{
  Toy toy(true);
  const Machine m = machine(1e9);
  const Plan first = tsplit(toy.t.trace, m, toy.budget(), {});
  const Plan second = tsplit(toy.t.trace, m, toy.budget(), {});
  EXPECT_EQ(plan_to_json(first).dump(), plan_to_json(second).dump());
}

TEST(Tsplit, SaysWhyWhenNothingIsLeftToMove)
{
  Toy toy(false);
  try {
    (void)tsplit(toy.t.trace, machine(1e9), Toy::kS, {{"split", false}});
    FAIL() << "no plan fits one tensor's worth of memory";
  } catch (const Infeasible& e) {
    EXPECT_NE(std::string(e.what()).find("tsplit: bottleneck at op"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace memsim
