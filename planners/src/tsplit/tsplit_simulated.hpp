#pragma once
// cost=simulated (spec tsplit.md §4 item 8; not in the paper): at a bottleneck, the candidates the analytic model
// ranks best are re-scored by simulation. Each is applied to a copy of the planning state, the plan so far is
// emitted as emit_plan does and run on the core's fast engine (simulate_partial_plan), and its ΔT is the simulated
// iteration time with it minus without it; ΔM stays the model's saving at the op (the model's memory is exact).
#include "tsplit_model.hpp"

#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <optional>

namespace memsim::tsplit {

// The analytic ranking's best `kShortlist` non-split and best `kShortlist` split candidates are simulated.
// The analytic ratio is exact for recomputations and for copies on an idle link; it errs where copies contend
// (another copy queued on the same stream, a split's parts behind a whole tensor), which moves a candidate by a
// share of the link's queue, so the true best sits near the analytic top. Four a kind keeps a decision at nine
// emissions and engine runs (with the one without a candidate); eight gave the same or slower plans on VGG-16 and
// the Transformer preset at 1.7x the planning time.
inline constexpr std::size_t kShortlist = 4;

// Alg. 2 steps 1-3 at bottleneck `op` with the shortlisted candidates' ΔT simulated; the ties as the analytic choice.
std::optional<Candidate> choose_by_simulation(const Model& model, OpId op, const TraceAnalysis& analysis,
                                              const Machine& machine, std::uint64_t budget, const Options& options);

} // namespace memsim::tsplit
