#pragma once
// Helpers shared by planners that run every op on one compute stream.
#include "memsim/planners/plan.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/trace.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace memsim::planning {

struct SequenceEntry {
  OpId op = 0;
  bool recompute = false;
};

struct SequentialPlan {
  std::uint64_t peak_bytes = 0;
  OpId peak_op = 0;
};

// Per position of a sequence, a list of tensor ids, in one flat array: a vector per position was most of the time of
// building them for mu-two's unrolled rings (10^5 positions, rebuilt for every probed placement).
class PositionLists {
public:
  PositionLists() = default;
  // `entries`: (position, tensor) pairs in any order, each position below `positions`; every position's list comes
  // out in ascending tensor id.
  PositionLists(std::size_t positions, const std::vector<std::pair<std::size_t, TensorId>>& entries);
  std::size_t size() const { return offsets_.size() - 1; }
  std::span<const TensorId> operator[](std::size_t position) const
  {
    return std::span<const TensorId>(ids_).subspan(offsets_[position], offsets_[position + 1] - offsets_[position]);
  }

private:
  std::vector<std::size_t> offsets_{0}; // position p's ids are ids_[offsets_[p], offsets_[p + 1])
  std::vector<TensorId> ids_;
};

// For every position of `sequence`, the tensors (by id) whose current generation ends there: each produced tensor's
// generation ends at its last read before it is produced again (or at its producer when nothing reads it), except
// tensors the default schedule keeps to the end (weight gradients) and initially resident ones.
PositionLists generation_ends(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence);

// Emits compute/recompute steps for `sequence` on device 0's compute stream and frees each produced tensor right
// after its last read before it is produced again (or right after its producer when nothing reads it), except
// tensors the default schedule keeps to the end (weight gradients) and initially resident ones. Memory on a single
// stream is exact: the returned peak is the memory cursor's, what the simulator will see.
SequentialPlan emit_sequence(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence, Plan& plan);

} // namespace memsim::planning
