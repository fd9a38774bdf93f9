#pragma once
// Simulated vs measured: compares the timeline the simulator predicts for a plan with the one memsim-cuda
// measured for the same plan on a GPU (both are sim/timeline.hpp documents), step by step and as a whole.
// Signed errors are (simulated - measured) / measured: positive when the simulator is pessimistic.
#include "memsim/planners/plan.hpp"
#include "memsim/sim/timeline.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memsim::validation {

// One plan step that ran in both executors.
struct StepComparison {
  StepId step = 0;
  StepKind kind = StepKind::compute;
  std::string stream;
  std::string label;
  std::uint64_t bytes = 0;
  double simulated_start_s = 0;
  double simulated_end_s = 0;
  double measured_start_s = 0;
  double measured_end_s = 0;
  double simulated_duration_s() const { return simulated_end_s - simulated_start_s; }
  double measured_duration_s() const { return measured_end_s - measured_start_s; }
};

// Distribution of |simulated - measured| / measured over a set of steps (steps with a measured duration of
// zero are left out of the relative figures), plus the duration-weighted error sum|d| / sum(measured).
struct ErrorStats {
  std::size_t count = 0;
  double median_abs_relative = 0;
  double p90_abs_relative = 0;
  double max_abs_relative = 0;
  double weighted_abs_relative = 0;
  double median_abs_s = 0; // median |simulated - measured| in seconds
};

struct ValidationSummary {
  bool simulated_feasible = true;
  bool measured_feasible = true;
  std::string simulated_error; // the executors' error messages when infeasible
  std::string measured_error;
  double simulated_iteration_s = 0;
  double measured_iteration_s = 0;
  double iteration_error = 0; // signed relative
  double simulated_stall_s = 0;
  double measured_stall_s = 0;
  double stall_error_s = 0;            // signed, seconds
  double stall_error_of_iteration = 0; // stall_error_s / measured iteration time
  double simulated_transfer_s = 0;     // sum of offload + prefetch durations
  double measured_transfer_s = 0;
  double transfer_error = 0; // signed relative (0 when the plan moves nothing)
  double simulated_recompute_s = 0;
  double measured_recompute_s = 0;
  std::uint64_t simulated_peak_bytes = 0;
  std::uint64_t measured_peak_bytes = 0;
  double peak_error = 0;     // signed relative
  ErrorStats compute_steps;  // durations of compute + recompute steps
  ErrorStats transfer_steps; // durations of offload + prefetch steps
  ErrorStats step_end;       // |simulated end - measured end| / measured iteration time, every compared step
  std::size_t steps_compared = 0;
  std::size_t steps_only_simulated = 0;
  std::size_t steps_only_measured = 0;
  // From the measured document's `measured` object (memsim-cuda), when present.
  std::string kernels;
  std::size_t measured_iterations = 0;
  double measured_iteration_spread = 0; // (max - min) / median over the measured iterations
};

struct ValidationReport {
  ValidationSummary summary;
  std::vector<StepComparison> steps; // in step-id order
};

// Compares the two runs of the same plan. `measured_document` is the measured timeline JSON (its optional
// `measured` object supplies kernels and the iteration spread).
ValidationReport compare_runs(const RunResult& simulated, const RunResult& measured,
                              const nlohmann::json& measured_document = nlohmann::json::object());

ErrorStats error_stats(const std::vector<double>& simulated, const std::vector<double>& measured);

// steps.csv: one row per compared step.
std::string steps_csv(const ValidationReport& report);
nlohmann::json summary_to_json(const ValidationSummary& summary);
ValidationSummary summary_from_json(const nlohmann::json& document, const std::string& source_name);
// The summary's columns, for the sweep's validation.csv (after the cell's own columns).
std::vector<std::string> summary_csv_columns();
std::vector<std::string> summary_csv_values(const ValidationSummary& summary);

// "vgg16-b32.vdnn-all.f0.5" (fraction budgets) or "vgg16-b32.vdnn-all.b4000000000" (byte budgets):
// the file-name stem of a sweep cell's plan and measurements.
std::string cell_id(const std::string& workload, const std::string& planner_label, std::uint64_t budget_bytes,
                    std::optional<double> budget_fraction);

} // namespace memsim::validation
