// Harmony's configuration search and balanced-time packing on a 3-layer profile, worked out by hand.
#include "harmony_test_profile.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/search.hpp"

#include <gtest/gtest.h>

namespace memsim::harmony {
namespace {

LayerProfile tiny_profile() { return test::tiny_harmony_profile({0.25, 0.25, 0.25}); }

TEST(HarmonySearch, BalancedTimePacksCutWhereTheRunningTimeReachesEachShare)
{
  const LayerProfile profile = tiny_profile();
  // Backward memory per layer = peak - X = 19, 18, 19 (56 in all). Cap 40: start at ceil(56/40) = 2 packs; running
  // time 3, 8, 10 reaches 10/2 = 5 at layer 1 -> {0}, {1-2}, costing 19+1 = 20 and 18+19+2 = 39 <= 40.
  EXPECT_EQ(balanced_time_packs(profile, LayerPass::backward, 1, 3, 40), (std::vector<LayerPack>{{0, 0}, {1, 2}}));
  // Cap 38: 2 packs exceed it (39); 3 packs cut at 10/3 and 20/3, both at layer 1, leaving an empty pack: none.
  EXPECT_FALSE(balanced_time_packs(profile, LayerPass::backward, 1, 3, 38).has_value());
  // Cap 100: one pack of everything, 56 + 1.
  EXPECT_EQ(balanced_time_packs(profile, LayerPass::backward, 1, 3, 100), (std::vector<LayerPack>{{0, 2}}));
}

TEST(HarmonySearch, KeepsTheFastestCandidate)
{
  SearchSettings settings;
  settings.memory_cap = 40;
  settings.estimator = {2.0, 1.0, 2.0, 0.5};
  const auto result = search(tiny_profile(), 2, 2, Mode::pp, settings);
  ASSERT_TRUE(result.has_value());
  // u = 1 only; P_B = {0}, {1-2}; P_F = {0} twice (balanced_time, then reuse): two equal candidates, the first kept.
  EXPECT_EQ(result->candidates, 2u);
  EXPECT_EQ(result->forward_method, "balanced_time");
  EXPECT_EQ(result->best.packs_forward, (std::vector<LayerPack>{{0, 0}}));
  EXPECT_EQ(result->best.packs_backward, (std::vector<LayerPack>{{0, 0}, {1, 2}}));
  EXPECT_DOUBLE_EQ(result->estimate.iteration_s, 29.5); // the timeline of HarmonyEstimator.WrapAroundPipelineTimeline
  settings.memory_cap = 38;
  EXPECT_FALSE(search(tiny_profile(), 2, 2, Mode::pp, settings).has_value());
  EXPECT_THROW((void)parse_packing_method("greedy", "--packing-fwd"), InputError);
}

} // namespace
} // namespace memsim::harmony
