#pragma once
// The layer chain of one microbatch size in a Harmony plan. Forward tasks run at U_F and backward tasks at U_B, while
// a layer-chain trace holds one size (its batch). The chain at the trace's size is the trace's own; another size is
// built from the layer profile (layer_chain_trace, the generator's own rule) and carried as the plan's extra tensors
// and ops: its per-microbatch tensors (x, s, dx, loss) and its fwd/save/bwd ops, named `<name>@u<u>`. Weights,
// weight gradients, optimizer state and the update ops are the trace's: they do not depend on the microbatch.
#include "memsim/planners/plan.hpp"
#include "memsim/traces/layer_chain.hpp"
#include "memsim/traces/layer_profile.hpp"

namespace memsim::harmony {

LayerChainIds chain_at_microbatch(const Trace& trace, const LayerChainIds& trace_chain, const LayerProfile& profile,
                                  int microbatch, Plan& plan);

// Throws InputError naming `option` unless `trace` is `memsim gen layer-chain` of `profile` at the trace's batch
// (the same tensors and ops with the same bytes and times), so that chains at other sizes describe its workload.
void check_trace_of_profile(const Trace& trace, const LayerProfile& profile, const std::string& option);

} // namespace memsim::harmony
