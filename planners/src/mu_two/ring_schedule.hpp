#pragma once
// μ-TWO's scheduler on a ring of fused sub-arrays (shared/specs/mu-two.md §6, A3 `joint`, A6 `ring`): one Alg. B
// loop over every sub-array's candidates (forward activations its backward reads, live where the probe cycle is over
// the budget, A2). Each round compares swapping the candidate idle longest with recomputing the one that saves the
// most bytes per recompute second (lineage, Alg. D/E/F, as hfta-capuchin) and takes the cheaper.
//
// A swap's overhead (Alg. C): the forward ops of the next sub-array are multiplexed before its first backward use
// (kept in forward order, a placement that only grows), as many as its transfer needs and memory allows (the probe
// cycle's peak must not rise and no position in its window may exceed the budget); then the prefetch is issued
// earlier over backward entries while each position still has room for it (the first time it does not, the peak is
// reached: later swaps are prefetched right before their use, case 1). The overhead is what the §6.5 list-scheduling
// estimator says the swap adds to the probe cycle; the case (2a, 2b, 3, 1a, 1b) is recorded. The loop stops when the
// plan, emitted with memory-safe deps on the unrolled ring, runs within the budget on the fast engine.
//
// A ring below its floor is refused before the loop: the sub-arrays' preexisting tensors (weights, optimizer state,
// inputs), which no decision moves, plus the most any op holds besides them (memsim/sim/memory_floor.hpp).
#include "ring_trace.hpp"

#include "../capuchin_schedule.hpp"

#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace memsim::planning::mu_two {

struct RingOptions {
  const char* planner = "mu-two";
  std::uint64_t budget_bytes = 0;
  OffloadRelease offload_release = OffloadRelease::safe;
  IdleMetric idle_metric = IdleMetric::inactive;
  int cycles = 3;        // emitted cycles; the steady iteration is their mean from the second on
  bool multiplex = true; // false: FW_{j+1} always runs after BW_j
  // Called on the first round and every kProgressRounds after it with the scheduler's state (PlanRequest::progress).
  std::function<void(const std::string&)> progress = nullptr;
  std::string label = "ring"; // names the ring in progress lines, e.g. "ring 1x27"
  // Where the search state is kept (ring_state.hpp; PlanRequest::state_dir), saved with each progress line (before
  // it); empty: nowhere. A run finds its ring's state there and resumes from it.
  std::filesystem::path state_dir;
};

struct RingDecision {
  int sub_array = 0;
  TensorId tensor = 0; // in the sub-array's graph
  Decision decision = Decision::swap;
  double overhead_s = 0;       // swap: the estimated stall it adds to a cycle; recompute: its total time
  std::string swap_case;       // "2a", "2b", "3", "1a", "1b" (swaps only)
  std::size_t multiplexed = 0; // forward ops this swap moved into the backward
};

struct RingSchedule {
  RingTrace ring; // the emitted unrolled trace (options.cycles cycles)
  Plan plan;      // on ring.trace's ids, instance 0, each step stamped with its cycle
  std::vector<RingDecision> decisions;
  std::uint64_t swapped_bytes = 0;    // per cycle
  std::uint64_t recomputed_bytes = 0; // per cycle
  std::size_t multiplexed_ops = 0;    // forward ops run inside a backward, per cycle
  double estimate_s = 0;              // the estimator's steady cycle time
  std::uint64_t peak_bytes = 0;       // the fast engine's
};

// `graphs[j]`: sub-array j's fused graph, in ring order. Throws Infeasible below the floor or when the candidates run
// out.
RingSchedule schedule_ring(const std::vector<const Trace*>& graphs, const Machine& machine, const RingOptions& options);

} // namespace memsim::planning::mu_two
