// memsim simulate: execute one plan on a machine with SimGrid and report the metrics.
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/policy_registry.hpp"
#include "memsim/common/units.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/traces/trace.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <fstream>
#include <iostream>
#include <memory>

namespace memsim::cli {
namespace {

void write_json_file(const nlohmann::json& document, const std::string& path)
{
  std::ofstream out(path);
  if (!out)
    throw InputError(path, "cannot open file for writing");
  out << document.dump() << '\n';
  if (!out)
    throw InputError(path, "write failed");
}

void print_summary(const Metrics& metrics, const std::optional<ExecutionError>& error)
{
  if (!metrics.feasible) {
    fmt::print("infeasible: {}\n", error ? error->message : "the plan could not run");
    return;
  }
  fmt::print("iteration time   {}\n", units::format_duration(metrics.iteration_time_s));
  fmt::print("compute busy     {}\n", units::format_duration(metrics.compute_busy_s));
  fmt::print("stall            {}\n", units::format_duration(metrics.stall_time_s));
  fmt::print("recompute        {}\n", units::format_duration(metrics.recompute_time_s));
  fmt::print("peak device      {}\n", units::format_bytes(static_cast<double>(metrics.peak_device_bytes)));
  fmt::print("peak host        {}\n", units::format_bytes(static_cast<double>(metrics.peak_host_bytes)));
  fmt::print("moved h2d/d2h/p2p {} / {} / {}\n", units::format_bytes(static_cast<double>(metrics.h2d_bytes)),
             units::format_bytes(static_cast<double>(metrics.d2h_bytes)),
             units::format_bytes(static_cast<double>(metrics.p2p_bytes)));
  fmt::print("swapped/recomputed {} / {}\n", units::format_bytes(static_cast<double>(metrics.swapped_bytes)),
             units::format_bytes(static_cast<double>(metrics.recomputed_bytes)));
  fmt::print("pcie busy h2d/d2h {:.1f} % / {:.1f} %\n", 100 * metrics.pcie_h2d_utilization,
             100 * metrics.pcie_d2h_utilization);
  fmt::print("recompute/compute {:.1f} %; compute hiding a copy {:.1f} %\n", 100 * metrics.recompute_fraction,
             100 * metrics.swap_overlap_fraction);
  if (metrics.policy.fault_batches > 0) // uvm
    fmt::print("page faults      {} batches; {} missed, {} migrated ({:.2f}x)\n", metrics.policy.fault_batches,
               units::format_bytes(static_cast<double>(metrics.policy.fault_missing_bytes)),
               units::format_bytes(static_cast<double>(metrics.policy.fault_migrated_bytes)),
               static_cast<double>(metrics.policy.fault_migrated_bytes) /
                   static_cast<double>(std::max<std::uint64_t>(metrics.policy.fault_missing_bytes, 1)));
  if (metrics.policy.on_demand_fetches > 0 || metrics.policy.mispredicted_iterations > 0) // dynn-offload
    fmt::print("on demand        {} fetches, {}; {} mispredicted iterations\n", metrics.policy.on_demand_fetches,
               units::format_bytes(static_cast<double>(metrics.policy.on_demand_bytes)),
               metrics.policy.mispredicted_iterations);
  if (metrics.samples_per_s)
    fmt::print("samples/s        {:.6g}\n", *metrics.samples_per_s);
  fmt::print("steps executed   {}\n", metrics.steps_executed);
  if (metrics.iteration_times_s.size() > 1) { // v2 multi-iteration plans
    std::string times;
    for (double time : metrics.iteration_times_s)
      times += (times.empty() ? "" : ", ") + units::format_duration(time);
    fmt::print("iterations       {} ({}); steady {}\n", metrics.iteration_times_s.size(), times,
               units::format_duration(metrics.steady_iteration_time_s));
  }
}

// --policy overrides the plan's policy; --policy-param k=v sets parameters of whichever policy runs.
std::optional<PolicyChoice> chosen_policy(const Plan& plan, const std::string& name,
                                          const std::vector<std::string>& assignments)
{
  std::optional<PolicyChoice> choice = plan.policy;
  if (!name.empty())
    choice = PolicyChoice{name, nlohmann::json::object()};
  if (!assignments.empty()) {
    if (!choice || choice->name == "none")
      throw InputError("--policy-param", "there is no policy to set parameters of (name one with --policy)");
    const PolicyInfo& info = policy_registry().get(choice->name);
    const nlohmann::json given = policy_registry().parse_assignments(info, assignments, "--policy-param");
    for (const auto& [key, value] : given.items())
      choice->params[key] = value;
  }
  if (choice && choice->name != "none") // check name and parameters now, with the flags' names
    policy_registry().complete_params(policy_registry().get(choice->name), choice->params);
  return choice;
}

} // namespace

void add_simulate_command(CLI::App& app, Context&)
{
  struct Options {
    std::string trace;
    std::string machine;
    std::string plan;
    std::string timeline;
    std::string engine = "simgrid";
    std::string allocator = "bytes";
    std::string policy;
    std::vector<std::string> policy_params;
    std::string realized_plan;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand("simulate", "Execute a plan on a modeled machine (SimGrid or the fast engine) "
                                                     "and report iteration time, stalls and peak memory");
  command->add_option("--trace", options->trace, "trace file (memsim-trace JSON)")->required();
  command->add_option("--machine", options->machine, "machine preset name or YAML file")->required();
  command->add_option("--plan", options->plan, "plan file (memsim-plan JSON)")->required();
  command->add_option("--timeline", options->timeline,
                      "write the per-step timeline: Chrome/Perfetto trace-event JSON (one track per device x stream, "
                      "a memory counter per device; open in ui.perfetto.dev) that also holds the memsim-timeline "
                      "records");
  command
      ->add_option("--engine", options->engine,
                   "simgrid (the reference) or fast (in-process fluid model with the same semantics and link "
                   "sharing)")
      ->check(CLI::IsMember({"simgrid", "fast"}))
      ->capture_default_str();
  command
      ->add_option("--allocator", options->allocator,
                   "bytes (count bytes) or pool (place every allocation in one arena of the budget with "
                   "memsim-cuda's best-fit allocator: fragmentation can make a plan fail)")
      ->check(CLI::IsMember({"bytes", "pool"}))
      ->capture_default_str();
  command->add_option("--policy", options->policy,
                      "online memory policy (see `memsim policies`), overriding the plan's `policy`; `none` runs "
                      "without one");
  command->add_option("--policy-param", options->policy_params, "a parameter of the policy as name=value (repeatable)");
  command->add_option("--realized-plan", options->realized_plan,
                      "write the static plan of what actually ran (the policy's actions as ordinary steps, with deps "
                      "that keep it memory-safe); replaying it without a policy gives the same result");
  command->add_flag("--json", options->json, "print the metrics as one JSON object instead of a table");
  command->footer("An infeasible plan (out of memory, tensor not resident) is a result, not an error: exit 0 with "
                  "feasible=false and the failing step, tensor, time and bytes.");
  command->callback([options] {
    Trace trace = load_trace(options->trace);
    Machine machine = load_machine_or_preset(options->machine, default_presets_dir());
    Plan plan = load_plan(options->plan);
    validate_plan(plan, trace, static_cast<int>(machine.gpus.size()), options->plan);
    SimOptions sim_options;
    sim_options.record_timeline = !options->timeline.empty();
    sim_options.engine = *engine_kind_from_string(options->engine);
    sim_options.allocator = *allocator_kind_from_string(options->allocator);
    sim_options.policy = chosen_policy(plan, options->policy, options->policy_params);
    sim_options.realized_plan = !options->realized_plan.empty();
    RunResult result = simulate(trace, machine, plan, sim_options);
    if (!options->realized_plan.empty()) {
      if (!result.realized_plan)
        throw InputError(options->realized_plan, "the run was not feasible: there is no realized plan to write");
      save_plan(*result.realized_plan, options->realized_plan);
    }
    if (!options->timeline.empty())
      write_json_file(timeline_to_json(result, fmt::format("memsim simulate {}", trace.name)), options->timeline);
    if (options->json)
      fmt::print("{}\n", metrics_to_json(result).dump());
    else
      print_summary(result.metrics, result.error);
  });
}

} // namespace memsim::cli
