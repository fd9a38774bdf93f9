// μ-TWO's Figure 6 walk-through (shared/specs/mu-two.md §6.2) on a hand-made ring of two sub-arrays. Sub-array 0 is
// a 5-layer chain whose backward runs, per layer from the top, the weight gradient (reads the layer's input
// activation Z) and then the input gradient, as in the figure, so Z1 … Z4 are first needed at dW2 … dW5. Sub-array
// 1 is a chain of six 0.5 ms forward ops with 1 MB activations, multiplexed into sub-array 0's backward. Link 1 GB/s
// (1 MB per ms); sub-array 0's forward ops take 5 ms (recomputing any Z costs more than any stall), its backward
// ops 2 ms. The activation sizes (Z1 2 MB, Z2 6 MB, Z3 and Z4 4 MB, Z5 8 MB) and the budget were chosen so that the
// four swaps the budget needs fall in the figure's cases, in its order: Z1 hidden by forward ops only (2a); Z2 by
// forward ops, as many as fit, and backward ops (2b); Z3 with no room before its use, a stall (3), after which the
// peak is reached; Z4 needed inside the peak interval, before Z3's prompt (1a).
#include "test_machines.hpp"
#include "trace_builder.hpp"

#include "../../planners/src/mu_two/ring_schedule.hpp"

#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

constexpr std::uint64_t MB = 1000000;

// Z0 = the input; f_l reads Z_{l-1}, w_l and writes Z_l; the backward of layer l: dW_l (reads g_l, Z_{l-1}) then
// dZ_l (reads g_l, w_l; writes g_{l-1}).
Trace chain_with_split_backward(int layers, std::vector<std::uint64_t> sizes, std::uint64_t gradient_bytes)
{
  test::TraceBuilder b("fig6-chain");
  std::vector<TensorId> z{b.tensor("Z0", 1000, TensorKind::input)}, w;
  for (int l = 1; l <= layers; ++l) {
    w.push_back(b.tensor(fmt::format("W{}", l), 1000, TensorKind::weight));
    z.push_back(b.tensor(fmt::format("Z{}", l), sizes[static_cast<std::size_t>(l - 1)], TensorKind::activation));
    b.op(fmt::format("f{}", l), "linear", Phase::forward, {z[static_cast<std::size_t>(l - 1)], w.back()},
         {z[static_cast<std::size_t>(l)]}, 0.005);
  }
  TensorId grad = b.tensor(fmt::format("g{}", layers), gradient_bytes, TensorKind::gradient);
  b.op("loss", "linear", Phase::loss, {z.back()}, {grad}, 0.005);
  for (int l = layers; l >= 1; --l) {
    const TensorId dw = b.tensor(fmt::format("dW{}", l), 1000, TensorKind::weight_grad);
    b.op(fmt::format("dW{}", l), "linear", Phase::backward, {grad, z[static_cast<std::size_t>(l - 1)]}, {dw}, 0.002);
    if (l > 1) {
      const TensorId next = b.tensor(fmt::format("g{}", l - 1), gradient_bytes, TensorKind::gradient);
      b.op(fmt::format("dZ{}", l), "linear", Phase::backward, {grad, w[static_cast<std::size_t>(l - 1)]}, {next},
           0.002);
      grad = next;
    }
  }
  validate_trace(b.trace, b.trace.name);
  return b.trace;
}

// A chain whose forward activations its backward reads (retained), with short ops.
Trace partner_chain(int ops, std::uint64_t bytes, double op_s)
{
  test::TraceBuilder b("fig6-partner");
  std::vector<TensorId> y{b.tensor("x", 1000, TensorKind::input)};
  const TensorId w = b.tensor("w", 1000, TensorKind::weight);
  for (int i = 0; i < ops; ++i) {
    y.push_back(b.tensor(fmt::format("y{}", i), bytes, TensorKind::activation));
    b.op(fmt::format("p{}", i), "linear", Phase::forward, {y[static_cast<std::size_t>(i)], w}, {y.back()}, op_s);
  }
  TensorId grad = b.tensor("gy", 1000, TensorKind::gradient);
  b.op("loss", "linear", Phase::loss, {y.back()}, {grad}, op_s);
  for (int i = ops - 1; i >= 0; --i) {
    const TensorId next = b.tensor(fmt::format("gy{}", i), 1000, TensorKind::gradient);
    b.op(fmt::format("q{}", i), "linear", Phase::backward, {grad, y[static_cast<std::size_t>(i)], w}, {next},
         op_s / 10);
    grad = next;
  }
  validate_trace(b.trace, b.trace.name);
  return b.trace;
}

TEST(MuTwoFig6, SwapsFallInCases2a2b3And1aInOrder)
{
  const Trace chain = chain_with_split_backward(5, {2 * MB, 6 * MB, 4 * MB, 4 * MB, 8 * MB}, MB);
  const Trace partner = partner_chain(6, MB, 0.0005);
  planning::mu_two::RingOptions options;
  options.offload_release = planning::OffloadRelease::paper; // Alg. G's accounting, as the walk-through
  options.budget_bytes = 12500000;
  const planning::mu_two::RingSchedule schedule =
      planning::mu_two::schedule_ring({&chain, &partner}, test::one_gpu_machine(), options);
  std::vector<std::string> seen;
  for (const auto& decision : schedule.decisions)
    seen.push_back(fmt::format("{} {} {} {}", decision.decision == planning::Decision::swap ? "swap" : "recompute",
                               (decision.sub_array == 0 ? chain : partner).tensor(decision.tensor).name,
                               decision.swap_case, decision.multiplexed));
  // Z1 (2 ms of transfer) behind four 0.5 ms forward ops of the partner; Z2 (6 ms) behind three (a fourth would
  // not fit) and the backward ops before them; Z3 gets no forward op and hits the peak at once; Z4 is needed in it.
  EXPECT_EQ(seen, (std::vector<std::string>{"swap Z1 2a 4", "swap Z2 2b 3", "swap Z3 3 0", "swap Z4 1a 0"}));
  ASSERT_EQ(schedule.decisions.size(), 4u);
  EXPECT_DOUBLE_EQ(schedule.decisions[0].overhead_s, 0);
  EXPECT_DOUBLE_EQ(schedule.decisions[1].overhead_s, 0);
  // The estimator's stalls: Z3's copy is not hidden at all (4 ms and 0.5 ms more), Z4's 4 ms copy entirely.
  EXPECT_NEAR(schedule.decisions[2].overhead_s, 0.0045, 1e-9);
  EXPECT_NEAR(schedule.decisions[3].overhead_s, 0.0040, 1e-9);
  EXPECT_EQ(schedule.multiplexed_ops, 7u);
  EXPECT_LE(schedule.peak_bytes, options.budget_bytes);
}

} // namespace
} // namespace memsim
