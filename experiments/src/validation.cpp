#include "memsim/experiments/validation.hpp"

#include "memsim/common/error.hpp"
#include "memsim/experiments/experiment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace memsim::validation {
namespace {

using experiments::format_number;
using Json = nlohmann::json;

// Quantile by linear interpolation between order statistics (q in [0, 1]); 0 for an empty set.
double quantile(std::vector<double> values, double q)
{
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

double relative(double simulated, double measured) { return measured > 0 ? (simulated - measured) / measured : 0; }

bool is_transfer(StepKind kind) { return kind == StepKind::offload || kind == StepKind::prefetch; }

// A compute-stream stall is idle time waiting for data; the runs' own metrics define it identically.
Json stats_to_json(const ErrorStats& stats)
{
  return Json{{"count", stats.count},
              {"median_abs_relative", stats.median_abs_relative},
              {"p90_abs_relative", stats.p90_abs_relative},
              {"max_abs_relative", stats.max_abs_relative},
              {"weighted_abs_relative", stats.weighted_abs_relative},
              {"median_abs_s", stats.median_abs_s}};
}

ErrorStats stats_from_json(const Json& node)
{
  ErrorStats stats;
  stats.count = node.at("count").get<std::size_t>();
  stats.median_abs_relative = node.at("median_abs_relative").get<double>();
  stats.p90_abs_relative = node.at("p90_abs_relative").get<double>();
  stats.max_abs_relative = node.at("max_abs_relative").get<double>();
  stats.weighted_abs_relative = node.at("weighted_abs_relative").get<double>();
  stats.median_abs_s = node.at("median_abs_s").get<double>();
  return stats;
}

} // namespace

ErrorStats error_stats(const std::vector<double>& simulated, const std::vector<double>& measured)
{
  if (simulated.size() != measured.size())
    throw std::invalid_argument("error_stats: simulated and measured differ in length");
  ErrorStats stats;
  stats.count = simulated.size();
  std::vector<double> relative_errors;
  std::vector<double> absolute_errors;
  double absolute_sum = 0;
  double measured_sum = 0;
  for (std::size_t i = 0; i < simulated.size(); ++i) {
    const double difference = std::fabs(simulated[i] - measured[i]);
    absolute_errors.push_back(difference);
    absolute_sum += difference;
    measured_sum += measured[i];
    if (measured[i] > 0)
      relative_errors.push_back(difference / measured[i]);
  }
  stats.median_abs_relative = quantile(relative_errors, 0.5);
  stats.p90_abs_relative = quantile(relative_errors, 0.9);
  stats.max_abs_relative =
      relative_errors.empty() ? 0 : *std::max_element(relative_errors.begin(), relative_errors.end());
  stats.weighted_abs_relative = measured_sum > 0 ? absolute_sum / measured_sum : 0;
  stats.median_abs_s = quantile(absolute_errors, 0.5);
  return stats;
}

ValidationReport compare_runs(const RunResult& simulated, const RunResult& measured, const Json& measured_document)
{
  ValidationReport report;
  ValidationSummary& s = report.summary;
  s.simulated_feasible = simulated.metrics.feasible && !simulated.error;
  s.measured_feasible = measured.metrics.feasible && !measured.error;
  if (simulated.error)
    s.simulated_error = simulated.error->message;
  if (measured.error)
    s.measured_error = measured.error->message;
  s.simulated_iteration_s = simulated.metrics.iteration_time_s;
  s.measured_iteration_s = measured.metrics.iteration_time_s;
  s.iteration_error = relative(s.simulated_iteration_s, s.measured_iteration_s);
  s.simulated_stall_s = simulated.metrics.stall_time_s;
  s.measured_stall_s = measured.metrics.stall_time_s;
  s.stall_error_s = s.simulated_stall_s - s.measured_stall_s;
  s.stall_error_of_iteration = s.measured_iteration_s > 0 ? s.stall_error_s / s.measured_iteration_s : 0;
  s.simulated_recompute_s = simulated.metrics.recompute_time_s;
  s.measured_recompute_s = measured.metrics.recompute_time_s;
  s.simulated_peak_bytes = simulated.metrics.peak_device_bytes;
  s.measured_peak_bytes = measured.metrics.peak_device_bytes;
  s.peak_error = relative(static_cast<double>(s.simulated_peak_bytes), static_cast<double>(s.measured_peak_bytes));

  std::map<StepId, const StepRecord*> measured_by_step;
  for (const StepRecord& record : measured.timeline)
    measured_by_step[record.step] = &record;
  std::map<StepId, const StepRecord*> simulated_by_step;
  for (const StepRecord& record : simulated.timeline)
    simulated_by_step[record.step] = &record;

  std::vector<double> compute_sim, compute_meas, transfer_sim, transfer_meas, end_sim, end_meas;
  for (const auto& [step, sim_record] : simulated_by_step) {
    auto found = measured_by_step.find(step);
    if (found == measured_by_step.end()) {
      ++s.steps_only_simulated;
      continue;
    }
    const StepRecord& meas_record = *found->second;
    StepComparison row;
    row.step = step;
    row.kind = sim_record->kind;
    row.stream = sim_record->stream;
    row.label = sim_record->label;
    row.bytes = sim_record->bytes;
    row.simulated_start_s = sim_record->start_s;
    row.simulated_end_s = sim_record->end_s;
    row.measured_start_s = meas_record.start_s;
    row.measured_end_s = meas_record.end_s;
    if (step_names_op(row.kind)) {
      compute_sim.push_back(row.simulated_duration_s());
      compute_meas.push_back(row.measured_duration_s());
    } else if (is_transfer(row.kind)) {
      transfer_sim.push_back(row.simulated_duration_s());
      transfer_meas.push_back(row.measured_duration_s());
      s.simulated_transfer_s += row.simulated_duration_s();
      s.measured_transfer_s += row.measured_duration_s();
    }
    // Drift of the step's end within the iteration, in units of the measured iteration.
    end_sim.push_back(row.simulated_end_s);
    end_meas.push_back(row.measured_end_s);
    report.steps.push_back(std::move(row));
  }
  for (const auto& [step, record] : measured_by_step)
    if (!simulated_by_step.count(step))
      ++s.steps_only_measured;
  s.steps_compared = report.steps.size();
  s.transfer_error = relative(s.simulated_transfer_s, s.measured_transfer_s);
  s.compute_steps = error_stats(compute_sim, compute_meas);
  s.transfer_steps = error_stats(transfer_sim, transfer_meas);
  // Step ends: absolute differences over the measured iteration time (a relative error per step end would
  // weigh the first microseconds of the iteration as much as its end).
  {
    std::vector<double> scaled_sim, scaled_meas;
    const double scale = s.measured_iteration_s > 0 ? s.measured_iteration_s : 1;
    for (std::size_t i = 0; i < end_sim.size(); ++i) {
      scaled_sim.push_back((end_sim[i] - end_meas[i]) / scale + 1);
      scaled_meas.push_back(1);
    }
    s.step_end = error_stats(scaled_sim, scaled_meas);
    s.step_end.median_abs_s = s.step_end.median_abs_s * scale;
  }

  if (measured_document.is_object() && measured_document.contains("measured")) {
    const Json& info = measured_document.at("measured");
    if (info.contains("kernels") && info.at("kernels").is_string())
      s.kernels = info.at("kernels").get<std::string>();
    if (info.contains("iteration_times_s") && info.at("iteration_times_s").is_array()) {
      std::vector<double> times = info.at("iteration_times_s").get<std::vector<double>>();
      s.measured_iterations = times.size();
      const double median = quantile(times, 0.5);
      if (!times.empty() && median > 0)
        s.measured_iteration_spread =
            (*std::max_element(times.begin(), times.end()) - *std::min_element(times.begin(), times.end())) / median;
    }
  }
  return report;
}

std::string steps_csv(const ValidationReport& report)
{
  std::string text = "step,kind,stream,label,bytes,simulated_start_s,simulated_end_s,measured_start_s,"
                     "measured_end_s,simulated_duration_s,measured_duration_s,duration_error\n";
  for (const StepComparison& row : report.steps) {
    std::string label = row.label;
    std::replace(label.begin(), label.end(), ',', ';');
    std::replace(label.begin(), label.end(), '"', '\'');
    text += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", row.step, to_string(row.kind), row.stream, label,
                        row.bytes, format_number(row.simulated_start_s), format_number(row.simulated_end_s),
                        format_number(row.measured_start_s), format_number(row.measured_end_s),
                        format_number(row.simulated_duration_s()), format_number(row.measured_duration_s()),
                        row.measured_duration_s() > 0
                            ? format_number(relative(row.simulated_duration_s(), row.measured_duration_s()))
                            : std::string());
  }
  return text;
}

