#pragma once
// What DyNN-Offload's pilot predicts (spec dynn-offload.md §1.4, §1.6): an iteration's execution blocks, each as a
// 10-vector -- (1) the number of ops in the block, (2-7) the six idiom counts summed over its ops, (8-10) the three
// dimension sums summed over its ops -- laid out in `max_blocks` fixed slots (spec §4 A5: an all-zero slot is no
// block). The labels are the partition DP's blocks (blocks.hpp partition_dp) of each iteration of a trace.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/dynn/blocks.hpp"
#include "memsim/planners/dynn/idioms.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace memsim::dynn {

inline constexpr std::size_t kBlockVectorSize = 1 + kSignatureSize;
using BlockVector = std::array<double, kBlockVectorSize>;

// One 10-vector per block of `partition` over the rows of `matrix` (one row per op).
std::vector<BlockVector> block_vectors(const FeatureMatrix& matrix, const Partition& partition);

// The fixed-length label: max_blocks x 10 values, block j in slot j, the remaining slots zero. Throws InputError
// when there are more blocks than slots.
std::vector<double> label_vector(const std::vector<BlockVector>& blocks, std::size_t max_blocks);

// The mapping back to operators (§1.4) on a resolved iteration: block j holds the next round(op count of slot j)
// ops; the first slot whose rounded op count is < 1 ends the list. Nothing when the counts do not add up to
// `op_count` exactly (the runtime then falls back: a misprediction).
std::optional<Partition> partition_from_label(const std::vector<double>& label, std::size_t op_count);

// Whether `predicted` equals `label` once every integer component (op count and idiom counts) is rounded, in every
// slot, and every dimension sum lies within `dims_tolerance` (relative, of the label's value; absolute below 1).
bool label_matches(const std::vector<double>& predicted, const std::vector<double>& label, double dims_tolerance);

struct IterationLabel {
  int iteration = 0;
  std::vector<OpId> ops; // the iteration's ops, in trace order
  FeatureMatrix matrix;
  Partition partition;
  std::vector<BlockVector> blocks;
};

// Every iteration of `trace` partitioned by the DP (conservative sets) at `capacity_bytes` per buffer, on GPU 0's
// cost model and host link. Throws Infeasible when some op alone does not fit a buffer.
std::vector<IterationLabel> iteration_labels(const Trace& trace, const Machine& machine, std::uint64_t capacity_bytes);

} // namespace memsim::dynn
