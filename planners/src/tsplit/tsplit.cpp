// TSPLIT (Nie et al., ICDE 2022): Alg. 2 over the trace's schedule. At every op whose memory exceeds the budget,
// the cheapest non-split option (swap or recompute of another live feature map) competes with the cheapest split of
// the op's inputs (p micro-ops, the input parts swapped or recomputed) by ΔT/ΔM; a tie goes to non-split. The cost
// model is tsplit_model.hpp (cost=simulated re-scores its best candidates on the fast engine: tsplit_simulated.hpp);
// the plan is emitted by tsplit_emit.hpp. Spec: ../shared/specs/tsplit.md §3-§6.
#include "tsplit_emit.hpp"
#include "tsplit_model.hpp"
#include "tsplit_simulated.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

namespace memsim {
namespace {

using tsplit::Candidate;
using tsplit::Model;

Plan run_algorithm2(const TraceAnalysis& analysis, const Machine& machine, std::uint64_t budget,
                    const tsplit::Options& options)
{
  const Trace& trace = analysis.trace();
  Model model(analysis, machine, budget, options);
  for (const Op& op : trace.ops) {
    while (model.memory(op.id) > budget) {
      const std::optional<Candidate> choice =
          options.cost == "simulated"
              ? tsplit::choose_by_simulation(model, op.id, analysis, machine, budget, options)
              : tsplit::prefer_whole_or_split(model.best_non_split(op.id), model.best_split(op.id));
      if (!choice)
        throw Infeasible(fmt::format("tsplit: bottleneck at op {} '{}' needs {} more; no reside tensor or splittable "
                                     "input left (budget {}, {} bytes)",
                                     op.id, op.name,
                                     units::format_bytes(static_cast<double>(model.memory(op.id) - budget)),
                                     units::format_bytes(static_cast<double>(budget)), budget));
      model.apply(*choice, op.id);
    }
  }
  return tsplit::emit_plan(model, analysis, machine, budget, options);
}

// The greedy cannot undo a choice: a recomputation pins its producer's inputs at the consumer, and a backward op
// can then find nothing left to move. When that happens, plan again without recomputation (memsim's addition; the
// paper's Alg. 2 just fails) and keep the first reason if that fails too.
Plan plan_tsplit(const Trace& trace, const Machine& machine, const PlanRequest& request, const tsplit::Options& options)
{
  const TraceAnalysis analysis(trace);
  try {
    return run_algorithm2(analysis, machine, request.budget_bytes, options);
  } catch (const Infeasible& first) {
    if (!options.recompute)
      throw;
    tsplit::Options swap_only = options;
    swap_only.recompute = false;
    try {
      return run_algorithm2(analysis, machine, request.budget_bytes, swap_only);
    } catch (const Infeasible&) {
      throw first;
    }
  }
}

ParamList<tsplit::Options> tsplit_params()
{
  using tsplit::Options;
  return {param("split", &Options::split, "split ops into micro-ops (false: TSPLIT w/o Split, swap/recompute only)"),
          param("dims", &Options::dims,
                "split dimensions, comma-separated: batch, channel, spatial, sequence, heads (an op uses one it "
                "allows; spatial: H of NCHW maps, a conv/pool micro-op also reads its neighbour parts (halo), so an "
                "input part is freed one micro-op later)"),
          param("max_split", &Options::max_split, "most micro-tensors per split (p in 2,3,4,6,8,12,16,24,32,...)",
                {.min = 2, .max = 64}),
          param("split_workspace", &Options::split_workspace, "a split op's workspace is split with it"),
          param("split_dead_inputs", &Options::split_dead_inputs,
                "also split inputs dead after the op (their parts are freed; not in the paper)"),
          param("swap_gradients", &Options::swap_gradients, "gradients are swap/recompute candidates too"),
          param("recompute", &Options::recompute, "recomputation is an option (false: swap only)"),
          param("recompute_mode", &Options::recompute_mode,
                "a recomputed tensor's later readers: memory (freed after each reader, regenerated for the next), "
                "speed (kept to its last reader), lru (kept over a gap while the budget has room there)",
                {.choices = {"memory", "speed", "lru"}}),
          param("cost", &Options::cost,
                "how candidates are scored: analytic (Eq. 2-6) or simulated (the analytic top ones re-run on the fast "
                "engine with the plan so far; slower, not in the paper)",
                {.choices = {"analytic", "simulated"}})};
}

} // namespace

MEMSIM_REGISTER_PLANNER(tsplit, "tsplit",
                        "TSPLIT: per bottleneck op, swap/recompute a live feature map or split the op into micro-ops "
                        "(ICDE'22 Alg. 2, ΔT/ΔM greedy)",
                        tsplit_params(), plan_tsplit);

} // namespace memsim
