#pragma once
// PipeDream-2BW's double-buffered weights (spec §1.9: "two resident weight versions (both swapped like W), update
// every m microbatches, no flush") over a layer-chain trace. Version 0 is the trace's w.l; version 1 a second tensor
// w.l.v1 per weighted layer (a plan extra tensor of kind weight, so it starts on the host as W does: the second host
// copy of W), with copies of the ops that read W (fwd.l, save.l, bwd.l) reading it instead. The updates alternate:
// version v's upd.l reads W_v, dW and K and writes W_{1-v}, so a microbatch whose forward ran before its stage's
// update keeps the version it used for its backward while the next microbatches use the new one.
#include "memsim/planners/plan.hpp"
#include "memsim/traces/layer_chain.hpp"

#include <array>

namespace memsim::harmony {

// The chain of each version: ids of the trace (version 0, its update ops replaced) or of the extra tensors and ops
// appended to `plan` (version 1).
std::array<LayerChainIds, 2> two_weight_versions(const Trace& trace, const LayerChainIds& chain, Plan& plan);

} // namespace memsim::harmony
