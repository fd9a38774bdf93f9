#pragma once
// μ-TWO's swap/recompute scheduler on one graph without multiplexing (shared/specs/mu-two.md §6.1 Alg. B, §6.2
// case 1 and the backward scan of Alg. C, §6.3 lineage, §6.5 estimate): HFTA+Capuchin's scheduler.
//
// Candidates are forward activations read by the backward that are live at a position over the budget in the
// current schedule (A2). Each round compares the swap of the candidate idle longest (its stall: the H2D time not
// hidden by the backward entries before its first backward use, H2D serial, never reaching into positions over the
// budget) with the recomputation of the one saving the most bytes per second of recompute (its lineage back to
// retained tensors and weights, counted once per regeneration: Alg. E/F), takes the cheaper (a tie recomputes), and
// stops when the emitted plan runs within the budget on the fast engine.
#include "async_account.hpp"
#include "swap_recompute_stats.hpp"

#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>
#include <vector>

namespace memsim::planning {

enum class OffloadRelease {
  safe,  // an offloaded tensor counts until the op running when its D2H ends has finished (compute waits for it)
  paper, // released at its last forward use, as Alg. G
};

struct CapuchinOptions {
  const char* planner = "";
  std::uint64_t budget_bytes = 0;
  OffloadRelease offload_release = OffloadRelease::safe;
  IdleMetric idle_metric = IdleMetric::inactive;
};

enum class Decision { swap, recompute };

struct CapuchinChoice {
  TensorId tensor = 0;
  Decision decision = Decision::swap;
  double overhead_s = 0; // the overhead it was chosen on: swap stall or total recompute time
};

struct CapuchinSchedule {
  Plan plan;                           // emitted on the trace's own ids, checked on the fast engine
  std::vector<CapuchinChoice> choices; // in decision order (a recompute also drops its lineage's temporaries)
  std::uint64_t swapped_bytes = 0;
  std::uint64_t recomputed_bytes = 0; // bytes of the forward outputs dropped and recomputed
  double estimate_s = 0;              // §6.5 list-scheduling estimate of the iteration
};

// Throws Infeasible when the candidates run out before the plan fits.
CapuchinSchedule schedule_capuchin(const Trace& trace, const Machine& machine, const CapuchinOptions& options);

// §6.5: compute runs in sequence order and waits for the prefetches of what it reads; D2H is serial and starts when
// the tensor's last forward use ends; H2D is serial, in first-use order, and starts at max(end of its trigger entry,
// end of the previous H2D, end of its D2H); an entry waits for the prefetch of each moved tensor it is the first
// backward use of. Entry i takes `entry_time[i]`.
struct SwapTimeline {
  std::vector<double> start, end;                // per sequence entry
  std::vector<double> offload_end, prefetch_end; // per moved tensor
};
SwapTimeline list_schedule(const std::vector<double>& entry_time, const std::vector<MovedTensor>& moved,
                           const std::vector<double>& d2h_time, const std::vector<double>& h2d_time);

// The memory in use while each entry of `sequence` runs, on the core's memory cursor: moved tensors leave at their
// last forward use (paper) or once the entry running when their D2H ends (by `timeline`) has finished (safe), and
// come back after their trigger entry. `peak` receives the cursor's peak.
std::vector<std::uint64_t> replay_memory(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence,
                                         const std::vector<MovedTensor>& moved, const SwapTimeline& timeline,
                                         OffloadRelease release, std::uint64_t& peak);
// The same with the sequence's generation_ends (sequence.hpp) already at hand, for callers that replay one sequence
// under many sets of moved tensors.
std::vector<std::uint64_t> replay_memory(const TraceAnalysis& analysis, const std::vector<SequenceEntry>& sequence,
                                         const FlatLists& ends, const std::vector<MovedTensor>& moved,
                                         const SwapTimeline& timeline, OffloadRelease release, std::uint64_t& peak);

} // namespace memsim::planning
