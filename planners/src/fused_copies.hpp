#pragma once
// The fused graphs of the planners that train copies of one model together (hfta, hfta-capuchin, mu-two): the
// trace's model fused k times under their `fusion` parameter (fused_models_param.hpp), the one place they fuse.
#include "fused_models_param.hpp"

#include "memsim/hwmodels/fuse.hpp"
#include "memsim/traces/trace.hpp"

namespace memsim::planning {

// The planner's fusion model. measured throws InputError naming `planner`: its recorded fused traces are files in
// a directory, which a planner (given one trace) does not have.
FusionModel fusion_model(const FusedModels& options, const char* planner);

// `copies` copies of `trace`'s model fused into one graph (fuse_trace on the trace's recording GPU, named after the
// trace); `trace` itself at 1. Throws as fusion_model, and as fuse_trace (batch-proxy needs source.batch).
Trace fused_copies(const Trace& trace, int copies, const FusedModels& options, const char* planner);

} // namespace memsim::planning
