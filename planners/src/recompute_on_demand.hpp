#pragma once
// The backward of a plan that drops forward outputs after their last forward read and recomputes them on demand
// (Chen et al.'s checkpoints, SuperNeurons): the trace order with, before every backward or update op, recompute
// entries for the dropped tensors it reads, back to tensors that are still on the device.
#include "sequence.hpp"

#include "memsim/sim/trace_analysis.hpp"

#include <cstdint>
#include <vector>

namespace memsim::planning {

enum class RecomputeMode {
  memory,     // every op recomputes what it reads, and the copies die with it
  speed,      // a recomputed tensor stays until its last read: each dropped tensor is recomputed at most once
  cost_aware, // SuperNeurons: speed when what one op needs recomputed fits in the bottleneck, memory otherwise
  lineage,    // Capuchin / mu-TWO: a dropped tensor a backward op reads is recomputed once and stays until its last
              // read; the dropped tensors its recomputation needs are temporaries, recomputed again for each target
};

// "memory", "speed", "cost-aware" or "lineage".
RecomputeMode recompute_mode_named(const std::string& name);

// `dropped[op]`: a forward op whose outputs are freed after their last forward read and recomputed when the backward
// reads them. `bottleneck_bytes` is cost_aware's threshold.
std::vector<SequenceEntry> recompute_on_demand(const TraceAnalysis& analysis, const std::vector<bool>& dropped,
                                               RecomputeMode mode, std::uint64_t bottleneck_bytes = 0);

// SuperNeurons' bottleneck: the most memory one op touches (its inputs, outputs and workspace).
std::uint64_t largest_op_memory(const Trace& trace);

} // namespace memsim::planning
