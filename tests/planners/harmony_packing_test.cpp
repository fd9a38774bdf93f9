// Harmony's layer-packing methods on a 5-layer chain worked out by hand (and checked against the authors'
// layer_packing.py, run on the same numbers), including which methods accept a pack costing exactly the cap.
#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/layer_packing.hpp"

#include <gtest/gtest.h>

namespace memsim::harmony {
namespace {

using Packs = std::vector<LayerPack>;

// m = 4, 3, 5, 2, 6 (Σ 20), x = 1, 2, 3, 3, 1, t = 1, 1, 2, 3, 3 (Σ 10). Pack {2-3} costs Σm 7, with x_2 10.
LayerCosts chain() { return {{4, 3, 5, 2, 6}, {1, 2, 3, 3, 1}, {1, 1, 2, 3, 3}}; }

std::optional<Packs> pack(PackingMethod method, double cap) { return pack_layers(method, chain(), cap); }

TEST(HarmonyPacking, GreedyFillsEachPackBelowTheCap)
{
  // Front to back, Σm < 10: 4+3 = 7 (+5 = 12 no), 5+2 = 7 (+6 = 13 no), 6.
  EXPECT_EQ(pack(PackingMethod::greedy, 10), (Packs{{0, 1}, {2, 3}, {4, 4}}));
  // Back to front: 6+2 = 8 (+5 no), 5+3 = 8 (+4 no), 4: the first pack holds the remainder.
  EXPECT_EQ(pack(PackingMethod::greedy_reverse, 10), (Packs{{0, 0}, {1, 2}, {3, 4}}));
  // With x of the pack's first layer: {0-1} 8, then {2-3} would cost 5+2+3 = 10, not < 10: {2} alone, {3} (2+3, +6
  // = 11 no), {4}.
  EXPECT_EQ(pack(PackingMethod::greedy_addx, 10), (Packs{{0, 1}, {2, 2}, {3, 3}, {4, 4}}));
  // Back to front with x: {4} 7 (+2+3 = 11 no), {3} 5 (+5+3 = 10 no), {2} 8 (+3+2 = 10 no), {0-1} 4+3+1 = 8.
  EXPECT_EQ(pack(PackingMethod::greedy_reverse_addx, 10), (Packs{{0, 1}, {2, 2}, {3, 3}, {4, 4}}));
  // Just above 10, {2-3} (exactly 10) fits: the boundary is strict.
  EXPECT_EQ(pack(PackingMethod::greedy_addx, 10.001), (Packs{{0, 1}, {2, 3}, {4, 4}}));
  EXPECT_EQ(pack(PackingMethod::greedy_reverse_addx, 10.001), (Packs{{0, 1}, {2, 3}, {4, 4}}));
  // One layer that does not fit alone: layer 4 costs 6 + 1 = 7 with x, not < 7; without x every layer fits.
  EXPECT_FALSE(pack(PackingMethod::greedy_addx, 7).has_value());
  EXPECT_FALSE(pack(PackingMethod::greedy_reverse_addx, 7).has_value());
  EXPECT_EQ(pack(PackingMethod::greedy, 7), (Packs{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}}));
}

TEST(HarmonyPacking, BalancedSplitsTheMemoryEvenly)
{
  // From ceil(20/10) = 2 packs; a pack starts at the layer where the prefix of Σm (4, 7, 12, 14, 20) first reaches
  // k * share. S = 2, share 10: layer 2: {0-1} {2-4}, 13 > 10. S = 3, share 6: layers 1, 2: {0} {1} {2-4}, 13 again.
  // S = 4, share 5: targets 5, 10, 15 reached at layers 1, 2, 4: {0} {1} {2-3} {4}, Σm 4, 3, 7, 6.
  const Packs four{{0, 0}, {1, 1}, {2, 3}, {4, 4}};
  EXPECT_EQ(pack(PackingMethod::balanced, 10), four);
  // With x: 5, 5, 10, 7; {2-3} costs exactly the cap and is accepted (<=).
  EXPECT_EQ(pack(PackingMethod::balanced_addx, 10), four);
  // Just below: S = 4 fails, S = 5 (share 4: targets 4, 8, 12, 16) leaves pack 2 empty: nothing.
  EXPECT_FALSE(pack(PackingMethod::balanced_addx, 9.999).has_value());
  // Plain balanced compares Σm alone, strictly: {2-3} (7) fails at a cap of 7, fits just above.
  EXPECT_FALSE(pack(PackingMethod::balanced, 7).has_value());
  EXPECT_EQ(pack(PackingMethod::balanced, 7.001), four);
}

TEST(HarmonyPacking, MemoryShareIsFlooredTimeShareIsNot)
{
  // Σ = 10 in 3 packs (the first guess at a cap of 4.5, and the last try). Memory: the share 10 / 3 floors to 3 (the
  // authors' integer `//`); targets 3 and 6 are first reached at layers 0 and 1 (prefix 3, 6, 10), so the first pack
  // would start and end before layer 0: empty, nothing. Time divides exactly: targets 3.33 and 6.67 are reached at
  // layers 1 and 2: {0} {1} {2}, costing 3, 3, 4 <= 4.5.
  const LayerCosts costs{{3, 3, 4}, {0, 0, 0}, {3, 3, 4}};
  EXPECT_FALSE(pack_layers(PackingMethod::balanced, costs, 4.5).has_value());
  EXPECT_FALSE(pack_layers(PackingMethod::balanced_addx, costs, 4.5).has_value());
  EXPECT_EQ(pack_layers(PackingMethod::balanced_time, costs, 4.5), (Packs{{0, 0}, {1, 1}, {2, 2}}));
}

TEST(HarmonyPacking, BalancedTimeAndReuseBoundaries)
{
  // Time prefix 1, 2, 4, 7, 10. S = 2 (target 5 -> layer 3): {0-2} costs 12 + 1. S = 3: targets 3.33 and 6.67 both
  // reach layer 3, an empty pack. S = 4: targets 2.5, 5, 7.5 -> layers 2, 3, 4: {0-1} {2} {3} {4} costing 8, 8, 5, 7.
  const Packs four{{0, 1}, {2, 2}, {3, 3}, {4, 4}};
  EXPECT_EQ(pack(PackingMethod::balanced_time, 10), four);
  EXPECT_EQ(pack(PackingMethod::balanced_time, 8), four); // two packs cost exactly 8: accepted (<=)
  // Reuse of the same packs before the last under a cap of 8: {0-1} and {2} cost exactly 8: rejected (<).
  const Packs reused{{0, 1}, {2, 2}, {3, 3}};
  EXPECT_FALSE(reusable_packs(reused, chain(), 8).has_value());
  EXPECT_EQ(reusable_packs(reused, chain(), 8.001), reused);
  EXPECT_THROW((void)pack(PackingMethod::reuse, 10), InputError);
}

TEST(HarmonyPacking, MethodListsAndNamedSets)
{
  const PackingMethods paper = parse_packing_methods(PackingLists{});
  EXPECT_EQ(paper.forward, (std::vector<PackingMethod>{PackingMethod::balanced_time, PackingMethod::reuse}));
  EXPECT_EQ(paper.backward, (std::vector<PackingMethod>{PackingMethod::balanced_time}));
  EXPECT_EQ(parse_packing_methods({"paper", "paper"}).forward, paper.forward);
  const PackingMethods authors = parse_packing_methods({"authors", "authors"});
  EXPECT_EQ(authors.forward,
            (std::vector<PackingMethod>{PackingMethod::greedy_reverse_addx, PackingMethod::balanced_addx,
                                        PackingMethod::reuse, PackingMethod::balanced_time}));
  EXPECT_EQ(authors.backward, (std::vector<PackingMethod>{PackingMethod::greedy_reverse_addx,
                                                          PackingMethod::balanced_addx, PackingMethod::balanced_time}));
  EXPECT_EQ(parse_packing_methods({"greedy,balanced", "greedy_reverse"}).forward,
            (std::vector<PackingMethod>{PackingMethod::greedy, PackingMethod::balanced}));
  for (const PackingMethods& methods : {paper, authors})
    for (const PackingMethod method : methods.forward)
      EXPECT_EQ(parse_packing_methods({packing_method_name(method), "paper"}).forward,
                std::vector<PackingMethod>{method});
  EXPECT_THROW((void)parse_packing_methods({"greedy,", "paper"}), InputError);
  EXPECT_THROW((void)parse_packing_methods({"fastest", "paper"}), InputError);
  EXPECT_THROW((void)parse_packing_methods({"paper", "reuse"}), InputError);
  EXPECT_THROW((void)parse_packing_methods({"paper", ""}), InputError);
}

} // namespace
} // namespace memsim::harmony
