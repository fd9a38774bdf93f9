#include "param_options.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <cctype>

namespace memsim::cli {

ParamOptions::ParamOptions(CLI::App* command, const std::vector<ParamSpec>& specs)
{
  for (const ParamSpec& spec : specs) {
    Bound& bound = bound_.emplace_back();
    bound.spec = spec;
    const std::string flag = command_line_flag(spec);
    const std::string help = spec.description + describe_range(spec);
    if (spec.type == ParamType::boolean) {
      bound.option = command->add_flag(flag, bound.flag, help);
    } else {
      bound.option = command->add_option(flag, bound.text, help);
      std::string type_name(to_string(spec.type)); // INTEGER, NUMBER, STRING in --help
      for (char& c : type_name)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      bound.option->type_name(type_name);
      bound.option->default_str(spec.default_value.is_string() ? spec.default_value.get<std::string>()
                                                               : spec.default_value.dump());
    }
  }
}

nlohmann::json ParamOptions::given() const
{
  nlohmann::json values = nlohmann::json::object();
  for (const Bound& bound : bound_) {
    if (bound.option->count() == 0)
      continue;
    if (bound.spec.type == ParamType::boolean) {
      values[bound.spec.name] = bound.flag;
      continue;
    }
    nlohmann::json value;
    try {
      value = parse_param_value(bound.spec, bound.text);
    } catch (const std::exception&) {
      throw InputError(command_line_flag(bound.spec),
                       fmt::format("'{}' is not a valid {}", bound.text, to_string(bound.spec.type)));
    }
    if (auto problem = param_value_problem(bound.spec, value)) // the range, named at the flag
      throw InputError(command_line_flag(bound.spec), *problem);
    values[bound.spec.name] = std::move(value);
  }
  return values;
}

} // namespace memsim::cli
