#include "memsim/common/params.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace memsim {
namespace {

std::string valid_params(const std::vector<ParamSpec>& specs)
{
  std::string valid;
  for (const ParamSpec& spec : specs)
    valid += (valid.empty() ? "" : ", ") + spec.name;
  return valid.empty() ? "none" : valid;
}

const ParamSpec* find_spec(const std::vector<ParamSpec>& specs, std::string_view name)
{
  auto found = std::find_if(specs.begin(), specs.end(), [&](const ParamSpec& spec) { return spec.name == name; });
  return found == specs.end() ? nullptr : &*found;
}

std::string bound_text(const std::optional<double>& bound, const char* none)
{
  return bound ? fmt::format("{}", *bound) : none;
}

nlohmann::json checked_value(std::string_view kind, std::string_view component, const ParamSpec& spec,
                             const nlohmann::json& value)
{
  if (auto problem = param_value_problem(spec, value))
    throw InputError("", fmt::format("parameter '{}' of {} '{}': {}", spec.name, kind, component, *problem));
  return value;
}

} // namespace

std::optional<std::string> param_value_problem(const ParamSpec& spec, const nlohmann::json& value)
{
  auto fail = [](const std::string& why) -> std::optional<std::string> { return why; };
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
    return std::nullopt;
  case ParamType::string:
    if (!value.is_string())
      return fail(fmt::format("expected a string, found {}", value.dump()));
    if (!spec.choices.empty() &&
        std::find(spec.choices.begin(), spec.choices.end(), value.get<std::string>()) == spec.choices.end())
      return fail(fmt::format("'{}' is not one of {}", value.get<std::string>(), fmt::join(spec.choices, ", ")));
    return std::nullopt;
  }
  const double number = value.get<double>();
  if ((spec.min && number < *spec.min) || (spec.max && number > *spec.max))
    return fail(fmt::format("{} is outside [{}, {}]", value.dump(), bound_text(spec.min, "-inf"),
                            bound_text(spec.max, "inf")));
  return std::nullopt;
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

std::string command_line_flag(const ParamSpec& spec)
{
  if (!spec.flag.empty())
    return spec.flag;
  std::string flag = "--" + spec.name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string describe_range(const ParamSpec& spec)
{
  if (!spec.choices.empty())
    return fmt::format(" one of {}", fmt::join(spec.choices, ", "));
  if (spec.min || spec.max)
    return fmt::format(" in [{}, {}]", bound_text(spec.min, "-inf"), bound_text(spec.max, "inf"));
  return "";
}

ParamValues complete_params(std::string_view kind, std::string_view component, const std::vector<ParamSpec>& specs,
                            const nlohmann::json& given)
{
  if (!given.is_null() && !given.is_object())
    throw InputError("", fmt::format("parameters of {} '{}' must be a mapping", kind, component));
  ParamValues complete = ParamValues::object();
  if (given.is_object()) {
    for (const auto& [key, value] : given.items()) {
      const ParamSpec* spec = find_spec(specs, key);
      if (spec == nullptr)
        throw InputError("", fmt::format("unknown parameter '{}' for {} '{}' (valid: {})", key, kind, component,
                                         valid_params(specs)));
      complete[key] = checked_value(kind, component, *spec, value);
    }
  }
  for (const ParamSpec& spec : specs)
    if (!complete.contains(spec.name))
      complete[spec.name] = spec.default_value;
  return complete;
}

nlohmann::json parse_param_value(const ParamSpec& spec, const std::string& text)
{
  switch (spec.type) {
  case ParamType::integer: {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used != text.size())
      throw std::invalid_argument("trailing characters");
    return value;
  }
  case ParamType::number: return units::parse_number(text);
  case ParamType::boolean:
    if (text != "true" && text != "false")
      throw std::invalid_argument("expected true or false");
    return text == "true";
  case ParamType::string: return text;
  }
  throw std::invalid_argument("unknown parameter type");
}

nlohmann::json parse_param_assignments(std::string_view kind, std::string_view component,
                                       const std::vector<ParamSpec>& specs, const std::vector<std::string>& assignments,
                                       const std::string& where)
{
  nlohmann::json params = nlohmann::json::object();
  for (const std::string& assignment : assignments) {
    const auto equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0)
      throw InputError(where, fmt::format("'{}' is not of the form name=value", assignment));
    const std::string key = assignment.substr(0, equals);
    const std::string text = assignment.substr(equals + 1);
    const ParamSpec* spec = find_spec(specs, key);
    if (spec == nullptr)
      throw InputError(where, fmt::format("unknown parameter '{}' for {} '{}' (valid: {})", key, kind, component,
                                          valid_params(specs)));
    try {
      params[key] = parse_param_value(*spec, text);
    } catch (const std::exception&) {
      throw InputError(where, fmt::format("'{}': '{}' is not a valid {} for parameter '{}'", assignment, text,
                                          to_string(spec->type), key));
    }
  }
  return params;
}

} // namespace memsim