Json summary_to_json(const ValidationSummary& s)
{
  return Json{{"format", "memsim-validation"},
              {"version", 1},
              {"simulated_feasible", s.simulated_feasible},
              {"measured_feasible", s.measured_feasible},
              {"simulated_error", s.simulated_error},
              {"measured_error", s.measured_error},
              {"simulated_iteration_s", s.simulated_iteration_s},
              {"measured_iteration_s", s.measured_iteration_s},
              {"iteration_error", s.iteration_error},
              {"simulated_stall_s", s.simulated_stall_s},
              {"measured_stall_s", s.measured_stall_s},
              {"stall_error_s", s.stall_error_s},
              {"stall_error_of_iteration", s.stall_error_of_iteration},
              {"simulated_transfer_s", s.simulated_transfer_s},
              {"measured_transfer_s", s.measured_transfer_s},
              {"transfer_error", s.transfer_error},
              {"simulated_recompute_s", s.simulated_recompute_s},
              {"measured_recompute_s", s.measured_recompute_s},
              {"simulated_peak_bytes", s.simulated_peak_bytes},
              {"measured_peak_bytes", s.measured_peak_bytes},
              {"peak_error", s.peak_error},
              {"compute_steps", stats_to_json(s.compute_steps)},
              {"transfer_steps", stats_to_json(s.transfer_steps)},
              {"step_end", stats_to_json(s.step_end)},
              {"steps_compared", s.steps_compared},
              {"steps_only_simulated", s.steps_only_simulated},
              {"steps_only_measured", s.steps_only_measured},
              {"kernels", s.kernels},
              {"measured_iterations", s.measured_iterations},
              {"measured_iteration_spread", s.measured_iteration_spread}};
}

