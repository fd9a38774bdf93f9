#pragma once
// The `models` parameter of the planners that train N copies of the trace's model fused together (hfta,
// hfta-capuchin), declared once: their options structs derive from FusedModels and list models_param().
#include "memsim/common/params.hpp"

#include <concepts>

namespace memsim::planning {

struct FusedModels {
  int models = 1;
};

template <class Options>
BoundParam<Options> models_param()
{
  static_assert(std::derived_from<Options, FusedModels>, "the options struct derives from FusedModels");
  // Explicit template arguments: the field is FusedModels', bound as a field of Options.
  return param<Options, int>("models", &Options::models, "N, the number of models trained together",
                             {.min = 1, .max = 4096});
}

} // namespace memsim::planning
