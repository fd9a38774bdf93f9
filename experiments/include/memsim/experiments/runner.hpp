#pragma once
// Runs an experiment's cells in worker processes (never a SimGrid engine in this process), caches each
// cell's result under OUT/cells/<key>.json so that an interrupted run resumes, then writes results.csv,
// prints the table and draws the plots.
#include "memsim/experiments/experiment.hpp"

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

enum class Progress { automatic, on, off }; // automatic: a progress line when stderr is a TTY

struct RunOptions {
  unsigned jobs = 0; // 0: experiment.jobs, or the core count
  // Executable started as `WORKER worker --cell CELL.json --out RESULT.json` (normally /proc/self/exe).
  std::filesystem::path worker_executable;
  bool plots = true;
  std::filesystem::path python;      // default MEMSIM_PYTHON
  std::filesystem::path plot_script; // default data dir / experiments/plot/plot_results.py
  Progress progress = Progress::automatic;
  std::FILE* table_output = stdout; // nullptr: no table
};

struct RunSummary {
  std::size_t cells = 0;
  std::size_t computed = 0; // run by a worker this time
  std::size_t cached = 0;   // taken from OUT/cells
  std::vector<std::string> failures; // one message per failed cell
  bool interrupted = false;
  std::filesystem::path results_csv;   // written only when every cell has a result
  std::vector<std::filesystem::path> plot_files;
};

// Runs the sweep. Throws RunError when a cell failed (after running all others, so that a rerun redoes only
// the failed ones) or the run was interrupted; InputError for bad input.
RunSummary run_experiment(Experiment& experiment, const std::filesystem::path& out_dir, const RunOptions& options);

// The readable table: per workload and bandwidth, planners x budgets of iteration times or "infeasible".
std::string format_table(const std::vector<Cell>& cells, const std::vector<CellResult>& results);

// The worker subcommand's body: reads the cell, runs it, writes the result atomically.
void run_worker(const std::filesystem::path& cell_file, const std::filesystem::path& result_file);

} // namespace memsim::experiments
