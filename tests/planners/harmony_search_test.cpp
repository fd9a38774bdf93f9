// Harmony's configuration search and balanced-time packing on a 3-layer profile, worked out by hand.
#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/search.hpp"

#include <gtest/gtest.h>

namespace memsim::harmony {
namespace {

// Layers 0, 1, 2 (2 = the loss) at u = 1: forward 1, 2, 1 s; backward 3, 5, 2 s; peaks 10 (forward) and 20
// (backward) bytes each; X = 1, 2, 1 bytes; W = 2, 1, 0 bytes.
LayerProfile tiny_profile()
{
  LayerProfile profile;
  profile.model = "tiny";
  profile.sampled_forward = {1};
  profile.sampled_backward = {1};
  const std::uint64_t weights[] = {2, 1, 0};
  for (std::size_t l = 0; l < 3; ++l)
    profile.layers.push_back({"layer" + std::to_string(l), weights[l], 0, 0, 0.25, 0});
  ProfiledMicrobatch sample;
  sample.forward_time_s = {1, 2, 1};
  sample.backward_time_s = {3, 5, 2};
  sample.forward_peak_bytes = {10, 10, 10};
  sample.backward_peak_bytes = {20, 20, 20};
  sample.input_bytes = {1, 2, 1};
  profile.microbatches.emplace(1, sample);
  return profile;
}

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
