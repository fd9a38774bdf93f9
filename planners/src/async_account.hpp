#pragma once
// Emission of a single-stream compute sequence with asynchronous swaps (vDNN, SuperNeurons), and the pessimistic
// sequential account that keeps any timing the simulator produces within the budget.
//
// The account (a MemoryCursor) walks the sequence in order. A tensor being offloaded still counts until a later
// compute step is made to depend on its free; a prefetch counts from the point where it is issued (its deps
// guarantee it cannot start earlier). Whenever the next allocation would exceed the budget, compute waits for an
// offload to finish (oldest first) or a prefetch waits for memory; if it still does not fit, emission throws
// Infeasible naming the op.
#include "sequence.hpp"

#include "memsim/planners/plan.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsim::planning {

// A tensor copied to the host after its forward reads and brought back for its backward reads. Positions index
// the sequence.
struct MovedTensor {
  TensorId tensor = 0;
  std::size_t last_forward_use = 0;   // its producer, or its last reader before the backward region
  std::size_t first_backward_use = 0; // its first reader in the backward region
  std::size_t trigger = 0;            // the prefetch may be issued once this entry has run
};

enum class SwapSync {
  memory, // compute waits for a transfer only when the account needs the memory (or the op reads the tensor)
  layer,  // every op also waits for the transfers that were in flight during the op before it (vDNN's executor)
};

struct SwapEmission {
  const char* planner = "";
  std::uint64_t budget_bytes = 0;
  SwapSync sync = SwapSync::memory;
  // Start the offload when its last forward reader starts (vDNN's executor), not after that reader ends.
  bool offload_at_consumer_start = false;
  // SuperNeurons' LRU tensor cache: the device copy of an offloaded tensor stays until the account needs room (least
  // recently offloaded first), and a tensor still cached when its prefetch is due needs no transfer.
  bool cache = false;
  // The sequence's generation_ends (sequence.hpp), when the caller already holds them (μ-TWO's exact check emits
  // one sequence under thousands of sets of moved tensors); computed here when null.
  const FlatLists* generation_ends = nullptr;
};

struct SwapResult {
  std::uint64_t peak_bytes = 0;
  std::size_t prefetches = 0;
  std::size_t cache_hits = 0;
};

// The position of the first entry of the backward region: the first recompute or backward op (the sequence's size
// when there is none).
std::size_t backward_region_start(const Trace& trace, const std::vector<SequenceEntry>& sequence);

// Emits `sequence` on device 0's compute stream with the offloads and prefetches of `moved`. Other tensors are freed
// as emit_sequence frees them.
SwapResult emit_with_swaps(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence,
                           const std::vector<MovedTensor>& moved, const SwapEmission& emission, Plan& plan);

} // namespace memsim::planning
