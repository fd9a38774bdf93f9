// hfta-capuchin: HFTA+Capuchin, μ-TWO's second baseline (shared/specs/mu-two.md §7.2): all N models fused into one
// graph (fused_copies under the `fusion` parameter, as `hfta` fuses), run FW then BW every iteration, with
// μ-TWO's swap/recompute scheduler and no multiplexing (capuchin_schedule.hpp). The fused graph travels in the
// plan's extras as one scoped instance, as hfta's subsets do.
#include "all_fused_capuchin.hpp"
#include "fused_models_param.hpp"
#include "swap_choice_params.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

namespace memsim {
namespace {

struct HftaCapuchinOptions : planning::FusedModels, planning::SwapChoiceParams {};

Plan plan_hfta_capuchin(const Trace& trace, const Machine& machine, const PlanRequest& request,
                        const HftaCapuchinOptions& options)
{
  return planning::all_fused_capuchin(trace, machine, request.budget_bytes, options, options, "hfta-capuchin");
}

} // namespace

MEMSIM_REGISTER_PLANNER(hfta_capuchin, "hfta-capuchin",
                        "HFTA+Capuchin (mu-TWO's baseline): all N models fused into one graph, FW then BW, with "
                        "mu-TWO's swap/recompute choice (largest inactive time vs. most bytes per recompute second, "
                        "the cheaper wins) and no multiplexing, until the plan fits on the fast engine; records "
                        "`partition` (\"N\"), `swapped_bytes`, `recomputed_bytes`, `swaps`, `recomputes`, `decisions`",
                        {planning::models_param<HftaCapuchinOptions>(), planning::fusion_param<HftaCapuchinOptions>(),
                         planning::offload_release_param<HftaCapuchinOptions>(),
                         planning::idle_metric_param<HftaCapuchinOptions>()},
                        plan_hfta_capuchin);

} // namespace memsim
