#pragma once
// Harmony's task graph as a multi-GPU memsim plan over a layer-chain trace (memsim/traces/layer_chain.hpp), after
// spec §2 "Plan emission for Harmony PP": every rank lists its tasks in global order on the streams compute, h2d,
// d2h, p2p_out, p2p_in (GPU r) and cpu<r> (host, device -1). Weights, optimizer state and data start on the host;
// W is swapped in once per task (grouping), boundary tensors move by the channel the task graph gave them.
#include "task_graph.hpp"

#include "memsim/planners/plan.hpp"
#include "memsim/traces/layer_chain.hpp"

namespace memsim::harmony {

struct EmissionSwitches {
  bool p2p = true;               // false: every P2P boundary goes through host memory (swap out, swap in)
  bool prefetch = true;          // W of the next task once the previous task's compute ends; inputs double-buffered
  bool jit_update = true;        // false: the CPU updates wait for the whole backward pass
  bool group = true;             // false: W swapped in again for every microbatch (dW still accumulates on the GPU)
  bool optimizer_offload = true; // false: the optimizer step on the updating GPU right after the backward task
  // dp with the CPU update: after the all-reduce, rank 0 alone swaps dW out (the authors' code, spec A2), or every
  // rank does (the paper's 3N|W| count; the host keeps one copy, the update waits for all of them).
  bool every_rank_swaps_gradients = false;
};

// The chains forward tasks run (at U_F) and backward tasks run (at U_B): the same object when U_F = U_B, else two
// chains sharing W, dW, K and the updates (microbatch_chain.hpp).
struct MicrobatchChains {
  const LayerChainIds& forward;
  const LayerChainIds& backward;
};

// Appends the steps, placement and sharing rules to `plan`. pp: the graph's binding; dp: every GPU runs the graph's
// list on its own `graph.microbatches_*` instances, dW all-reduced after each backward task, rank 0 swaps dW out and
// updates. Every forward and backward microbatch has the size of its chain (U_F and U_B divide the samples of a
// rank). Instances number forward and backward microbatches separately (their tensors differ when U_F != U_B); with
// U_F != U_B every tensor a forward leaves for the backward goes through the host and is re-split there.
void emit_plan(const MicrobatchChains& chains, const TaskGraph& graph, Mode mode, const EmissionSwitches& switches,
               Plan& plan);

} // namespace memsim::harmony
