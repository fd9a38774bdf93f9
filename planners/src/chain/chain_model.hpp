#pragma once
// From a Trace to a chain::Problem (discretized memory) and from a chain schedule back to a memsim Plan.
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/chain.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/views.hpp"

#include <string>

namespace memsim::chain {

struct TraceChain {
  ChainView view;
  Problem problem;
  double unit_bytes = 0;         // one memory unit
  std::uint64_t fixed_bytes = 0; // resident tensors, weight gradients, loss/update outputs
  double constant_time = 0;      // loss and update ops
  double bandwidth = 0;          // GPU <-> host bytes/s (slowest hop)
};

// Throws InputError when the trace has no chain view, Infeasible("no plan fits: minimum memory is X") when the
// budget does not cover the fixed memory.
TraceChain make_trace_chain(const TraceAnalysis& analysis, const Machine& machine, std::uint64_t budget_bytes,
                            int levels);

// The compute actions and transfers as a Plan: forward/backward ops of each action on "compute" (recompute when an
// op runs again), item offloads on "d2h" followed by frees there, prefetches on "h2d", and frees after last reads.
Plan emit_plan(const TraceAnalysis& analysis, const TraceChain& chain, const ExpandedSchedule& schedule,
               const std::vector<Block>& blocks, double model_time);

// The common body of the chain planners: discretize, solve, emit; Infeasible with the minimum memory when no
// schedule fits.
enum class ChainAlgorithm { rotor, offload_dp, pofo, autocapper, opportunist };
struct ChainOptions {
  int levels = 50; // memory discretization
};
Plan plan_chain(ChainAlgorithm algorithm, const Trace& trace, const Machine& machine, const PlanRequest& request,
                const ChainOptions& options);

ParamList<ChainOptions> chain_params();

} // namespace memsim::chain
