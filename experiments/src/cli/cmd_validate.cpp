// memsim validate: compare the simulator with what memsim-cuda measured on a GPU for the same plan, one plan
// at a time or for a whole experiment sweep from a measurements folder.
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/common/units.hpp"
#include "memsim/experiments/processes.hpp"
#include "memsim/experiments/runner.hpp"
#include "memsim/experiments/validation.hpp"
#include "memsim/experiments/validation_sweep.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/plan.hpp"
#include "memsim/sim/ledger.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/traces/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <thread>

namespace memsim::cli {
namespace {

namespace fs = std::filesystem;

struct ValidateOptions {
  std::string trace;
  std::string machine;
  std::string plan;
  std::string measured;
  std::string experiment;
  std::string prepare;
  std::string measurements;
  std::string out;
  std::string allocator = "bytes";
  unsigned jobs = 0;
  bool json = false;
  bool no_plots = false;
  bool quiet = false;
};

std::string percent(double fraction) { return fmt::format("{:+.2f}%", 100 * fraction); }

void print_summary(const validation::ValidationSummary& s)
{
  auto feasible = [](bool ok, const std::string& error) {
    return ok ? std::string("feasible") : "infeasible: " + error;
  };
  fmt::print("simulated        {}\n", feasible(s.simulated_feasible, s.simulated_error));
  fmt::print("measured         {}\n", feasible(s.measured_feasible, s.measured_error));
  fmt::print("iteration time   simulated {}  measured {}  error {}\n", units::format_duration(s.simulated_iteration_s),
             units::format_duration(s.measured_iteration_s), percent(s.iteration_error));
  fmt::print("stall            simulated {}  measured {}  error {} ({} of the iteration)\n",
             units::format_duration(s.simulated_stall_s), units::format_duration(s.measured_stall_s),
             units::format_duration(s.stall_error_s), percent(s.stall_error_of_iteration));
  fmt::print("transfer time    simulated {}  measured {}  error {}\n", units::format_duration(s.simulated_transfer_s),
             units::format_duration(s.measured_transfer_s), percent(s.transfer_error));
  fmt::print("peak device      simulated {}  measured {}  error {}\n",
             units::format_bytes(static_cast<double>(s.simulated_peak_bytes)),
             units::format_bytes(static_cast<double>(s.measured_peak_bytes)), percent(s.peak_error));
  fmt::print("compute steps    {}: median |error| {:.2f}%, p90 {:.2f}%, weighted {:.2f}%\n", s.compute_steps.count,
             100 * s.compute_steps.median_abs_relative, 100 * s.compute_steps.p90_abs_relative,
             100 * s.compute_steps.weighted_abs_relative);
  fmt::print("transfer steps   {}: median |error| {:.2f}%, p90 {:.2f}%, weighted {:.2f}%\n", s.transfer_steps.count,
             100 * s.transfer_steps.median_abs_relative, 100 * s.transfer_steps.p90_abs_relative,
             100 * s.transfer_steps.weighted_abs_relative);
  fmt::print("step ends        {}: median |drift| {:.2f}% of the iteration, p90 {:.2f}%, max {:.2f}%\n",
             s.steps_compared, 100 * s.step_end.median_abs_relative, 100 * s.step_end.p90_abs_relative,
             100 * s.step_end.max_abs_relative);
  if (s.steps_only_simulated + s.steps_only_measured > 0)
    fmt::print("steps in one run only: simulated {}, measured {}\n", s.steps_only_simulated, s.steps_only_measured);
}

void validate_one(const ValidateOptions& options)
{
  Trace trace = load_trace(options.trace);
  Machine machine = load_machine_or_preset(options.machine, default_presets_dir());
  Plan plan = load_plan(options.plan);
  validate_plan(plan, trace, static_cast<int>(machine.gpus.size()), options.plan);
  const json_io::Json measured_document = json_io::read_file(options.measured);
  const RunResult measured = timeline_from_json(measured_document, options.measured);

  SimOptions sim_options;
  sim_options.allocator = *allocator_kind_from_string(options.allocator);
  const RunResult simulated = simulate(trace, machine, plan, sim_options);
  const validation::ValidationReport report = validation::compare_runs(simulated, measured, measured_document);

  if (!options.out.empty()) {
    const fs::path out = options.out;
    fs::create_directories(out);
    json_io::write_file(out / "simulated.timeline.json",
                        timeline_to_json(simulated, fmt::format("memsim simulate {}", trace.name)));
    write_text_file(out / "steps.csv", validation::steps_csv(report));
    write_text_file(out / "summary.json", validation::summary_to_json(report.summary).dump(2) + "\n");
    if (!options.no_plots)
      validation::draw_validation_plots("cell", out, validation::default_python(),
                                        data_dir() / "experiments" / "plot" / "plot_validation.py",
                                        {"--measured", fs::absolute(options.measured).string()});
  }
  if (options.json)
    fmt::print("{}\n", validation::summary_to_json(report.summary).dump());
  else if (!options.quiet)
    print_summary(report.summary);
}

void validate_sweep(const ValidateOptions& options, const Context& context)
{
  experiments::Experiment experiment = experiments::load_experiment(options.experiment, default_presets_dir());
  if (!options.prepare.empty()) {
    const auto planned = validation::prepare_sweep(experiment, options.prepare);
    const auto runnable = std::count_if(planned.begin(), planned.end(),
                                        [](const validation::PlannedCell& c) { return c.plan.has_value(); });
    fmt::print("{} cells, {} planned, {} infeasible for their planner; wrote {}/plans, {}/workloads, {}/cells.txt\n",
               planned.size(), runnable, planned.size() - static_cast<std::size_t>(runnable), options.prepare,
               options.prepare, options.prepare);
    fmt::print("on the GPU: runtime/scripts/validation_sweep.sh MEMSIM_CUDA {} OUT_DIR\n", options.prepare);
    return;
  }
  validation::SweepOptions sweep;
  sweep.executable = context.executable;
  sweep.jobs = options.jobs == 0 ? std::max(1u, std::thread::hardware_concurrency()) : options.jobs;
  sweep.plots = !options.no_plots;
  sweep.plot_script = data_dir() / "experiments" / "plot" / "plot_validation.py";
  const validation::SweepSummary summary =
      validation::validate_sweep(experiment, options.measurements, options.out, sweep);

  fmt::print("{:<36} {:<5} {:>11} {:>11} {:>9} {:>9} {:>9}\n", "cell", "kern", "simulated", "measured", "iter err",
             "stall err", "xfer err");
  for (const validation::SweepRow& row : summary.rows) {
    const auto& s = row.summary;
    fmt::print("{:<36} {:<5} {:>11} {:>11} {:>9} {:>9} {:>9}{}\n", summary.cells[row.cell].id, row.kernels,
               s.simulated_feasible ? units::format_duration(s.simulated_iteration_s) : "infeasible",
               s.measured_feasible ? units::format_duration(s.measured_iteration_s) : "infeasible",
               percent(s.iteration_error), percent(s.stall_error_of_iteration),
               s.transfer_steps.count ? percent(s.transfer_error) : "-", row.plan_matches ? "" : "  (plan differs)");
  }
  fmt::print("{} comparisons; {} cells infeasible for their planner; {} planned cells not measured\n",
             summary.rows.size(), summary.planner_infeasible, summary.unmeasured.size());
  fmt::print("results: {}\n", summary.csv.string());
  for (const auto& plot : summary.plots)
    fmt::print("plot: {}\n", plot.string());
  if (!summary.failures.empty()) {
    for (const auto& failure : summary.failures)
      fmt::print(stderr, "memsim: validate: {}\n", failure);
    throw experiments::RunError(fmt::format("{} comparisons failed", summary.failures.size()));
  }
}

} // namespace

void add_validate_command(CLI::App& app, Context& context)
{
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* command =
      app.add_subcommand("validate",
                         "Compare the simulation of a plan with the timeline memsim-cuda measured for it on a GPU");
  command->add_option("--trace", options->trace, "trace file (memsim-trace JSON)");
  command->add_option("--machine", options->machine, "machine preset name or YAML file (the calibrated GPU)");
  command->add_option("--plan", options->plan, "the plan that ran (memsim-plan JSON)");
  command->add_option("--measured", options->measured, "timeline written by `memsim-cuda run --timeline`");
  command->add_option("--experiment", options->experiment,
                      "sweep mode: an experiment YAML (workloads x planners x budgets on one machine)");
  command->add_option("--prepare", options->prepare,
                      "sweep mode: plan every cell and write the GPU's inputs to this folder, then stop");
  command->add_option("--measurements", options->measurements,
                      "sweep mode: folder of <cell>.<spin|gemm>.measured.json (+ <cell>.plan.json) from the GPU");
  command->add_option("--out", options->out,
                      "folder for the results: one plan: summary.json, steps.csv, simulated.timeline.json, plots; "
                      "sweep: validation.csv, cells/, plots");
  command
      ->add_option("--allocator", options->allocator,
                   "one plan: the simulator's allocator, bytes or pool (as `memsim simulate --allocator`; compare "
                   "pool with `memsim-cuda run --allocator pool`); a sweep uses the experiment's `allocator`")
      ->check(CLI::IsMember({"bytes", "pool"}))
      ->capture_default_str();
  command->add_option("--jobs", options->jobs, "sweep mode: comparisons in parallel (default: the core count)");
  command->add_flag("--json", options->json, "one plan: print the summary as one JSON object");
  command->add_flag("--no-plots", options->no_plots, "do not run matplotlib");
  command->add_flag("--quiet", options->quiet, "one plan: print nothing (the files under --out hold everything)");
  command->footer(
      "One plan: --trace T --machine M --plan P --measured measured.json [--out DIR].\n"
      "Sweep: --experiment E.yaml --prepare DIR (inputs for runtime/scripts/validation_sweep.sh on the GPU), then\n"
      "       --experiment E.yaml --measurements DIR --out OUT.\n"
      "Errors are (simulated - measured) / measured. Exit 0 done, 2 bad input, 3 a comparison or the plots failed.");
  command->callback([options, &context] {
    const bool one = !options->trace.empty() || !options->plan.empty() || !options->measured.empty();
    const bool sweep = !options->experiment.empty();
    if (one == sweep)
      throw InputError("memsim validate",
                       "give either --trace, --machine, --plan and --measured (one plan) or --experiment (a sweep)");
    if (one) {
      for (const auto& [name, value] :
           {std::pair{"--trace", &options->trace}, std::pair{"--machine", &options->machine},
            std::pair{"--plan", &options->plan}, std::pair{"--measured", &options->measured}})
        if (value->empty())
          throw InputError("memsim validate", fmt::format("{} is required to validate one plan", name));
    } else {
      if (options->prepare.empty() == options->measurements.empty())
        throw InputError("memsim validate", "--experiment needs either --prepare DIR or --measurements DIR --out OUT");
      if (!options->measurements.empty() && options->out.empty())
        throw InputError("memsim validate", "--measurements needs --out OUT");
    }
    try {
      if (one)
        validate_one(*options);
      else
        validate_sweep(*options, context);
    } catch (const experiments::RunError& error) {
      fmt::print(stderr, "memsim: validate: {}\n", error.what());
      context.exit_code = 3;
    }
  });
}

} // namespace memsim::cli
