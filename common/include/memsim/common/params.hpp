#pragma once
// Typed component parameters. Each parameter is declared once, bound to a field of the component's options struct:
//   struct RotorOptions { int levels = 50; };
//   param("levels", &RotorOptions::levels, "memory discretization levels", {.min = 2, .max = 1000})
// The field's initializer is the default; the field's type is the parameter's type. From the declarations come the
// listings (`memsim planners`), the checks of given values, `k=v` parsing and the typed options the component gets.
#include <nlohmann/json.hpp>

#include <concepts>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace memsim {

enum class ParamType { integer, number, boolean, string };
std::string_view to_string(ParamType type);

// Completed, checked parameter values (a JSON object, one key per declared parameter): what a component's
// type-erased callable receives and what an emitted plan records.
using ParamValues = nlohmann::json;

// Initialized members: a designated initializer may name only some ({.min = 2}) without -Wmissing-field-initializers.
struct ParamRange {
  std::optional<double> min = std::nullopt; // integer / number, inclusive
  std::optional<double> max = std::nullopt;
  std::vector<std::string> choices = {}; // string
};

// A parameter as listed and checked, without its binding.
struct ParamSpec {
  std::string name;
  ParamType type = ParamType::number;
  std::string description;
  nlohmann::json default_value;
  std::optional<double> min;
  std::optional<double> max;
  std::vector<std::string> choices;
  std::string flag; // command-line option (generators, importers): "--" + name with '-' for '_' unless set
};

// "--name" or the declared flag.
std::string command_line_flag(const ParamSpec& spec);
// " in [2, 1000]", " one of fp32, fp16", or "" (for listings).
std::string describe_range(const ParamSpec& spec);
// Why `value` is not a valid value of the parameter (type, range, choices), or nothing.
std::optional<std::string> param_value_problem(const ParamSpec& spec, const nlohmann::json& value);

// `kind` and `component` name the owner in messages: "parameter 'levels' of planner 'rotor': ...".
// Checks names (unknown ones list the valid ones), types, ranges and choices; fills defaults.
ParamValues complete_params(std::string_view kind, std::string_view component, const std::vector<ParamSpec>& specs,
                            const nlohmann::json& given);
// "k=v" pairs (`--param k=v`) to JSON of the declared types; errors are located at `where` ("--param").
nlohmann::json parse_param_assignments(std::string_view kind, std::string_view component,
                                       const std::vector<ParamSpec>& specs, const std::vector<std::string>& assignments,
                                       const std::string& where = "--param");
// One value from text, as the spec's type. Throws std::invalid_argument when it is not one.
nlohmann::json parse_param_value(const ParamSpec& spec, const std::string& text);

template <class T>
constexpr ParamType param_type_of()
{
  if constexpr (std::same_as<T, bool>)
    return ParamType::boolean;
  else if constexpr (std::integral<T>)
    return ParamType::integer;
  else if constexpr (std::floating_point<T>)
    return ParamType::number;
  else {
    static_assert(std::same_as<T, std::string>, "a parameter is an integer, a number, a bool or a std::string");
    return ParamType::string;
  }
}

// A declared parameter and how to store a checked value into its field.
template <class Options>
struct BoundParam {
  ParamSpec spec;
  std::function<void(Options&, const nlohmann::json&)> assign;

  // The command-line option when it is not "--" + name (kept for options named before the registry).
  BoundParam&& flag(std::string option) &&
  {
    spec.flag = std::move(option);
    return std::move(*this);
  }
};

template <class Options, class T>
BoundParam<Options> param(std::string name, T Options::*field, std::string description, ParamRange range = {})
{
  static_assert(std::is_default_constructible_v<Options>, "the options struct's initializers are the defaults");
  ParamSpec spec{std::move(name), param_type_of<T>(), std::move(description),   nlohmann::json(Options{}.*field),
                 range.min,       range.max,          std::move(range.choices), {}};
  return {std::move(spec), [field](Options& options, const nlohmann::json& value) {
            if constexpr (std::integral<T> && !std::same_as<T, bool>)
              if (!std::in_range<T>(value.get<std::int64_t>()))
                throw std::out_of_range("parameter value " + value.dump() + " does not fit its field");
            options.*field = value.get<T>();
          }};
}

// The parameters of one component, in declaration order.
template <class Options>
class ParamList {
public:
  ParamList() = default;
  ParamList(std::initializer_list<BoundParam<Options>> params) : params_(params) {}
  explicit ParamList(std::vector<BoundParam<Options>> params) : params_(std::move(params)) {}

  std::vector<ParamSpec> specs() const
  {
    std::vector<ParamSpec> specs;
    for (const BoundParam<Options>& bound : params_)
      specs.push_back(bound.spec);
    return specs;
  }

  // `values` come from complete_params: every declared key, checked.
  Options bind(const ParamValues& values) const
  {
    Options options;
    for (const BoundParam<Options>& bound : params_)
      bound.assign(options, values.at(bound.spec.name));
    return options;
  }

private:
  std::vector<BoundParam<Options>> params_;
};

// For components without parameters.
struct NoOptions {};

} // namespace memsim
