#pragma once
// Runs an experiment's cells in worker processes (never a SimGrid engine in this process), caches each
// cell's result under OUT/cells/<key>.json (written atomically, so a run killed at any point, even by SIGKILL,
// resumes), then writes results.csv, prints the table and draws the plots. OUT/sweep.json names the experiment
// and shard, for `memsim merge`.
#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/progress_line.hpp"

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace memsim::experiments {

// A sweep that could not finish: worker failures, an interruption, plotting that failed.
class RunError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// One of N parts of a sweep, for clusters: shard I of N (1-based) takes the cells whose index in the
// experiment's stable order (workloads, planners, budgets, bandwidths) is I-1 modulo N.
struct Shard {
  unsigned index = 1;
  unsigned count = 1;
  bool owns(std::size_t cell_index) const { return cell_index % count == index - 1; }
};
// "2/3" -> {2, 3}; InputError at "--shard" otherwise.
Shard parse_shard(const std::string& text);

struct RunOptions {
  unsigned jobs = 0; // 0: experiment.jobs, or the core count
  // Executable started as `WORKER worker --cell CELL.json --out RESULT.json` (normally /proc/self/exe).
  std::filesystem::path worker_executable;
  bool plots = true;
  std::filesystem::path python;      // default MEMSIM_PYTHON
  std::filesystem::path plot_script; // default data dir / experiments/plot/plot_results.py
  Progress progress = Progress::automatic;
  std::FILE* table_output = stdout; // nullptr: no table
  Shard shard;                      // 1/1: the whole sweep, with results.csv and plots
};

struct RunSummary {
  std::size_t cells = 0;             // of this shard (all of them unsharded)
  std::size_t computed = 0;          // run by a worker this time
  std::size_t cached = 0;            // taken from OUT/cells
  std::vector<std::string> failures; // one message per failed cell
  bool interrupted = false;
  std::filesystem::path results_csv; // written only when every cell has a result
  std::vector<std::filesystem::path> plot_files;
};

// Runs the sweep. Throws RunError when a cell failed (after running all others, so that a rerun redoes only
// the failed ones) or the run was interrupted; InputError for bad input.
RunSummary run_experiment(Experiment& experiment, const std::filesystem::path& out_dir, const RunOptions& options);

// Writes OUT/results.csv and the plots from the folders of `memsim run --shard` runs (all of one experiment),
// byte-identical to an unsharded run. InputError when a folder is not a run's, holds another experiment, repeats a
// shard, or when a cell has no result in any folder.
RunSummary merge_shards(const std::filesystem::path& out_dir, const std::vector<std::filesystem::path>& shard_dirs,
                        const RunOptions& options);

// The readable table: per workload and bandwidth, planners x budgets of iteration times or "infeasible".
std::string format_table(const std::vector<Cell>& cells, const std::vector<CellResult>& results);

// The worker subcommand's body: reads the cell, runs it, writes the result atomically.
void run_worker(const std::filesystem::path& cell_file, const std::filesystem::path& result_file);

} // namespace memsim::experiments
