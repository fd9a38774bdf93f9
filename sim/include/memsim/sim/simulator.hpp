#pragma once
// Executes a Plan on a Machine: the execution core timed by SimGrid (the reference) or by the fast engine. Both
// give the same per-step times (to rounding), peaks and errors (see tests/sim/differential_test.cpp).
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/sim/ledger.hpp"
#include "memsim/sim/timeline.hpp"
#include "memsim/traces/trace.hpp"

#include <optional>
#include <string_view>

namespace memsim {

enum class EngineKind { simgrid, fast };
std::string_view to_string(EngineKind kind);
std::optional<EngineKind> engine_kind_from_string(std::string_view text);

struct SimOptions {
  bool record_timeline = true;
  EngineKind engine = EngineKind::simgrid;
  AllocatorKind allocator = AllocatorKind::bytes;
  // The memory policy, overriding the plan's `policy` (name "none": run without one). Looked up in the policy
  // registry; unknown names and parameters are InputErrors.
  std::optional<PolicyChoice> policy = std::nullopt;
  // Fill RunResult::realized_plan (when the run is feasible).
  bool realized_plan = false;
};

// Never throws for an infeasible plan (OOM, non-resident input): that is Result::feasible == false with
// the error filled. Throws InputError for plans that do not match the trace/machine. With the SimGrid engine,
// call it at most once per process (SimGrid's Engine is a singleton); the fast engine has no such limit.
RunResult simulate(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options = {});

// The fast engine alone, whatever options.engine says: library memsim_fast, no SimGrid, re-entrant. For planners
// that evaluate their plans by simulation and for the policy planner.
RunResult simulate_fast(const Trace& trace, const Machine& machine, const Plan& plan, const SimOptions& options = {});

} // namespace memsim
