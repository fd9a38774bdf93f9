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
  settings.methods.backward = {PackingMethod::reuse};
  EXPECT_THROW((void)search(tiny_profile(), 2, 2, Mode::pp, settings), InputError);
}

TEST(HarmonySearch, TheMethodListChangesTheChoice)
{
  SearchSettings settings;
  settings.memory_cap = 40;
  settings.estimator = {2.0, 1.0, 2.0, 0.5};
  // Backward m = 19, 18, 19, x = 1, 2, 1. balanced_time: {0} {1-2} (above). greedy compares Σm alone: 19 + 18 = 37
  // < 40, + 19 = 56 no: {0-1} {2}; its forward layers 0-1 (m 9, 8, x 1) fit one pack, 18, by balanced_time and
  // by reuse alike.
  const Configuration by_balanced_time{1, 1, {{0, 0}}, {{0, 0}, {1, 2}}};
  const Configuration by_greedy{1, 1, {{0, 1}}, {{0, 1}, {2, 2}}};
  const double balanced_time_s =
      estimate(tiny_profile(), 2, 2, Mode::pp, by_balanced_time, settings.estimator).iteration_s;
  const double greedy_s = estimate(tiny_profile(), 2, 2, Mode::pp, by_greedy, settings.estimator).iteration_s;
  // Greedy's long first pack (3 + 5 s of backward) leaves the other GPU waiting: slower than balanced_time's 29.5 s
  // (the timeline of HarmonyEstimator.WrapAroundPipelineTimeline).
  EXPECT_DOUBLE_EQ(balanced_time_s, 29.5);
  EXPECT_GT(greedy_s, balanced_time_s);

  const auto paper = search(tiny_profile(), 2, 2, Mode::pp, settings);
  ASSERT_TRUE(paper.has_value());
  EXPECT_EQ(paper->best.packs_backward, by_balanced_time.packs_backward);

  settings.methods.backward = {PackingMethod::greedy};
  const auto greedy = search(tiny_profile(), 2, 2, Mode::pp, settings);
  ASSERT_TRUE(greedy.has_value());
  EXPECT_EQ(greedy->candidates, 2u);
  EXPECT_EQ(greedy->backward_method, "greedy");
  EXPECT_EQ(greedy->forward_method, "balanced_time"); // equal to reuse's, and tried first
  EXPECT_EQ(greedy->best.packs_forward, by_greedy.packs_forward);
  EXPECT_EQ(greedy->best.packs_backward, by_greedy.packs_backward);
  EXPECT_DOUBLE_EQ(greedy->estimate.iteration_s, greedy_s);

  // Both: four candidates ranked together; greedy's, listed first, loses.
  settings.methods.backward = {PackingMethod::greedy, PackingMethod::balanced_time};
  const auto both = search(tiny_profile(), 2, 2, Mode::pp, settings);
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->candidates, 4u);
  EXPECT_EQ(both->backward_method, "balanced_time");
  EXPECT_EQ(both->best.packs_backward, by_balanced_time.packs_backward);

  // greedy_reverse_addx: 19 + 1 = 20, + 18 + 2 = 39 < 40, + 19 + 1 no: {0} {1-2}, the balanced_time packs.
  settings.methods = parse_packing_methods({"paper", "greedy_reverse_addx"});
  const auto reverse = search(tiny_profile(), 2, 2, Mode::pp, settings);
  ASSERT_TRUE(reverse.has_value());
  EXPECT_EQ(reverse->best.packs_backward, by_balanced_time.packs_backward);
  EXPECT_EQ(reverse->backward_method, "greedy_reverse_addx");
}

} // namespace
} // namespace memsim::harmony
