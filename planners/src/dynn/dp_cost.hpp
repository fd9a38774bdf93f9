#pragma once
// The pieces of the partitioner's cost model (blocks.hpp, dp_cost) that the DP and the reference evaluation share,
// so that both compute bit-identical times: transfers are summed as integers, then priced once.
#include "memsim/planners/dynn/blocks.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsim::dynn::cost {

struct Transfers {
  std::uint64_t write_back_bytes = 0;
  std::uint64_t prefetch_bytes = 0;
  std::uint64_t count = 0;
};

inline double migration_s(const BlockProblem& problem, const Transfers& transfers)
{
  return problem.latency_s * static_cast<double>(transfers.count) +
         static_cast<double>(transfers.write_back_bytes) / problem.d2h_bytes_per_s +
         static_cast<double>(transfers.prefetch_bytes) / problem.h2d_bytes_per_s;
}

// Adds to `transfers` the prefetches of block [begin, end): each tensor it touches (marked in `seen`) that it does not
// produce and that no op since `resident_since` touched (so it is not resident when the block's migration runs).
inline void add_prefetches(const BlockIndex& index, std::size_t resident_since, std::size_t begin, std::size_t end,
                           std::vector<std::uint8_t>& seen, Transfers& transfers)
{
  const BlockProblem& problem = index.problem();
  for (std::size_t i = begin; i < end; ++i)
    for (std::uint32_t t : problem.ops[i].tensors) {
      if (seen[t] != 0)
        continue;
      seen[t] = 1;
      const bool produced_here = index.produced(t) && index.producer(t) >= begin;
      if (!produced_here && index.previous_access(t, begin) < static_cast<std::ptrdiff_t>(resident_since)) {
        transfers.prefetch_bytes += problem.bytes[t];
        ++transfers.count;
      }
    }
}

// A block's start and finish given the block before it (its start and finish) and its own migration.
struct Times {
  double start_s = 0;
  double finish_s = 0;
};
inline Times next_block(const Times& previous, double migration, double compute)
{
  const double start = std::max(previous.finish_s, previous.start_s + migration);
  return {start, start + compute};
}

} // namespace memsim::dynn::cost

namespace memsim::dynn::detail {

// Throws Infeasible naming the first op whose working set alone exceeds a buffer.
void require_each_op_fits(const BlockIndex& index);
// Maximal feasible blocks from the first op on (the fallback when the DP's work is over its limit).
Partition greedy_blocks(const BlockIndex& index);
// (finish, blocks) lexicographically, finishes within a relative 1e-12 counting as equal.
bool better(double finish, std::size_t blocks, double incumbent_finish, std::size_t incumbent_blocks);

double conservative_cost(const BlockIndex& index, const Partition& partition);
DpResult conservative_dp(const BlockIndex& index, double work_limit);
double exact_cost(const BlockIndex& index, const Partition& partition);
DpResult exact_dp(const BlockIndex& index, double work_limit);

} // namespace memsim::dynn::detail
