#pragma once
// The planner interface and registry. One registration line per planner, next to the planner; its parameters are
// fields of an options struct (defaults are the fields' initializers), declared once with their ranges:
//   struct VdnnOptions { int lookahead = 1; };
//   Plan plan_vdnn_all(const Trace&, const Machine&, const PlanRequest&, const VdnnOptions&);
//   MEMSIM_REGISTER_PLANNER(vdnn_all, "vdnn-all", "vDNN: ...",
//                           {param("lookahead", &VdnnOptions::lookahead, "...", {.min = 0, .max = 1000})},
//                           plan_vdnn_all);
#include "memsim/common/registry.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace memsim {

struct PlanRequest {
  std::uint64_t budget_bytes = 0; // per device; 0 = the GPU's memory
  int devices = 1;
  nlohmann::json params = nlohmann::json::object(); // validated and completed with defaults
  // Planners that can run for minutes (μ-TWO's ring near its largest N) call it now and then with a one-line status,
  // for a progress line; empty: nobody listens. Never part of the plan.
  std::function<void(const std::string&)> progress = nullptr;
  // Planners whose search can run for hours (μ-TWO's ring) keep its state in a file in this folder now and then and
  // resume from it: a run killed midway continues where it stopped and gives the same plan. Empty: nothing is kept.
  // Never part of the plan.
  std::filesystem::path state_dir = {};
};

using PlanFunction = std::function<Plan(const Trace&, const Machine&, const PlanRequest&)>;
using PlannerInfo = Component<PlanFunction>;
using PlannerRegistry = Registry<PlannerInfo>;

PlannerRegistry& planner_registry();

// A planner whose `plan` gets its parameters as typed options, bound from the request's completed params.
template <class Options>
PlannerInfo planner(std::string name, std::string description, ParamList<Options> params,
                    Plan (*plan)(const Trace&, const Machine&, const PlanRequest&, const Options&))
{
  std::vector<ParamSpec> specs = params.specs();
  return PlannerInfo{std::move(name), std::move(description), std::move(specs),
                     [params = std::move(params), plan](const Trace& trace, const Machine& machine,
                                                        const PlanRequest& request) {
                       return plan(trace, machine, request, params.bind(request.params));
                     }};
}

// Runs a planner by name: validates params, calls it, fills plan.trace/machine/planner/params/budget.
// Throws Infeasible("...reason...") when no plan fits.
Plan make_plan(const std::string& planner, const Trace& trace, const Machine& machine, const PlanRequest& request);

// Parses "k=v" command-line parameters into JSON using the planner's declared types.
nlohmann::json parse_param_assignments(const PlannerInfo& info, const std::vector<std::string>& assignments);

// memsim_planners is linked with WHOLE_ARCHIVE (see planners/CMakeLists.txt) so that these static
// registrations survive static linking.
#define MEMSIM_REGISTER_PLANNER(ident, ...)                                                                            \
  [[maybe_unused]] static const bool memsim_planner_registered_##ident =                                               \
      ::memsim::register_or_abort(::memsim::planner_registry(), ::memsim::planner(__VA_ARGS__))

} // namespace memsim