ValidationSummary summary_from_json(const Json& document, const std::string& source_name)
{
  try {
    if (document.value("format", "") != "memsim-validation" || document.value("version", 0) != 1)
      throw InputError(source_name, "not a memsim-validation summary (format memsim-validation, version 1)");
    ValidationSummary s;
    s.simulated_feasible = document.at("simulated_feasible").get<bool>();
    s.measured_feasible = document.at("measured_feasible").get<bool>();
    s.simulated_error = document.at("simulated_error").get<std::string>();
    s.measured_error = document.at("measured_error").get<std::string>();
    s.simulated_iteration_s = document.at("simulated_iteration_s").get<double>();
    s.measured_iteration_s = document.at("measured_iteration_s").get<double>();
    s.iteration_error = document.at("iteration_error").get<double>();
    s.simulated_stall_s = document.at("simulated_stall_s").get<double>();
    s.measured_stall_s = document.at("measured_stall_s").get<double>();
    s.stall_error_s = document.at("stall_error_s").get<double>();
    s.stall_error_of_iteration = document.at("stall_error_of_iteration").get<double>();
    s.simulated_transfer_s = document.at("simulated_transfer_s").get<double>();
    s.measured_transfer_s = document.at("measured_transfer_s").get<double>();
    s.transfer_error = document.at("transfer_error").get<double>();
    s.simulated_recompute_s = document.at("simulated_recompute_s").get<double>();
    s.measured_recompute_s = document.at("measured_recompute_s").get<double>();
    s.simulated_peak_bytes = document.at("simulated_peak_bytes").get<std::uint64_t>();
    s.measured_peak_bytes = document.at("measured_peak_bytes").get<std::uint64_t>();
    s.peak_error = document.at("peak_error").get<double>();
    s.compute_steps = stats_from_json(document.at("compute_steps"));
    s.transfer_steps = stats_from_json(document.at("transfer_steps"));
    s.step_end = stats_from_json(document.at("step_end"));
    s.steps_compared = document.at("steps_compared").get<std::size_t>();
    s.steps_only_simulated = document.at("steps_only_simulated").get<std::size_t>();
    s.steps_only_measured = document.at("steps_only_measured").get<std::size_t>();
    s.kernels = document.at("kernels").get<std::string>();
    s.measured_iterations = document.at("measured_iterations").get<std::size_t>();
    s.measured_iteration_spread = document.at("measured_iteration_spread").get<double>();
    return s;
  } catch (const nlohmann::json::exception& error) {
    throw InputError(source_name, fmt::format("malformed memsim-validation summary: {}", error.what()));
  }
}

