#pragma once
// HFTA+Capuchin's plan (shared/specs/mu-two.md §7.2): all N models fused into one graph (fused_copies under the
// planner's `fusion` parameter), FW then BW, through μ-TWO's swap/recompute scheduler without multiplexing
// (capuchin_schedule.hpp), carried in the plan's extras as one scoped instance. The planner `hfta-capuchin`, and
// `mu-two`'s single-sub-array partition {N}, which is the same schedule by definition (μ-TWO restricted to one fused
// array, A5).
#include "capuchin_schedule.hpp"
#include "fused_models_param.hpp"
#include "swap_choice_params.hpp"

#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

#include <cstdint>

namespace memsim::planning {

// All `options.models` models, fused under `options.fusion`. Throws Infeasible when the candidates run out. `planner`
// names it in messages.
Plan all_fused_capuchin(const Trace& trace, const Machine& machine, std::uint64_t budget_bytes,
                        const FusedModels& options, const SwapChoiceParams& choice, const char* planner);

} // namespace memsim::planning
