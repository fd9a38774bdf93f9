// memsim plan: run one planner (`memsim planners` lists them).
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/units.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/planner.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace memsim::cli {
namespace {

std::uint64_t parse_budget_option(const std::string& text)
{
  try {
    return units::parse_bytes(text);
  } catch (const std::invalid_argument& error) {
    throw InputError("--budget", error.what());
  }
}

} // namespace

void add_plan_command(CLI::App& app, Context&)
{
  struct Options {
    std::string trace;
    std::string machine;
    std::string planner;
    std::string budget = "0";
    std::vector<std::string> params;
    std::string out;
    experiments::Progress progress = experiments::Progress::automatic;
    std::filesystem::path state_dir;
  };
  auto options = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand("plan", "Run a planner on a trace and machine and write the plan (JSON)");
  command->add_option("--trace", options->trace, "trace file (memsim-trace JSON)")->required();
  command->add_option("--machine", options->machine, "machine preset name or YAML file")->required();
  command->add_option("--planner", options->planner, "planner name (see `memsim planners`)")->required();
  command->add_option("--budget", options->budget,
                      "device memory budget: bytes or a size such as 12GiB (default: the GPU's memory)");
  command->add_option("--param", options->params, "planner parameter name=value (repeatable)");
  command->add_option("--out", options->out, "where to write the plan")->required();
  add_progress_option(command, options->progress);
  add_state_dir_option(command, options->state_dir);
  command->callback([options] {
    const std::uint64_t budget = parse_budget_option(options->budget);
    const PlannerInfo& info = planner_registry().get(options->planner);
    Trace trace = load_trace(options->trace);
    Machine machine = load_machine_or_preset(options->machine, default_presets_dir());
    PlanRequest request;
    request.budget_bytes = budget;
    request.params = parse_param_assignments(info, options->params);
    request.state_dir = options->state_dir;
    experiments::ProgressLine progress(options->progress);
    if (progress.enabled())
      request.progress = [&](const std::string& status) { progress.show(fmt::format("{}: {}", info.name, status)); };
    Plan plan = make_plan(options->planner, trace, machine, request);
    progress.clear();
    save_plan(plan, options->out);
    fmt::print("{}: {} steps, budget {}", options->out, plan.steps.size(),
               units::format_bytes(static_cast<double>(plan.budget_bytes)));
    if (plan.estimate.peak_bytes)
      fmt::print(", planned peak {}", units::format_bytes(static_cast<double>(*plan.estimate.peak_bytes)));
    if (plan.estimate.iteration_time_s)
      fmt::print(", estimated iteration {}", units::format_duration(*plan.estimate.iteration_time_s));
    fmt::print("\n");
  });
}

} // namespace memsim::cli
