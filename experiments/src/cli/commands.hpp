#pragma once
// Each `memsim` subcommand lives in its own file and registers itself on the CLI11 app here.
// A command's callback throws InputError for bad input (main prints it and exits 2) and sets
// `exit_code` for results that are not success (e.g. 1 when a planner says no plan fits).
#include "memsim/experiments/progress_line.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>

namespace memsim::cli {

struct Context {
  int exit_code = 0;
  std::filesystem::path executable; // /proc/self/exe: sweeps re-run it as worker processes
};

void add_simulate_command(CLI::App& app, Context& context);
void add_plan_command(CLI::App& app, Context& context);
// memsim planners | policies | generators | importers: the registered components and their parameters.
void add_list_commands(CLI::App& app, Context& context);
void add_gen_command(CLI::App& app, Context& context);
// memsim gen fuse (added by add_gen_command): not a registered generator, it transforms a trace.
void add_gen_fuse_command(CLI::App* gen);
void add_run_command(CLI::App& app, Context& context);
// memsim merge OUT SHARD_DIR...: results.csv and plots from the folders of sharded runs.
void add_merge_command(CLI::App& app, Context& context);
void add_worker_command(CLI::App& app, Context& context); // hidden: one sweep cell
void add_trace_command(CLI::App& app, Context& context);
void add_import_command(CLI::App& app, Context& context);
void add_validate_command(CLI::App& app, Context& context);
void add_max_scale_command(CLI::App& app, Context& context);
// memsim harmony estimate: Harmony's own runtime estimator on a layer profile.
void add_harmony_command(CLI::App& app, Context& context);
// memsim harmony profile (added by add_harmony_command): a layer profile from traces.
void add_harmony_profile_command(CLI::App* harmony);

// --progress auto|on|lines|off, bound to `progress` (default automatic).
CLI::Option* add_progress_option(CLI::App* command, experiments::Progress& progress);
// --state-dir DIR (PlanRequest::state_dir), bound to `folder` (default empty: no state is kept).
CLI::Option* add_state_dir_option(CLI::App* command, std::filesystem::path& folder);

// Where shipped data lives: configs/machines etc. (source tree, or MEMSIM_DATA_DIR).
std::filesystem::path data_dir();

} // namespace memsim::cli
