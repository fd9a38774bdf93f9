#include "memsim/planners/planner.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace memsim {

PlannerRegistry& PlannerRegistry::instance()
{
  static PlannerRegistry registry;
  return registry;
}

bool PlannerRegistry::add(PlannerInfo info)
{
  std::string name = info.name;
  return planners_.emplace(std::move(name), std::move(info)).second;
}

const PlannerInfo& PlannerRegistry::get(const std::string& name) const
{
  auto found = planners_.find(name);
  if (found != planners_.end())
    return found->second;
  std::string valid;
  for (const auto& [known, info] : planners_)
    valid += (valid.empty() ? "" : ", ") + known;
  throw InputError("", fmt::format("unknown planner '{}' (valid: {})", name, valid));
}

std::vector<const PlannerInfo*> PlannerRegistry::all() const
{
  std::vector<const PlannerInfo*> result;
  for (const auto& [name, info] : planners_)
    result.push_back(&info);
  return result;
}

namespace {

std::string valid_params(const PlannerInfo& info)
{
  std::string valid;
  for (const ParamSpec& spec : info.params)
    valid += (valid.empty() ? "" : ", ") + spec.name;
  return valid.empty() ? "none" : valid;
}

nlohmann::json checked_value(const PlannerInfo& info, const ParamSpec& spec, const nlohmann::json& value)
{
  auto fail = [&](const std::string& why) -> nlohmann::json {
    throw InputError("", fmt::format("parameter '{}' of planner '{}': {}", spec.name, info.name, why));
  };
  switch (spec.type) {
  case ParamType::integer:
    if (!value.is_number_integer())
      return fail(fmt::format("expected an integer, found {}", value.dump()));
    break;
  case ParamType::number:
    if (!value.is_number())
      return fail(fmt::format("expected a number, found {}", value.dump()));
    break;
  case ParamType::boolean:
    if (!value.is_boolean())
      return fail(fmt::format("expected true or false, found {}", value.dump()));
    return value;
  case ParamType::string:
    if (!value.is_string())
      return fail(fmt::format("expected a string, found {}", value.dump()));
    if (!spec.choices.empty() &&
        std::find(spec.choices.begin(), spec.choices.end(), value.get<std::string>()) == spec.choices.end())
      return fail(fmt::format("'{}' is not one of {}", value.get<std::string>(), fmt::join(spec.choices, ", ")));
    return value;
  }
  double number = value.get<double>();
  if ((spec.min && number < *spec.min) || (spec.max && number > *spec.max))
    return fail(fmt::format("{} is outside [{}, {}]", value.dump(), spec.min ? fmt::format("{}", *spec.min) : "-inf",
                            spec.max ? fmt::format("{}", *spec.max) : "inf"));
  return value;
}

} // namespace

nlohmann::json PlannerRegistry::complete_params(const PlannerInfo& info, const nlohmann::json& given) const
{
  if (!given.is_null() && !given.is_object())
    throw InputError("", fmt::format("parameters of planner '{}' must be a mapping", info.name));
  nlohmann::json complete = nlohmann::json::object();
  if (given.is_object()) {
    for (const auto& [key, value] : given.items()) {
      auto spec = std::find_if(info.params.begin(), info.params.end(), [&](const ParamSpec& p) { return p.name == key; });
      if (spec == info.params.end())
        throw InputError("", fmt::format("unknown parameter '{}' for planner '{}' (valid: {})", key, info.name,
                                         valid_params(info)));
      complete[key] = checked_value(info, *spec, value);
    }
  }
  for (const ParamSpec& spec : info.params)
    if (!complete.contains(spec.name))
      complete[spec.name] = spec.default_value;
  return complete;
}

nlohmann::json parse_param_assignments(const PlannerInfo& info, const std::vector<std::string>& assignments)
{
  nlohmann::json params = nlohmann::json::object();
  for (const std::string& assignment : assignments) {
    auto equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0)
      throw InputError("--param", fmt::format("'{}' is not of the form name=value", assignment));
    std::string key = assignment.substr(0, equals);
    std::string text = assignment.substr(equals + 1);
    auto spec = std::find_if(info.params.begin(), info.params.end(), [&](const ParamSpec& p) { return p.name == key; });
    if (spec == info.params.end())
      throw InputError("--param", fmt::format("unknown parameter '{}' for planner '{}' (valid: {})", key, info.name,
                                              valid_params(info)));
    try {
      switch (spec->type) {
      case ParamType::integer: {
        std::size_t used = 0;
        long long value = std::stoll(text, &used);
        if (used != text.size())
          throw std::invalid_argument("trailing characters");
        params[key] = value;
        break;
      }
      case ParamType::number: params[key] = units::parse_number(text); break;
      case ParamType::boolean:
        if (text != "true" && text != "false")
          throw std::invalid_argument("expected true or false");
        params[key] = text == "true";
        break;
      case ParamType::string: params[key] = text; break;
      }
    } catch (const std::exception&) {
      throw InputError("--param", fmt::format("'{}': '{}' is not a valid {} for parameter '{}'", assignment, text,
                                              to_string(spec->type), key));
    }
  }
  return params;
}

Plan make_plan(const std::string& planner, const Trace& trace, const Machine& machine, const PlanRequest& request)
{
  const PlannerRegistry& registry = PlannerRegistry::instance();
  const PlannerInfo& info = registry.get(planner);
  PlanRequest completed = request;
  const std::uint64_t gpu_memory = machine.gpus.at(0).memory;
  if (completed.budget_bytes == 0)
    completed.budget_bytes = gpu_memory;
  if (completed.budget_bytes > gpu_memory)
    throw InputError("--budget", fmt::format("budget {} exceeds the memory of GPU '{}' ({})",
                                             units::format_bytes(static_cast<double>(completed.budget_bytes)),
                                             machine.gpus[0].name, units::format_bytes(static_cast<double>(gpu_memory))));
  completed.params = registry.complete_params(info, request.params);
  Plan plan = info.plan(trace, machine, completed);
  plan.trace = trace.name;
  plan.machine = machine.name;
  plan.planner = info.name;
  plan.params = completed.params;
  plan.budget_bytes = completed.budget_bytes;
  return plan;
}

std::string_view to_string(ParamType type)
{
  switch (type) {
  case ParamType::integer: return "integer";
  case ParamType::number: return "number";
  case ParamType::boolean: return "boolean";
  case ParamType::string: return "string";
  }
  return "value";
}

} // namespace memsim
