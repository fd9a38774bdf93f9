#pragma once
// Derived views of a Trace: default-schedule lifetimes and memory, and the chain view for chain planners.
#include "memsim/traces/trace.hpp"

#include <string>
#include <vector>

namespace memsim {

// The one implementation of the framework's release rules (the core's TraceAnalysis wraps it).
// Under the framework's default schedule (ops in trace order, a tensor allocated when produced and
// released after `free_after` or its last use; initially resident tensors live throughout).
struct TensorLifetime {
  std::optional<OpId> produced_by;    // absent for initially resident tensors
  std::optional<OpId> last_use;       // last op that reads it (absent: never read)
  std::optional<OpId> released_after; // absent: lives until the end of the iteration
};

std::vector<TensorLifetime> default_lifetimes(const Trace& trace);

// The default schedule's memory. Computed by the execution core (memsim/sim/trace_analysis.hpp:
// default_memory_profile), whose memory cursor is the one sequential account; traces do not account memory.
struct MemoryProfile {
  std::uint64_t resident_bytes = 0; // initially resident tensors
  std::uint64_t peak_bytes = 0;     // max over ops of memory in use while the op runs
  OpId peak_op = 0;
  std::vector<std::uint64_t> in_use_during; // per op: bytes in use while it runs (incl. workspace)
};

// The chain view (Beaumont et al.): per layer l, forward/backward times, output size a_l (what layer l+1
// reads), saved size abar_l (all forward-produced bytes of layer l alive at the end of the forward phase),
// and overheads (extra bytes the layer's forward/backward needs beyond inputs and outputs).
struct ChainLayer {
  int layer = 0;
  double forward_time_s = 0;
  double backward_time_s = 0;
  std::uint64_t output_bytes = 0;      // a_l
  std::uint64_t saved_bytes = 0;       // abar_l (includes a_l)
  std::uint64_t forward_overhead = 0;  // peak extra bytes during forward of l
  std::uint64_t backward_overhead = 0; // peak extra bytes during backward of l
  std::vector<OpId> forward_ops;
  std::vector<OpId> backward_ops;
  TensorId output_tensor = -1;         // the activation layer l+1 reads (the chain edge)
  std::vector<TensorId> saved_tensors; // forward-produced tensors kept for backward
};

struct ChainView {
  std::uint64_t input_bytes = 0; // a_0: the network input
  std::uint64_t resident_bytes = 0;
  std::vector<ChainLayer> layers;
  std::vector<OpId> loss_ops;
  std::vector<OpId> update_ops;
};

// Throws Infeasible with the reason when the trace is not a chain at layer granularity
// (a forward op reads a forward activation of a layer other than itself or the one before, layers
// out of order, ...).
ChainView chain_view(const Trace& trace);

} // namespace memsim
