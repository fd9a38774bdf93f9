// Figure 12's ablation partitioners: K contiguous blocks of equal op count, compute time or bytes accessed.
#include "memsim/planners/dynn/blocks.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace memsim::dynn {

namespace {

// Prefix sums of the per-op weights the split balances; all zero (nothing to balance) falls back to op counts.
std::vector<double> weight_prefix(const BlockIndex& index, EqualBy by)
{
  const BlockProblem& problem = index.problem();
  const std::size_t n = index.op_count();
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
  if (n > 0 && prefix[n] <= 0)
    return weight_prefix(index, EqualBy::ops);
  return prefix;
}

Partition split_prefix(const std::vector<double>& prefix, std::size_t blocks)
{
  const std::size_t n = prefix.size() - 1;
  const std::size_t count = std::min(std::max<std::size_t>(blocks, 1), n);
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

} // namespace

Partition partition_equal(const BlockIndex& index, EqualBy by, std::size_t blocks)
{
  return split_prefix(weight_prefix(index, by), blocks);
}

std::optional<Partition> partition_equal_fitting(const BlockIndex& index, EqualBy by, std::size_t blocks)
{
  const std::vector<double> prefix = weight_prefix(index, by);
  for (std::size_t count = std::max<std::size_t>(blocks, 1); count <= index.op_count(); ++count) {
    Partition partition = split_prefix(prefix, count);
    if (partition_fits(index, partition))
      return partition;
  }
  return std::nullopt;
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
