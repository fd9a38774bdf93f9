// Figure 12's ablation partitioners: K contiguous blocks of equal op count, compute time or bytes accessed.
#include "memsim/planners/dynn/blocks.hpp"

#include <algorithm>

namespace memsim::dynn {

Partition partition_equal(const BlockIndex& index, EqualBy by, std::size_t blocks)
{
  const BlockProblem& problem = index.problem();
  const std::size_t n = index.op_count();
  const std::size_t count = std::min(std::max<std::size_t>(blocks, 1), n);
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    double weight = 1.0;
    if (by == EqualBy::time)
      weight = problem.ops[i].time_s;
    else if (by == EqualBy::bytes) {
      std::uint64_t bytes = 0;
      for (std::uint32_t t : problem.ops[i].tensors)
        bytes += problem.bytes[t];
      weight = static_cast<double>(bytes);
    }
    prefix[i + 1] = prefix[i] + weight;
  }
  if (prefix[n] <= 0) // nothing to balance (all weights zero): equal op counts
    return partition_equal(index, EqualBy::ops, blocks);
  Partition partition;
  std::size_t end = 0;
  for (std::size_t k = 1; k < count; ++k) {
    const double target = prefix[n] * static_cast<double>(k) / static_cast<double>(count);
    // The first end whose prefix reaches the target, keeping one op for each block still to come.
    std::size_t cut = static_cast<std::size_t>(
        std::lower_bound(prefix.begin() + static_cast<std::ptrdiff_t>(end + 1), prefix.end(), target) - prefix.begin());
    cut = std::clamp(cut, end + 1, n - (count - k));
    partition.push_back(cut);
    end = cut;
  }
  partition.push_back(n);
  return partition;
}

bool partition_fits(const BlockIndex& index, const Partition& partition)
{
  std::size_t begin = 0;
  for (std::size_t end : partition) {
    if (end <= begin || end > index.longest_end(begin))
      return false;
    begin = end;
  }
  return begin == index.op_count();
}

} // namespace memsim::dynn
