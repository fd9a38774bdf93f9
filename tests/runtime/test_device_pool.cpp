// DevicePool: placement, stream-ordered reuse (waits on release steps), fragmentation.
#include "memsim/runtime/device_pool.hpp"

#include <gtest/gtest.h>

#include <set>

using memsim::StepId;
using memsim::runtime::DevicePool;

namespace {

auto none_ordered = [](StepId) { return false; };
auto all_ordered = [](StepId) { return true; };

} // namespace

TEST(DevicePool, PlacesAlignedBlocksOneAfterAnother)
{
  DevicePool pool(1000, 100);
  auto a = pool.place(250, none_ordered);
  auto b = pool.place(100, none_ordered);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(b->offset, 300u); // 250 rounded up to the 100-byte alignment
  EXPECT_TRUE(a->waits.empty());
  EXPECT_EQ(pool.free_bytes(), 600u);
  EXPECT_EQ(pool.largest_free_block(), 600u);
}

TEST(DevicePool, ZeroBytesNeedNoSpace)
{
  DevicePool pool(100, 100);
  ASSERT_TRUE(pool.place(100, none_ordered));
  auto empty = pool.place(0, none_ordered);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->offset, 0u);
}

TEST(DevicePool, ReusingAFreedBlockWaitsForItsReleaseUnlessOrdered)
{
  DevicePool pool(300, 100);
  auto a = pool.place(100, none_ordered);
  ASSERT_TRUE(pool.place(200, none_ordered));
  pool.release(a->offset, 7);
  // Only a's block is free: an allocation not ordered after step 7 must wait on it.
  auto unordered = pool.place(100, none_ordered);
  ASSERT_TRUE(unordered);
  EXPECT_EQ(unordered->offset, 0u);
  EXPECT_EQ(unordered->waits, std::vector<StepId>{7});
  pool.release(unordered->offset, 9);
  auto ordered = pool.place(100, all_ordered);
  ASSERT_TRUE(ordered);
  EXPECT_TRUE(ordered->waits.empty());
}

TEST(DevicePool, PrefersFreshSpaceOverAWaitAndTightFitsOverLooseOnes)
{
  DevicePool pool(1000, 100);
  auto a = pool.place(200, none_ordered);
  ASSERT_TRUE(pool.place(100, none_ordered));
  pool.release(a->offset, 3); // [0,200) free after step 3, [300,1000) never used
  auto fresh = pool.place(200, none_ordered);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->offset, 300u);
  EXPECT_TRUE(fresh->waits.empty());
  // Ordered after step 3: the exact 200-byte hole beats the 500-byte tail.
  auto reuse = pool.place(200, all_ordered);
  ASSERT_TRUE(reuse);
  EXPECT_EQ(reuse->offset, 0u);
}

TEST(DevicePool, AdjacentFreedBlocksFormOneRunThatWaitsForBothReleases)
{
  DevicePool pool(600, 100);
  auto a = pool.place(300, none_ordered);
  auto b = pool.place(300, none_ordered);
  pool.release(a->offset, 4);
  pool.release(b->offset, 2);
  auto both = pool.place(600, none_ordered);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->offset, 0u);
  EXPECT_EQ(both->waits, (std::vector<StepId>{2, 4}));
  // Only the release that is not ordered yet needs a wait.
  pool.release(both->offset, 5);
  auto half = pool.place(600, [](StepId step) { return step != 5; });
  ASSERT_TRUE(half);
  EXPECT_EQ(half->waits, std::vector<StepId>{5});
}

TEST(DevicePool, FragmentationLeavesNoRoomAlthoughEnoughBytesAreFree)
{
  DevicePool pool(1000, 100);
  auto a = pool.place(300, none_ordered);
  auto b = pool.place(300, none_ordered);
  auto c = pool.place(300, none_ordered);
  ASSERT_TRUE(a && b && c);
  pool.release(b->offset, 1);
  EXPECT_EQ(pool.free_bytes(), 400u);
  EXPECT_EQ(pool.largest_free_block(), 300u);
  EXPECT_FALSE(pool.place(400, all_ordered));
  // The remainder of a carved block keeps its release step.
  auto part = pool.place(100, [](StepId) { return false; });
  ASSERT_TRUE(part);
  EXPECT_EQ(part->offset, 900u); // the never-used tail needs no wait
}

TEST(DevicePool, SettleMergesBlocksWhoseReleasesAreOrderedForEveryone)
{
  DevicePool pool(1000, 100);
  std::vector<std::uint64_t> offsets;
  for (int i = 0; i < 5; ++i)
    offsets.push_back(pool.place(200, none_ordered)->offset);
  for (int i = 0; i < 5; ++i)
    pool.release(offsets[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(pool.block_count(), 5u);
  pool.settle([](StepId step) { return step < 3; }); // steps 0..2 ordered before all future steps
  EXPECT_EQ(pool.block_count(), 3u);                 // [0,600) merged; 3 and 4 kept apart
  auto merged = pool.place(600, none_ordered);
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->offset, 0u);
  EXPECT_TRUE(merged->waits.empty());
}

TEST(DevicePool, ReleasingAnUnknownBlockIsALogicError)
{
  DevicePool pool(1000, 100);
  EXPECT_THROW(pool.release(300, 1), std::logic_error);
}