std::vector<std::string> summary_csv_columns()
{
  return {"kernels",
          "simulated_feasible",
          "measured_feasible",
          "simulated_iteration_s",
          "measured_iteration_s",
          "iteration_error",
          "simulated_stall_s",
          "measured_stall_s",
          "stall_error_s",
          "stall_error_of_iteration",
          "simulated_transfer_s",
          "measured_transfer_s",
          "transfer_error",
          "simulated_peak_bytes",
          "measured_peak_bytes",
          "peak_error",
          "compute_steps",
          "compute_step_median_abs_error",
          "compute_step_p90_abs_error",
          "compute_step_weighted_abs_error",
          "transfer_steps",
          "transfer_step_median_abs_error",
          "transfer_step_p90_abs_error",
          "transfer_step_weighted_abs_error",
          "step_end_median_abs_error",
          "step_end_p90_abs_error",
          "step_end_max_abs_error",
          "steps_compared",
          "measured_iterations",
          "measured_iteration_spread"};
}

std::vector<std::string> summary_csv_values(const ValidationSummary& s)
{
  auto boolean = [](bool value) { return std::string(value ? "true" : "false"); };
  return {s.kernels,
          boolean(s.simulated_feasible),
          boolean(s.measured_feasible),
          format_number(s.simulated_iteration_s),
          format_number(s.measured_iteration_s),
          format_number(s.iteration_error),
          format_number(s.simulated_stall_s),
          format_number(s.measured_stall_s),
          format_number(s.stall_error_s),
          format_number(s.stall_error_of_iteration),
          format_number(s.simulated_transfer_s),
          format_number(s.measured_transfer_s),
          format_number(s.transfer_error),
          std::to_string(s.simulated_peak_bytes),
          std::to_string(s.measured_peak_bytes),
          format_number(s.peak_error),
          std::to_string(s.compute_steps.count),
          format_number(s.compute_steps.median_abs_relative),
          format_number(s.compute_steps.p90_abs_relative),
          format_number(s.compute_steps.weighted_abs_relative),
          std::to_string(s.transfer_steps.count),
          format_number(s.transfer_steps.median_abs_relative),
          format_number(s.transfer_steps.p90_abs_relative),
          format_number(s.transfer_steps.weighted_abs_relative),
          format_number(s.step_end.median_abs_relative),
          format_number(s.step_end.p90_abs_relative),
          format_number(s.step_end.max_abs_relative),
          std::to_string(s.steps_compared),
          std::to_string(s.measured_iterations),
          format_number(s.measured_iteration_spread)};
}

std::string cell_id(const std::string& workload, const std::string& planner_label, std::uint64_t budget_bytes,
                    std::optional<double> budget_fraction)
{
  if (budget_fraction)
    return fmt::format("{}.{}.f{}", workload, planner_label, format_number(*budget_fraction));
  return fmt::format("{}.{}.b{}", workload, planner_label, budget_bytes);
}

} // namespace memsim::validation
