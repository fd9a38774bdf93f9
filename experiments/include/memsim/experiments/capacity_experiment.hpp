#pragma once
// Experiments with a `search:` block (TSPLIT's Table IV style): for every workload x planner x budget x bandwidth,
// the largest value of an axis that trains. Each search runs in this process on the fast engine (several at once on
// threads), is cached under OUT/searches/<key>.json as soon as it ends (an interrupted run resumes), and the results
// go to OUT/capacity.csv, a table (workloads x planners) and a grouped bar plot OUT/capacity.png.
#include "memsim/common/yaml_io.hpp"
#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/runner.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memsim::experiments {

inline constexpr const char* kPlotCapacity = "capacity";

// The `search:` block ({axis, axis_param, start, limit, scan, min_throughput}); checks it against the experiment's
// workloads (generator specs with a parameter for the axis, or traces on the batch axis) and budgets (absolute).
SearchSettings load_search_settings(const yaml_io::Node& node, const Experiment& experiment);

struct CapacityCell {
  std::size_t index = 0;
  std::string workload;
  std::string planner_label;
  ScaleStudy study;
  std::optional<double> bandwidth; // host-link bandwidth set by the sweep
};

struct CapacityOutcome {
  CapacityResult search;
  std::optional<double> min_samples_per_s; // the floor the search used, when there was one
};

std::vector<CapacityCell> expand_capacity_cells(const Experiment& experiment);

struct CapacitySummary {
  std::size_t cells = 0;
  std::size_t computed = 0;
  std::size_t cached = 0;
  std::filesystem::path capacity_csv;
  std::vector<std::filesystem::path> plot_files;
};

// Throws RunError when plotting fails (capacity.csv is complete by then), InputError for bad input.
CapacitySummary run_capacity_experiment(const Experiment& experiment, const std::filesystem::path& out_dir,
                                        const RunOptions& options);

std::string capacity_csv_header();
std::string capacity_csv_row(const CapacityCell& cell, const CapacityOutcome& outcome);

} // namespace memsim::experiments
