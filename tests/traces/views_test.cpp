#include "memsim/common/error.hpp"
#include "memsim/traces/views.hpp"
#include "test_traces.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

constexpr std::uint64_t kA = 1'000'000;

TEST(DefaultLifetimes, ReleasedAfterLastUseAndWeightGradsKept)
{
  const Trace trace = test::make_chain(3, kA);
  const auto lifetimes = default_lifetimes(trace);
  // a0 (tensor 2) is read last by b1 (op 5); a2 (tensor 6) only by the loss (op 3).
  EXPECT_EQ(lifetimes[2].produced_by, 0);
  EXPECT_EQ(lifetimes[2].released_after, 5);
  EXPECT_EQ(lifetimes[6].released_after, 3);
  // Inputs and weights live throughout; weight gradients stay to the end.
  EXPECT_FALSE(lifetimes[0].released_after);
  EXPECT_FALSE(lifetimes[1].released_after);
  const TensorId dw2 = 8;
  ASSERT_EQ(trace.tensor(dw2).kind, TensorKind::weight_grad);
  EXPECT_FALSE(lifetimes[static_cast<std::size_t>(dw2)].released_after);
}

TEST(DefaultLifetimes, FreeAfterOverridesLastUse)
{
  Trace trace = test::make_chain(3, kA);
  trace.tensors[6].free_after = 5; // the framework kept a2 until b1
  EXPECT_EQ(default_lifetimes(trace)[6].released_after, 5);
}

TEST(ChainView, LayersSizesAndTimes)
{
  const Trace trace = test::make_chain(3, kA, 0.002);
  const ChainView view = chain_view(trace);
  ASSERT_EQ(view.layers.size(), 3u);
  EXPECT_EQ(view.input_bytes, kA);
  EXPECT_EQ(view.resident_bytes, kA + 3000);
  for (const ChainLayer& layer : view.layers) {
    EXPECT_DOUBLE_EQ(layer.forward_time_s, 0.002);
    EXPECT_DOUBLE_EQ(layer.backward_time_s, 0.004);
    EXPECT_EQ(layer.output_bytes, kA);
    EXPECT_EQ(layer.saved_bytes, kA);
    ASSERT_EQ(layer.forward_ops.size(), 1u);
    ASSERT_EQ(layer.backward_ops.size(), 1u);
  }
  EXPECT_EQ(view.layers[0].output_tensor, 2);
  EXPECT_EQ(view.layers[2].output_tensor, 6);
  EXPECT_EQ(view.loss_ops, std::vector<OpId>{3});
  // Backward overhead: the gradient passed down (weight grads excluded).
  EXPECT_EQ(view.layers[1].backward_overhead, kA);
  EXPECT_EQ(view.layers[0].backward_overhead, 0u);
}

TEST(ChainView, RefusesAnEdgeThatSkipsLayers)
{
  Trace trace = test::make_chain(3, kA);
  trace.ops[2].inputs.push_back(2); // f2 (layer 2) reads a0 (layer 0)
  try {
    (void)chain_view(trace);
    FAIL() << "expected Infeasible";
  } catch (const Infeasible& error) {
    EXPECT_STREQ(error.what(), "not a chain: op 2 'f2' (layer 2) reads activation 2 'a0' of layer 0 (an edge that "
                               "skips layers)");
  }
}

TEST(ChainView, RefusesLayersOutOfOrder)
{
  Trace trace = test::make_chain(3, kA);
  trace.ops[1].layer = 5;
  EXPECT_THROW((void)chain_view(trace), Infeasible);
}

} // namespace
} // namespace memsim
