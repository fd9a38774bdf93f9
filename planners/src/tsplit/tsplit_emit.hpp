#pragma once
// Emits the plan of TSPLIT's decisions (spec tsplit.md §6): ops in trace order; split ops as micro-ops over split /
// merge views, their inputs' parts offloaded from the split view and freed after their micro-op; whole tensors
// offloaded after their producer and prefetched at their trigger op; recomputations right before their consumer.
// A pessimistic sequential account (MemoryCursor) decides where compute must wait for an offload's free, so no
// timing the simulator produces can exceed the budget.
#include "tsplit_model.hpp"

#include "memsim/planners/plan.hpp"

namespace memsim::tsplit {

// The plan's estimate: its steps list-scheduled as they are emitted (each stream in order, a step starting when its
// stream and its deps are done; compute from the cost model, a copy size/B + latency: the PCIe occupancy simulation
// of §3.3 per step), and the peak of the sequential account. Throws Infeasible when the account cannot fit an op (the
// model said it would: a planner bug).
Plan emit_plan(const Model& model, const TraceAnalysis& analysis, const Machine& machine, std::uint64_t budget,
               const Options& options);

// cost=simulated: the fast engine's iteration time of the plan of the decisions so far, the greedy having reached
// op `planned_through`. Emitted as emit_plan does, but ops after it are not held to the budget (later decisions will
// fit them) and that op to the model's memory there where it still exceeds the budget; the GPU gets room for what
// the account then holds. Throws Infeasible when the engine cannot run it (a planner bug).
double simulate_partial_plan(const Model& model, const TraceAnalysis& analysis, const Machine& machine,
                             std::uint64_t budget, const Options& options, OpId planned_through);

} // namespace memsim::tsplit
