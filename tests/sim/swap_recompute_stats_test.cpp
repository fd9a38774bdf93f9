// What the swap/recompute choice knows about a graph (planners/src/swap_recompute_stats.hpp), on the 3-layer test
// chain (forward ops 1 ms, loss 1 ms, backward ops 2 ms, 1 MB activations, a 1 GB/s host link: 1 MB moves in 1 ms):
// the idle time of each activation under A11's three readings.
#include "planner_test_support.hpp"
#include "test_traces.hpp"

#include "../../planners/src/swap_recompute_stats.hpp"

#include "memsim/common/error.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

constexpr std::uint64_t MB = 1000000;

TensorId tensor_named(const Trace& trace, const std::string& name)
{
  for (const Tensor& tensor : trace.tensors)
    if (tensor.name == name)
      return tensor.id;
  throw std::logic_error("no tensor " + name);
}

TEST(SwapRecomputeStats, IdleTimeUnderEachMetric)
{
  // Order: f0 f1 f2 loss b2 b1 b0; backward op b_l reads its layer's input, so a0 is read by f1 and b1, a1 by f2 and
  // b2, and a2 (read by the loss only) is no swap candidate.
  const Trace chain = test::make_chain(3, MB);
  const Machine machine = test::one_gpu_machine();
  const double launch = machine.gpus[0].kernel_launch_s;
  const TraceAnalysis analysis(chain);
  const auto a0 = static_cast<std::size_t>(tensor_named(chain, "a0"));
  const auto a1 = static_cast<std::size_t>(tensor_named(chain, "a1"));
  const auto a2 = static_cast<std::size_t>(tensor_named(chain, "a2"));
  using planning::IdleMetric;
  const planning::GraphStats inactive = planning::graph_stats(analysis, machine, IdleMetric::inactive);
  const planning::GraphStats produced = planning::graph_stats(analysis, machine, IdleMetric::produced);
  const planning::GraphStats free_time = planning::graph_stats(analysis, machine, IdleMetric::free_time);
  // a0 idles over f2, loss and b2 after its last forward read (f1), and over f1 too counted from its producer f0.
  EXPECT_NEAR(inactive.inactive_s[a0], 0.004 + 3 * launch, 1e-12);
  EXPECT_NEAR(produced.inactive_s[a0], 0.005 + 4 * launch, 1e-12);
  // Free time: minus 1 ms out and 1 ms back.
  EXPECT_NEAR(free_time.inactive_s[a0], 0.002 + 3 * launch, 1e-12);
  // a1 idles over the loss only (and f2 counted from its producer f1); its free time is negative.
  EXPECT_NEAR(inactive.inactive_s[a1], 0.001 + launch, 1e-12);
  EXPECT_NEAR(produced.inactive_s[a1], 0.002 + 2 * launch, 1e-12);
  EXPECT_NEAR(free_time.inactive_s[a1], -0.001 + launch, 1e-12);
  for (const planning::GraphStats* stats : {&inactive, &produced, &free_time})
    EXPECT_EQ(stats->inactive_s[a2], 0.0);
}

TEST(SwapRecomputeStats, IdleMetricNames)
{
  EXPECT_EQ(planning::idle_metric_from("inactive"), planning::IdleMetric::inactive);
  EXPECT_EQ(planning::idle_metric_from("produced"), planning::IdleMetric::produced);
  EXPECT_EQ(planning::idle_metric_from("free_time"), planning::IdleMetric::free_time);
  EXPECT_THROW(planning::idle_metric_from("idle"), InputError);
}

} // namespace
} // namespace memsim
