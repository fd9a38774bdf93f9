#pragma once
// μ-TWO's cyclic schedule as one unrolled trace (shared/specs/mu-two.md §4, §10; A6 `ring`): sub-arrays S_0 … S_{m-1}
// (each a fused graph of several models) train in a ring. A prologue runs FW_0; cycle c runs, for j = 0 … m-1, the
// merged graph G_j(c) = BW_j(c) multiplexed with FW_{j+1}(c), where FW_m(c) is FW_0(c + 1). With m = 2 that is the
// paper's G1 = [BW_1, FW_2], G2 = [BW_2, FW_1]. Every sub-array's weights and optimizer state stay resident; only the
// sub-array whose forward just ran carries activations into the next graph.
//
// The unrolled trace holds one copy of each sub-array's per-iteration tensors (activations, gradients, weight
// gradients) per iteration and one copy of its initially resident ones, shared by all iterations; its op order is the
// merged execution order, so the core's trace analysis, memory cursor, sequence helpers and fast engine work on it
// unchanged. An op's `iteration` is the cycle it runs in (the prologue is cycle 0's).
#include "memsim/traces/trace.hpp"

#include <cstddef>
#include <vector>

namespace memsim::planning::mu_two {

// placement[j][k]: how many ops of FW_{j+1} (in forward order) run before op k of BW_j (in backward order),
// non-decreasing in k; the rest run after BW_j. Empty: no multiplexing (BW_j, then FW_{j+1}).
using Placement = std::vector<std::vector<std::size_t>>;

// Where an op or tensor of the unrolled trace comes from.
struct Origin {
  int sub_array = 0;
  int copy = -1;      // the iteration of that sub-array; -1 for a shared (initially resident) tensor
  std::size_t id = 0; // its op or tensor id in the sub-array's graph
};

struct RingTrace {
  Trace trace;
  std::vector<Origin> op_origin, tensor_origin;
  // per sub-array, per template tensor, per copy: its id in `trace` (-1: this copy does not exist)
  std::vector<std::vector<std::vector<TensorId>>> tensor_copy;
  // per sub-array, per template op, per copy: its id in `trace` (-1: none)
  std::vector<std::vector<std::vector<OpId>>> op_copy;
  std::size_t prologue_ops = 0;            // ops [0, prologue_ops) are the prologue FW_0(0)
  std::vector<int> op_graph;               // per op: the merged graph G_j(c) it runs in, c·m + j; -1 in the prologue
  std::vector<std::size_t> cycle_first_op; // the first op of each cycle after the prologue
  int cycles = 0;
};

// A sub-array's graph split into its forward (forward and loss ops) and backward (backward and update ops) halves,
// each in trace order.
struct Halves {
  std::vector<OpId> forward, backward;
};
Halves halves(const Trace& graph);

// Whether the unrolled ops and tensors get names ("s<j>.it<copy>.<name>", shared tensors "s<j>.<name>"). Ids,
// order and everything else are the same either way.
enum class RingNames { named, none };

// `graphs[j]`: S_j's fused graph. Throws InputError when a graph's forward and backward are interleaved.
// `storage`: a ring this function built before, whose allocations the new one reuses (the scheduler builds thousands
// of probe rings, and fresh allocations were most of their cost); the result is the same without it.
RingTrace build_ring_trace(const std::vector<const Trace*>& graphs, int cycles, const Placement& placement = {},
                           RingNames names = RingNames::named, RingTrace storage = {});

} // namespace memsim::planning::mu_two
