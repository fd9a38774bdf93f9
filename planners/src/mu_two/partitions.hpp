#pragma once
// μ-TWO's sub-array constructor (shared/specs/mu-two.md §4.1, A4, A5): the partitions of N models into fused
// sub-arrays that the scheduler tries. Each partition lists its sizes in ring order (largest first, so neighbours,
// which multiplex, are closest in size).
#include <string>
#include <vector>

namespace memsim::planning::mu_two {

// The rule that reproduces the paper's example (N = 8: 4+4, 3+3+1+1, 2+2+2+2, 1×8): for s = ⌊N/2⌋ … 1, q = ⌊N/s⌋
// sub-arrays of s and the rest r: kept as one sub-array when that makes the count even, else split in ⌈r/2⌉ + ⌊r/2⌋
// (r ≥ 2), else kept (an odd count: the ring has no pairs to break). Duplicates are dropped.
std::vector<std::vector<int>> paper_partitions(int models);

// Every partition of N into at least two sizes (A4's `all`), largest sizes first, in lexicographically decreasing
// order.
std::vector<std::vector<int>> all_partitions(int models);

// "paper", "all", "finest" (only N sub-arrays of one model: the smallest working set) or "none" (no split), with the
// single sub-array {N} first when `include_full_fusion` (A5).
std::vector<std::vector<int>> candidate_partitions(int models, const std::string& rule, bool include_full_fusion);

std::string partition_text(const std::vector<int>& sizes); // "3+3+1+1"

} // namespace memsim::planning::mu_two
