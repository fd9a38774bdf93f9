// memsim planners | policies | generators | importers: every registered component with its description and its
// typed parameters (default, range or choices), read from the one registry of each kind. memsim machines: the machine
// presets with their GPUs, host memory and topology size.
#include "commands.hpp"

#include "memsim/common/policy_registry.hpp"
#include "memsim/common/units.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/traces/generator_registry.hpp"
#include "memsim/traces/importer_registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <vector>

namespace memsim::cli {
namespace {

// Planners take `--param name=value`, policies `--policy-param name=value`; generators and importers one option per
// parameter, and generators also appear in experiment files, keyed by the parameter's name.
enum class ParamSyntax { assignment, policy_assignment, option, option_and_key };

std::string usage(const ParamSpec& spec, ParamSyntax syntax)
{
  if (syntax == ParamSyntax::assignment)
    return fmt::format("--param {}=<{}>", spec.name, to_string(spec.type));
  if (syntax == ParamSyntax::policy_assignment) // memsim simulate --policy NAME --policy-param k=v
    return fmt::format("--policy-param {}=<{}>", spec.name, to_string(spec.type));
  std::string text = fmt::format("{} <{}>", command_line_flag(spec), to_string(spec.type));
  if (syntax == ParamSyntax::option_and_key && !spec.flag.empty())
    text += fmt::format(" ({} in experiment files)", spec.name);
  return text;
}

template <class Entry>
void print_components(const Registry<Entry>& registry, std::string_view plural, ParamSyntax syntax)
{
  const auto entries = registry.all();
  if (entries.empty()) {
    fmt::print("no {} registered\n", plural);
    return;
  }
  for (const Entry* entry : entries) {
    fmt::print("{}\n    {}\n", entry->name, entry->description);
    for (const ParamSpec& spec : entry->params)
      fmt::print("    {}  default {}{}: {}\n", usage(spec, syntax), spec.default_value.dump(), describe_range(spec),
                 spec.description);
  }
}

template <class Entry>
void add_list_command(CLI::App& app, const char* name, const char* description, const Registry<Entry>& registry,
                      ParamSyntax syntax)
{
  CLI::App* command = app.add_subcommand(name, description);
  command->callback([&registry, name, syntax] { print_components(registry, name, syntax); });
}

// One line per preset, in name order: GPUs (count, model, memory), host memory, switches and links.
void print_machines()
{
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(default_presets_dir()))
    if (entry.path().extension() == ".yaml")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const Machine machine = load_machine(file);
    const Gpu& gpu = machine.gpus.front();
    fmt::print("{:<24} {:>2} x {} ({}), host {}, {} switches, {} links\n", file.stem().string(), machine.gpus.size(),
               gpu.model, units::format_bytes(static_cast<double>(gpu.memory)),
               units::format_bytes(static_cast<double>(machine.host.memory)), machine.switches.size(),
               machine.links.size());
  }
}

} // namespace

void add_list_commands(CLI::App& app, Context&)
{
  add_list_command(app, "planners", "List the planners, their parameters, defaults and ranges", planner_registry(),
                   ParamSyntax::assignment);
  add_list_command(app, "policies", "List the memory policies, their parameters, defaults and ranges",
                   policy_registry(), ParamSyntax::policy_assignment);
  add_list_command(app, "generators", "List the trace generators (memsim gen), their parameters and ranges",
                   generator_registry(), ParamSyntax::option_and_key);
  add_list_command(app, "importers", "List the trace importers (memsim import), their parameters and ranges",
                   importer_registry(), ParamSyntax::option);
  app.add_subcommand("machines", "List the machine presets (configs/machines): GPUs, host memory, topology size")
      ->callback(print_machines);
}

} // namespace memsim::cli
