#pragma once
// Validation sweeps: an experiment's cells (workloads x planners x budgets on one calibrated machine) are
// planned here, run on a GPU by memsim-cuda (runtime/scripts/validation_sweep.sh), and the measurements
// folder that comes back is compared cell by cell with the simulation of the same plans.
#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/validation.hpp"
#include "memsim/planners/plan.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memsim::validation {

struct PlannedCell {
  experiments::Cell cell;
  std::string id;           // validation::cell_id: the stem of the cell's files
  std::optional<Plan> plan; // absent when the planner said no plan fits
  std::string infeasible;   // the planner's reason
};

// Plans every cell of the experiment (no simulation). Rejects experiments with a bandwidth axis: a
// measurement exists only for the machine as calibrated.
std::vector<PlannedCell> plan_cells(const experiments::Experiment& experiment);

// Writes DIR/workloads/<workload>.trace.json, DIR/plans/<cell>.plan.json for every planned cell and
// DIR/cells.txt ("cell workload kernels" per line; every cell with spin kernels, then every cell with gemm).
// Returns the planned cells.
std::vector<PlannedCell> prepare_sweep(experiments::Experiment& experiment, const std::filesystem::path& dir);

struct SweepOptions {
  std::filesystem::path executable; // memsim itself: each comparison runs as `memsim validate` in a child
  unsigned jobs = 1;
  bool plots = true;
  std::filesystem::path python;      // default MEMSIM_PYTHON
  std::filesystem::path plot_script; // experiments/plot/plot_validation.py
};

struct SweepRow {
  std::size_t cell = 0; // index into SweepSummary::cells
  std::string kernels;
  bool plan_matches = true; // the plan that ran (measurements/<cell>.plan.json) equals the one planned here
  ValidationSummary summary;
};

struct SweepSummary {
  std::vector<PlannedCell> cells; // every cell of the sweep, planned here
  std::vector<SweepRow> rows;
  std::size_t planner_infeasible = 0;
  std::vector<std::string> unmeasured; // planned cells without any measurement
  std::vector<std::string> failures;   // comparisons that failed
  std::filesystem::path csv;
  std::vector<std::filesystem::path> plots;
};

// For every planned cell and kernels kind with MEASUREMENTS/<cell>.<kernels>.measured.json: simulate the plan
// that ran and compare (child process per comparison, OUT/cells/<cell>.<kernels>/), then write
// OUT/validation.csv and, with plots, OUT/iteration_scatter.png, OUT/step_scatter.png,
// OUT/error_by_planner.png and OUT/timelines_<cell>.<kernels>.png for a few cells.
SweepSummary validate_sweep(experiments::Experiment& experiment, const std::filesystem::path& measurements,
                            const std::filesystem::path& out, const SweepOptions& options);

std::string sweep_csv_header();

// Runs the validation plot script (mode "cell" or "sweep") on DIR; throws RunError when it fails.
std::vector<std::filesystem::path> draw_validation_plots(const std::string& mode, const std::filesystem::path& dir,
                                                         const std::filesystem::path& python,
                                                         const std::filesystem::path& script,
                                                         const std::vector<std::string>& extra_arguments = {});
std::filesystem::path default_python();

} // namespace memsim::validation
