#pragma once
// The planner interface and registry. One registration line per planner, next to the planner:
//   MEMSIM_REGISTER_PLANNER(keep_all, "keep-all", "framework default ...", {params...}, make_keep_all_plan);
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/traces/trace.hpp"

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace memsim {

enum class ParamType { integer, number, boolean, string };
std::string_view to_string(ParamType type);

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::number;
  std::string description;
  nlohmann::json default_value;
  std::optional<double> min; // for integer / number
  std::optional<double> max;
  std::vector<std::string> choices; // for string
};

struct PlanRequest {
  std::uint64_t budget_bytes = 0; // per device; 0 = the GPU's memory
  int devices = 1;
  nlohmann::json params = nlohmann::json::object(); // validated and completed with defaults
};

using PlanFunction = std::function<Plan(const Trace&, const Machine&, const PlanRequest&)>;

struct PlannerInfo {
  std::string name;
  std::string description;
  std::vector<ParamSpec> params;
  PlanFunction plan;
};

class PlannerRegistry {
public:
  static PlannerRegistry& instance();
  bool add(PlannerInfo info);
  // Throws InputError listing the valid names.
  const PlannerInfo& get(const std::string& name) const;
  std::vector<const PlannerInfo*> all() const; // sorted by name
  // Checks names, types and ranges; fills defaults. Throws InputError listing valid parameters.
  nlohmann::json complete_params(const PlannerInfo& info, const nlohmann::json& given) const;

private:
  std::map<std::string, PlannerInfo> planners_;
};

// Runs a planner by name: validates params, calls it, fills plan.trace/machine/planner/params/budget.
// Throws Infeasible("...reason...") when no plan fits.
Plan make_plan(const std::string& planner, const Trace& trace, const Machine& machine, const PlanRequest& request);

// Parses "k=v" command-line parameters into JSON using the planner's declared types.
nlohmann::json parse_param_assignments(const PlannerInfo& info, const std::vector<std::string>& assignments);

#define MEMSIM_REGISTER_PLANNER(ident, ...)                                                                       \
  [[maybe_unused]] static const bool memsim_planner_registered_##ident =                                        \
      ::memsim::PlannerRegistry::instance().add(::memsim::PlannerInfo{__VA_ARGS__})

// memsim_planners is linked with WHOLE_ARCHIVE (see planners/CMakeLists.txt) so that these static
// registrations survive static linking.

} // namespace memsim
