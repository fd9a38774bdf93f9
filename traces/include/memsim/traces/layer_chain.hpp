#pragma once
// The workload of Harmony-style planners as a memsim trace: a layer profile (layer_profile.hpp) at one microbatch
// size u turned into one fused op per layer and pass, so plans over it simulate like any other trace
// (`memsim gen layer-chain --profile F --microbatch U`). Per layer l, with X_l = X(u,l):
//   fwd.l    reads x.l (and w.l), writes x.{l+1} (the last layer writes `loss`); time T_FWD(u,l), workspace the
//            forward peak minus its inputs and outputs (never below 0);
//   save.l   (backward phase, zero time) reads x.l (and w.l), writes s.l: the activations autograd keeps for the
//            backward, sized as the backward peak minus X, W, Y, dY, dX and dW of the layer (absent when that is 0);
//   bwd.l    reads x.l, w.l, x.{l+1} (the recomputed output), s.l and its gradient, writes dx.l (l > 0) and dw.l;
//            time T_BWD(u,l) - T_FWD(u,l) (the profile's backward time includes the recompute);
//   upd.l    reads w.l, dw.l, k.l; no output (in-place step), cpu_time_s = the layer's CPU update time.
// A backward task runs fwd.l (recomputed), save.l, and later bwd.l, so over a pack it holds every layer's backward
// peak at once: Harmony's pack-memory rule (sum of peaks minus the inner X). A forward task runs fwd.l alone.
// w.l holds the weights and buffers; layers without them have no w.l, dw.l or upd.l.
// layer_profile_from_traces (planners/harmony) reads the profile back at u.
#include "memsim/traces/layer_profile.hpp"
#include "memsim/traces/trace.hpp"

#include <optional>
#include <string>
#include <vector>

namespace memsim {

// The ids of a layer-chain trace's tensors and ops, by layer (absent: the layer has no weights).
struct LayerChainIds {
  std::vector<TensorId> x; // x.0 (the data) .. x.{R-1}
  std::vector<std::optional<TensorId>> w, dw, k, dx, saved;
  TensorId loss = -1;
  std::vector<OpId> forward, backward;
  std::vector<std::optional<OpId>> save; // makes saved[l]
  std::vector<std::optional<OpId>> update;
  std::size_t layers() const { return x.size(); }
  // What layer l writes: x.{l+1}, or the loss.
  TensorId output(std::size_t l) const { return l + 1 < x.size() ? x[l + 1] : loss; }
};

// Throws InputError naming `source` when the trace is not what layer_chain_trace builds.
LayerChainIds layer_chain_ids(const Trace& trace, const std::string& source);

// Throws InputError when u is not a sampled or interpolable size of both passes.
Trace layer_chain_trace(const LayerProfile& profile, int microbatch);

} // namespace memsim
