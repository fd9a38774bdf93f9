#include "fused_copies.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <optional>

namespace memsim::planning {

FusionModel fusion_model(const FusedModels& options, const char* planner)
{
  const FusionModel model = parse_fusion_model(options.fusion);
  if (model == FusionModel::measured)
    throw InputError("", fmt::format("parameter 'fusion' of planner '{}': measured fusion reads recorded fused traces "
                                     "from a directory, which a planner does not have; use efficiency or "
                                     "batch-proxy, or plan a recorded fused trace itself (memsim gen fuse --fusion "
                                     "measured, an experiment's sweep.fusion: measured)",
                                     planner));
  return model;
}

Trace fused_copies(const Trace& trace, int copies, const FusedModels& options, const char* planner)
{
  return fuse_trace(trace, copies, fusion_model(options, planner), std::nullopt, trace.name);
}

} // namespace memsim::planning
