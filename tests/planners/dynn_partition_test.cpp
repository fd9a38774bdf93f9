// The execution-block partitioner of dynn-block (spec dynn-offload.md §2.6): a hand-made chain worked out by hand,
// the DP against an exhaustive search over every partition for the DP's own cost, the Figure-12 ablations.
#include "memsim/common/error.hpp"
#include "memsim/planners/dynn/blocks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>

namespace memsim::dynn {
namespace {

// Six ops over 100-byte tensors t0 (an input, on the host) and t1..t6 (produced): op i reads t_i and writes t_{i+1};
// the last op also reads t1. One op takes 1 s; the link moves 100 bytes per second each way, 0.25 s per transfer.
BlockProblem worked_chain()
{
  BlockProblem problem;
  problem.bytes.assign(7, 100);
  problem.needed_after.assign(7, 0);
  for (std::uint32_t i = 0; i < 6; ++i) {
    BlockOp op;
    op.time_s = 1;
    op.tensors = {i, i + 1};
    op.produced = {i + 1};
    problem.ops.push_back(op);
  }
  problem.ops[5].tensors.push_back(1);
  problem.capacity = 300;
  problem.h2d_bytes_per_s = 100;
  problem.d2h_bytes_per_s = 100;
  problem.latency_s = 0.25;
  return problem;
}

TEST(DynnPartition, WorkedChainOneOpPerBlock)
{
  const BlockProblem problem = worked_chain();
  const BlockIndex index(problem);
  const Partition singletons{1, 2, 3, 4, 5, 6};
  const Schedule schedule = schedule_blocks(index, singletons);
  ASSERT_EQ(schedule.blocks.size(), 6u);
  // Block 1 fetches t0 (1.25 s, exposed). Block 3's migration frees t0 (clean, unused later). Block 4's writes t1
  // back (produced, read by op 5): 1.25 s from block 3's start at 3.25, so block 4 starts at 4.5, not 4.25. Block 5's
  // frees t2, block 6's frees t3 and fetches t1 back: 1.25 s from block 5's start at 5.5 -> block 6 starts at 6.75.
  const std::vector<double> starts{1.25, 2.25, 3.25, 4.5, 5.5, 6.75};
  const std::vector<double> migrations{1.25, 0, 0, 1.25, 0, 1.25};
  for (std::size_t j = 0; j < 6; ++j) {
    SCOPED_TRACE(j);
    EXPECT_DOUBLE_EQ(schedule.blocks[j].start_s, starts[j]);
    EXPECT_DOUBLE_EQ(schedule.blocks[j].migration_s, migrations[j]);
    EXPECT_DOUBLE_EQ(schedule.blocks[j].compute_s, 1.0);
  }
  EXPECT_EQ(schedule.blocks[0].prefetch, (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(schedule.blocks[2].evict, (std::vector<std::uint32_t>{0}));
  EXPECT_TRUE(schedule.blocks[2].write_back.empty());
  EXPECT_EQ(schedule.blocks[3].write_back, (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(schedule.blocks[4].evict, (std::vector<std::uint32_t>{2}));
  EXPECT_EQ(schedule.blocks[5].evict, (std::vector<std::uint32_t>{3}));
  EXPECT_EQ(schedule.blocks[5].prefetch, (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(schedule.blocks[5].working_set, (std::vector<std::uint32_t>{1, 5, 6}));
  EXPECT_EQ(schedule.flush_free, (std::vector<std::uint32_t>{1, 4, 5, 6}));
  EXPECT_TRUE(schedule.flush_write_back.empty());
  EXPECT_DOUBLE_EQ(schedule.end_s, 7.75);
  EXPECT_EQ(schedule.h2d_bytes, 200u);
  EXPECT_EQ(schedule.d2h_bytes, 100u);
  // The DP's model charges t1's write-back to block 3's migration (t1 leaves W_2 = {t1, t2} for W_3 = {t2, t3}):
  // block 3 starts at max(3.25, 2.25 + 1.25) = 3.5, block 4 at 4.5 -- the same finish here. The exact sets are the
  // schedule's.
  EXPECT_DOUBLE_EQ(dp_cost(index, singletons), 7.75);
  EXPECT_DOUBLE_EQ(dp_cost(index, singletons, DpSets::exact), 7.75);
}

TEST(DynnPartition, WorkedChainFeasibilityAndDp)
{
  const BlockProblem problem = worked_chain();
  const BlockIndex index(problem);
  // Capacity 300 bytes: three tensors. [0, 2) touches t0..t2; [0, 3) four tensors; the last op t1, t5, t6.
  EXPECT_EQ(index.longest_end(0), 2u);
  EXPECT_EQ(index.longest_end(4), 5u); // [4, 6) would hold t4, t5, t6, t1
  EXPECT_EQ(index.longest_end(5), 6u);
  EXPECT_EQ(index.block_bytes(0, 2), 300u);
  EXPECT_FALSE(partition_fits(index, {3, 6}));
  EXPECT_TRUE(partition_fits(index, {2, 4, 5, 6}));
  // Worked out, blocks {[0,2), [2,4), [4,5), [5,6)}: block 1 fetches t0 (1.25 s) and computes 2 s -> 1.25 to 3.25.
  // Block 2 (t2, t3, t4; t2 retained): the model charges t1's write-back here (t1 leaves W_1, op 5 reads it): 1.25 s
  // from 1.25, hidden; 3.25 to 5.25. Block 3 (t4, t5): nothing moves; 5.25 to 6.25. Block 4 (t5, t6, t1) fetches t1:
  // 1.25 s from block 3's start 5.25 = 6.5 > 6.25 -> 6.5 to 7.5.
  EXPECT_DOUBLE_EQ(dp_cost(index, {2, 4, 5, 6}), 7.5);
  const DpResult dp = partition_dp(index);
  EXPECT_FALSE(dp.greedy);
  EXPECT_TRUE(partition_fits(index, dp.partition));
  EXPECT_DOUBLE_EQ(dp.cost_s, dp_cost(index, dp.partition));
  EXPECT_LE(dp.cost_s, 7.5);
  EXPECT_GE(dp.cost_s, 7.25);         // six seconds of compute after the exposed first fetch
  EXPECT_GE(dp.partition.size(), 4u); // three blocks of at most two ops would need [4, 6), which does not fit
}

TEST(DynnPartition, OpThatDoesNotFitIsInfeasible)
{
  BlockProblem problem = worked_chain();
  problem.capacity = 150;
  const BlockIndex index(problem);
  EXPECT_EQ(index.longest_end(0), 0u);
  EXPECT_THROW((void)partition_dp(index), Infeasible);
}

// Random training-like sequences: each op writes one new tensor and reads one to three older ones (some of them
// host-resident inputs); some ops update an input in place; random sizes, times, links, workspace and capacity.
BlockProblem random_problem(std::mt19937_64& rng, std::size_t ops)
{
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto pick = [&](std::size_t n) {
    return static_cast<std::uint32_t>(std::uniform_int_distribution<std::size_t>(0, n - 1)(rng));
  };
  BlockProblem problem;
  const std::size_t inputs = 1 + pick(3);
  for (std::size_t t = 0; t < inputs + ops; ++t)
    problem.bytes.push_back(10 + pick(90));
  std::uint64_t largest = 0;
  for (std::size_t i = 0; i < ops; ++i) {
    BlockOp op;
    op.time_s = uniform(0.1, 2.0);
    op.workspace_bytes = pick(3) == 0 ? pick(50) : 0;
    const std::size_t reads = 1 + pick(3);
    for (std::size_t r = 0; r < reads; ++r) {
      const std::uint32_t t = pick(inputs + i);
      if (std::find(op.tensors.begin(), op.tensors.end(), t) == op.tensors.end())
        op.tensors.push_back(t);
    }
    if (op.tensors.front() < inputs && pick(4) == 0)
      op.updated.push_back(op.tensors.front());
    const auto produced = static_cast<std::uint32_t>(inputs + i);
    op.tensors.push_back(produced);
    op.produced.push_back(produced);
    std::uint64_t bytes = op.workspace_bytes;
    for (std::uint32_t t : op.tensors)
      bytes += problem.bytes[t];
    largest = std::max(largest, bytes);
    problem.ops.push_back(op);
  }
  for (std::size_t t = 0; t < problem.bytes.size(); ++t)
    problem.needed_after.push_back(pick(3) == 0 ? 1 : 0);
  problem.capacity = largest + pick(200);
  problem.h2d_bytes_per_s = uniform(20, 200);
  problem.d2h_bytes_per_s = uniform(20, 200);
  problem.latency_s = pick(2) == 0 ? 0.0 : uniform(0, 0.3);
  return problem;
}

struct Best {
  double cost = 0;
  std::size_t blocks = 0;
  bool found = false;
};

// Every partition of n ops is a subset of the n - 1 inner cut points.
Best exhaustive(const BlockIndex& index, DpSets sets)
{
  const std::size_t n = index.op_count();
  Best best;
  for (std::uint64_t cuts = 0; cuts < (1ull << (n - 1)); ++cuts) {
    Partition partition;
    for (std::size_t i = 1; i < n; ++i)
      if ((cuts >> (i - 1)) & 1)
        partition.push_back(i);
    partition.push_back(n);
    if (!partition_fits(index, partition))
      continue;
    const double cost = dp_cost(index, partition, sets);
    const double tolerance = 1e-12 * std::max(1.0, best.cost);
    if (!best.found || cost < best.cost - tolerance ||
        (cost <= best.cost + tolerance && partition.size() < best.blocks))
      best = {cost, partition.size(), true};
  }
  return best;
}

void expect_dp_matches_exhaustive_search(DpSets sets)
{
  std::mt19937_64 rng(20240226);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(round);
    const std::size_t ops = 2 + static_cast<std::size_t>(round % 9);
    const BlockProblem problem = random_problem(rng, ops);
    const BlockIndex index(problem);
    const Best oracle = exhaustive(index, sets);
    ASSERT_TRUE(oracle.found);
    const DpResult dp = partition_dp(index, 1e9, sets);
    ASSERT_TRUE(partition_fits(index, dp.partition));
    EXPECT_DOUBLE_EQ(dp.cost_s, dp_cost(index, dp.partition, sets));
    EXPECT_NEAR(dp.cost_s, oracle.cost, 1e-9 * oracle.cost);
    EXPECT_EQ(dp.partition.size(), oracle.blocks);

    // The ablations: K blocks (K = the DP's count), never better than the DP under its cost when they fit.
    for (EqualBy by : {EqualBy::ops, EqualBy::time, EqualBy::bytes}) {
      const Partition equal = partition_equal(index, by, dp.partition.size());
      EXPECT_EQ(equal.size(), dp.partition.size());
      EXPECT_TRUE(std::is_sorted(equal.begin(), equal.end()));
      EXPECT_EQ(std::adjacent_find(equal.begin(), equal.end()), equal.end());
      if (partition_fits(index, equal)) {
        EXPECT_GE(dp_cost(index, equal, sets), dp.cost_s - 1e-12 * dp.cost_s);
      }
    }
  }
}

TEST(DynnPartition, ConservativeDpMatchesExhaustiveSearch)
{
  expect_dp_matches_exhaustive_search(DpSets::conservative);
}
TEST(DynnPartition, ExactDpMatchesExhaustiveSearch) { expect_dp_matches_exhaustive_search(DpSets::exact); }

// The exact-set cost is the runtime's schedule (without the flush) except for the staleness it assumes: a tensor
// evicted a second time without a write in between is charged a second write-back. So it is never below the
// schedule, and equal when no written tensor is evicted twice.
TEST(DynnPartition, ExactSetCostIsTheScheduleUpToRepeatedWriteBacks)
{
  std::mt19937_64 rng(7);
  int equal = 0;
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(round);
    const BlockProblem problem = random_problem(rng, 2 + static_cast<std::size_t>(round % 12));
    const BlockIndex index(problem);
    const DpResult dp = partition_dp(index, 1e9, DpSets::exact);
    const Schedule schedule = schedule_blocks(index, dp.partition);
    const double finish = schedule.blocks.back().finish_s;
    EXPECT_GE(dp.cost_s, finish - 1e-12 * finish);
    std::vector<int> evictions(problem.bytes.size(), 0);
    bool repeated = false;
    for (const BlockSchedule& block : schedule.blocks)
      for (std::uint32_t t : block.evict)
        if (index.first_write(t) < block.begin && index.used_from(t, block.end) && ++evictions[t] > 1)
          repeated = true;
    if (!repeated) {
      EXPECT_NEAR(dp.cost_s, finish, 1e-12 * finish);
      ++equal;
    }
  }
  EXPECT_GT(equal, 200);
}

TEST(DynnPartition, GreedyFallbackTakesMaximalBlocks)
{
  const BlockProblem problem = worked_chain();
  const BlockIndex index(problem);
  const DpResult greedy = partition_dp(index, 1.0);
  EXPECT_TRUE(greedy.greedy);
  EXPECT_EQ(greedy.partition, (Partition{2, 4, 5, 6}));
  EXPECT_DOUBLE_EQ(greedy.cost_s, dp_cost(index, greedy.partition));
  // The exact sets' DP (n L^3 = 48 here) falls back to the conservative one, which still fits n L^2 = 24.
  const DpResult fallback = partition_dp(index, 30.0, DpSets::exact);
  EXPECT_FALSE(fallback.greedy);
  EXPECT_EQ(fallback.sets, DpSets::conservative);
  EXPECT_EQ(fallback.partition, partition_dp(index).partition);
  EXPECT_EQ(partition_dp(index, 48.0, DpSets::exact).sets, DpSets::exact);
}

TEST(DynnPartition, EqualPartitionsWorkedOut)
{
  BlockProblem problem = worked_chain();
  problem.capacity = 1000;
  problem.ops[1].time_s = 3; // times 1 3 1 1 1 1: half of 8 is reached after op 1
  const BlockIndex index(problem);
  EXPECT_EQ(partition_equal(index, EqualBy::ops, 3), (Partition{2, 4, 6}));
  EXPECT_EQ(partition_equal(index, EqualBy::time, 2), (Partition{2, 6}));
  // 200 bytes per op, the last 300: half of 1300 is passed after op 3.
  EXPECT_EQ(partition_equal(index, EqualBy::bytes, 2), (Partition{4, 6}));
  EXPECT_EQ(partition_equal(index, EqualBy::ops, 10), (Partition{1, 2, 3, 4, 5, 6}));
}

TEST(DynnPartition, EqualPartitionGrowsToTheFewestBlocksThatFit)
{
  const BlockProblem problem = worked_chain(); // 300 bytes per buffer
  const BlockIndex index(problem);
  // Two blocks {3, 6}: the first touches t0..t3 (400). Three {2, 4, 6}: the last touches t1, t4, t5, t6 (400).
  // Four {2, 3, 5, 6}: 300, 200, 300 and 300 bytes.
  EXPECT_FALSE(partition_fits(index, partition_equal(index, EqualBy::ops, 2)));
  EXPECT_FALSE(partition_fits(index, partition_equal(index, EqualBy::ops, 3)));
  EXPECT_EQ(partition_equal_fitting(index, EqualBy::ops, 2), (Partition{2, 3, 5, 6}));
  EXPECT_EQ(partition_equal_fitting(index, EqualBy::ops, 4), partition_equal(index, EqualBy::ops, 4));
  // Already fitting: unchanged.
  EXPECT_EQ(partition_equal_fitting(index, EqualBy::ops, 5), partition_equal(index, EqualBy::ops, 5));
  BlockProblem tight = problem;
  tight.capacity = 250; // the last op alone touches 300 bytes: no split fits
  const BlockIndex tight_index(tight);
  EXPECT_EQ(partition_equal_fitting(tight_index, EqualBy::time, 1), std::nullopt);
}

} // namespace
} // namespace memsim::dynn
