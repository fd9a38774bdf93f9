// The core's flat per-index lists (sim/flat_lists.hpp): built from (index, tensor) pairs in any order, each index's
// ids ascending; or appended a list at a time, each in the order given.
#include "memsim/sim/flat_lists.hpp"
#include "unpacked_lists.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

using test::unpacked;

TEST(FlatLists, GroupsPairsByIndexInAscendingIds)
{
  const FlatLists lists(4, {{2, 9}, {0, 5}, {2, 3}, {2, 7}, {3, 1}});
  EXPECT_EQ(unpacked(lists), (std::vector<std::vector<TensorId>>{{5}, {}, {3, 7, 9}, {1}}));
  EXPECT_EQ(FlatLists().size(), 0u);
  EXPECT_EQ(unpacked(FlatLists(2, {})), (std::vector<std::vector<TensorId>>{{}, {}}));
}

TEST(FlatLists, AppendsListsInTheOrderGiven)
{
  FlatLists lists;
  lists.reserve(3);
  const std::vector<TensorId> first{7, 4, 7}, third{2};
  lists.push_back(first);
  lists.push_back({});
  lists.push_back(third);
  EXPECT_EQ(unpacked(lists), (std::vector<std::vector<TensorId>>{{7, 4, 7}, {}, {2}}));
}

} // namespace
} // namespace memsim
