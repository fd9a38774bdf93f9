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
};

// Appends the steps, placement and sharing rules to `plan`. pp: the graph's binding; dp: every GPU runs the graph's
// list on its own `graph.microbatches_*` instances, dW all-reduced after each backward task, rank 0 swaps dW out and
// updates. Forward and backward microbatches must be the trace's batch (U_F = U_B = u, u divides the samples).
void emit_plan(const LayerChainIds& chain, const TaskGraph& graph, Mode mode, const EmissionSwitches& switches,
               Plan& plan);

} // namespace memsim::harmony
