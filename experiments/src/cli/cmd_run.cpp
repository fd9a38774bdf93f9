// memsim run (an experiment sweep) and the hidden memsim worker (one sweep cell per process).
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/experiments/capacity_experiment.hpp"
#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/runner.hpp"
#include "memsim/hwmodels/machine.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <memory>

namespace memsim::cli {
namespace {

struct RunArguments {
  std::string experiment_file;
  std::string out_dir;
  unsigned jobs = 0;
  bool no_plots = false;
  std::string engine;    // empty: the experiment's `engine:` (default simgrid)
  std::string allocator; // empty: the experiment's `allocator:` (default bytes)
  std::string shard;     // "I/N"; empty: the whole sweep
  experiments::Progress progress = experiments::Progress::automatic;
};

struct MergeArguments {
  std::string out_dir;
  std::vector<std::string> shard_dirs;
  bool no_plots = false;
};

struct WorkerArguments {
  std::string cell_file;
  std::string result_file;
};

} // namespace

void add_run_command(CLI::App& app, Context& context)
{
  auto arguments = std::make_shared<RunArguments>();
  CLI::App* command = app.add_subcommand(
      "run", "Run an experiment: sweep workloads x planners x budgets x bandwidths, write results.csv and plots "
             "(capacity.csv for an experiment with a `search:` block)");
  command->footer(
      "Each cell runs in its own worker process; results are cached in OUT/cells, so rerunning after an\n"
      "interruption redoes only the missing cells. Writes OUT/results.csv and OUT/<plot>.png.\n"
      "With --shard I/N it runs only the cells whose index (in the experiment's stable order: workloads,\n"
      "planners, budgets, bandwidths; from 0) is I-1 modulo N, and writes no results.csv: `memsim merge` joins\n"
      "the N folders into results.csv and plots byte-identical to an unsharded run.\n"
      "Exit codes: 0 done, 2 bad input or an output folder that cannot be written (the message names the path\n"
      "and the system's reason), 3 a cell or the plotting failed, 130 interrupted.");
  command->add_option("experiment", arguments->experiment_file, "Experiment YAML (format: memsim-experiment)")
      ->required();
  command->add_option("--out", arguments->out_dir, "Output folder (created if missing)")->required();
  command
      ->add_option("--jobs,-j", arguments->jobs,
                   "Worker processes at once (default: the experiment's parallelism.jobs, else the core count)")
      ->check(CLI::Range(1u, 4096u));
  command->add_flag("--no-plots", arguments->no_plots, "Write results.csv only; do not run matplotlib");
  command
      ->add_option("--engine", arguments->engine,
                   "Simulation engine for every cell: simgrid (the reference) or fast (in-process, same results); "
                   "overrides the experiment's `engine:`")
      ->check(CLI::IsMember({"simgrid", "fast"}));
  command
      ->add_option("--allocator", arguments->allocator,
                   "Memory model for every cell: bytes (count bytes) or pool (memsim-cuda's best-fit arena); "
                   "overrides the experiment's `allocator:`")
      ->check(CLI::IsMember({"bytes", "pool"}));
  command->add_option("--shard", arguments->shard,
                      "Run only shard I of N (1 <= I <= N): the cells whose index is I-1 modulo N; for clusters");
  add_progress_option(command, arguments->progress);
  command->callback([arguments, &context] {
    experiments::Experiment experiment =
        experiments::load_experiment(arguments->experiment_file, default_presets_dir());
    if (!arguments->engine.empty())
      experiment.simulation.engine = *engine_kind_from_string(arguments->engine);
    if (!arguments->allocator.empty())
      experiment.simulation.allocator = *allocator_kind_from_string(arguments->allocator);
    experiments::RunOptions options;
    options.jobs = arguments->jobs;
    options.worker_executable = context.executable;
    options.progress = arguments->progress;
    options.plots = !arguments->no_plots;
    options.plot_script = data_dir() / "experiments" / "plot" / "plot_results.py";
    if (experiment.search) {
      if (!arguments->shard.empty())
        throw InputError("--shard", "a search experiment runs in one process (threads): it has no shards");
      try {
        const experiments::CapacitySummary summary =
            experiments::run_capacity_experiment(experiment, arguments->out_dir, options);
        fmt::print(stderr, "memsim: run: {} searches ({} computed, {} cached) -> {}\n", summary.cells, summary.computed,
                   summary.cached, summary.capacity_csv.string());
      } catch (const experiments::RunError& error) {
        fmt::print(stderr, "memsim: run: {}\n", error.what());
        context.exit_code = 3;
      }
      return;
    }
    if (!arguments->shard.empty())
      options.shard = experiments::parse_shard(arguments->shard);
    experiments::RunSummary summary;
    try {
      summary = experiments::run_experiment(experiment, arguments->out_dir, options);
    } catch (const experiments::RunError& error) {
      fmt::print(stderr, "memsim: run: {}\n", error.what());
      context.exit_code = 3;
      return;
    }
    if (summary.interrupted) {
      fmt::print(stderr,
                 "memsim: run: interrupted; results of finished cells are kept in {}/cells: rerun the "
                 "same command to finish the rest\n",
                 arguments->out_dir);
      context.exit_code = 130;
    } else if (!summary.failures.empty()) {
      for (const auto& failure : summary.failures)
        fmt::print(stderr, "memsim: run: {}\n", failure);
      fmt::print(stderr,
                 "memsim: run: {} of {} cells failed; no results.csv written. The other cells are cached: fix the "
                 "cause and rerun the same command.\n",
                 summary.failures.size(), summary.cells);
      context.exit_code = 3;
    }
  });
}

void add_merge_command(CLI::App& app, Context& context)
{
  auto arguments = std::make_shared<MergeArguments>();
  CLI::App* command =
      app.add_subcommand("merge",
                         "Join the output folders of `memsim run EXP --shard I/N` runs into results.csv and plots");
  command->footer("The folders must hold shards of one experiment (same file, same cells) and together a result for\n"
                  "every cell; the output is byte-identical to an unsharded `memsim run`.\n"
                  "Exit codes: 0 done, 2 folders of different experiments, missing cells or an unwritable OUT,\n"
                  "3 the plotting failed.");
  command->add_option("out", arguments->out_dir, "Output folder for results.csv and the plots (created if missing)")
      ->required();
  command->add_option("shards", arguments->shard_dirs, "The shards' --out folders")->required();
  command->add_flag("--no-plots", arguments->no_plots, "Write results.csv only; do not run matplotlib");
  command->callback([arguments, &context] {
    experiments::RunOptions options;
    options.plots = !arguments->no_plots;
    options.plot_script = data_dir() / "experiments" / "plot" / "plot_results.py";
    std::vector<std::filesystem::path> shard_dirs(arguments->shard_dirs.begin(), arguments->shard_dirs.end());
    try {
      experiments::merge_shards(arguments->out_dir, shard_dirs, options);
    } catch (const experiments::RunError& error) {
      fmt::print(stderr, "memsim: merge: {}\n", error.what());
      context.exit_code = 3;
    }
  });
}

void add_worker_command(CLI::App& app, Context&)
{
  auto arguments = std::make_shared<WorkerArguments>();
  CLI::App* command = app.add_subcommand("worker", "Run one sweep cell (used by memsim run)");
  command->group(""); // hidden from --help
  command->add_option("--cell", arguments->cell_file, "Cell JSON written by memsim run")->required();
  command->add_option("--out", arguments->result_file, "Where to write the cell's result JSON")->required();
  command->callback([arguments] { experiments::run_worker(arguments->cell_file, arguments->result_file); });
}

std::filesystem::path data_dir()
{
  if (const char* dir = std::getenv("MEMSIM_DATA_DIR"))
    return dir;
  return MEMSIM_SOURCE_DIR;
}

} // namespace memsim::cli
