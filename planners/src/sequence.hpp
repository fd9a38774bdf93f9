#pragma once
// Helpers shared by planners that run every op on one compute stream.
#include "memsim/planners/plan.hpp"
#include "memsim/sim/flat_lists.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
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

// For every position of `sequence`, the tensors (by id) whose current generation ends there: each produced tensor's
// generation ends at its last read before it is produced again (or at its producer when nothing reads it), except
// tensors the default schedule keeps to the end (weight gradients) and initially resident ones.
FlatLists generation_ends(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence);

// Emits compute/recompute steps for `sequence` on device 0's compute stream and frees each produced tensor right
// after its last read before it is produced again (or right after its producer when nothing reads it), except
// tensors the default schedule keeps to the end (weight gradients) and initially resident ones. Memory on a single
// stream is exact: the returned peak is the memory cursor's, what the simulator will see.
SequentialPlan emit_sequence(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence, Plan& plan);

} // namespace memsim::planning
