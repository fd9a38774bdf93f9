#pragma once
// The `models` and `fusion` parameters of the planners that train N copies of the trace's model fused together (hfta,
// hfta-capuchin, mu-two), declared once: their options structs derive from FusedModels and list models_param() and
// fusion_param(); fused_copies.hpp builds their fused graphs from them.
#include "memsim/common/params.hpp"
#include "memsim/hwmodels/fuse.hpp"

#include <concepts>
#include <string>
#include <vector>

namespace memsim::planning {

struct FusedModels {
  FusedModels() = default; // not an aggregate: GCC 12 warns falsely (-Wmaybe-uninitialized) on `Options{}` otherwise
  int models = 1;
  std::string fusion = "efficiency";
};

template <class Options>
BoundParam<Options> models_param()
{
  static_assert(std::derived_from<Options, FusedModels>, "the options struct derives from FusedModels");
  // Explicit template arguments: the field is FusedModels', bound as a field of Options.
  return param<Options, int>("models", &Options::models, "N, the number of models trained together",
                             {.min = 1, .max = 4096});
}

// The fusion models' names, as `memsim gen fuse --fusion` declares them (fuse_params()).
inline std::vector<std::string> fusion_model_names()
{
  for (const ParamSpec& spec : fuse_params().specs())
    if (spec.name == "fusion")
      return spec.choices;
  return {};
}

template <class Options>
BoundParam<Options> fusion_param()
{
  static_assert(std::derived_from<Options, FusedModels>, "the options struct derives from FusedModels");
  return param<Options, std::string>(
      "fusion", &Options::fusion,
      "how the fused ops are timed, as `memsim gen fuse --fusion`: efficiency = k x each op's work on the recording "
      "GPU's efficiency curve; batch-proxy = each op rescaled to batch k*b, update ops k x; measured (recorded fused "
      "traces) is refused: a planner has no directory of recordings",
      {.choices = fusion_model_names()});
}

} // namespace memsim::planning
