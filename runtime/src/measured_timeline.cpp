#include "memsim/runtime/measured_timeline.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace memsim::runtime {

namespace {

double median_of(std::vector<double> values)
{
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

nlohmann::json spread(const std::vector<double>& values)
{
  if (values.empty())
    return {{"min", 0.0}, {"median", 0.0}, {"max", 0.0}};
  return {{"min", *std::min_element(values.begin(), values.end())},
          {"median", median_of(values)},
          {"max", *std::max_element(values.begin(), values.end())}};
}

} // namespace

double iteration_time(const IterationTiming& timing)
{
  double end = 0;
  for (const StepTiming& step : timing)
    end = std::max(end, step.end_s);
  return end;
}

std::size_t median_iteration(const std::vector<IterationTiming>& iterations)
{
  if (iterations.empty())
    throw std::invalid_argument("no measured iterations");
  std::vector<std::size_t> order(iterations.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return iteration_time(iterations[a]) < iteration_time(iterations[b]);
  });
  return order[(order.size() - 1) / 2];
}

RunResult assemble_run_result(const Program& program, const IterationTiming& timing)
{
  if (timing.size() != program.steps.size())
    throw std::invalid_argument(fmt::format("timing has {} steps, the program {}", timing.size(),
                                            program.steps.size()));
  RunResult result;
  result.timeline.reserve(program.steps.size());
  for (std::size_t i = 0; i < program.steps.size(); ++i) {
    const ProgramStep& step = program.steps[i];
    StepRecord record;
    record.step = step.step;
    record.kind = step.kind;
    record.device = program.streams[step.stream].device; // the GPU, or -1 for a host step (v2)
    record.iteration = step.iteration;
    record.loop = step.loop;
    record.stream = program.streams[step.stream].name;
    record.start_s = timing[i].start_s;
    record.end_s = timing[i].end_s;
    record.bytes = step.record_bytes;
    record.label = step.label;
    result.timeline.push_back(std::move(record));
  }

  // Memory: +bytes at the allocating step's start, -bytes at the releasing step's end; at equal times the
  // releases come first (a block freed at t can hold a tensor allocated at t).
  struct Change {
    double time_s;
    std::int64_t delta;
  };
  std::vector<Change> changes;
  std::uint64_t initial = 0;
  for (std::size_t allocation : program.initial_allocations)
    initial += program.allocations[allocation].bytes;
  for (std::size_t i = 0; i < program.steps.size(); ++i) {
    for (std::size_t allocation : program.steps[i].allocations)
      changes.push_back({timing[i].start_s, static_cast<std::int64_t>(program.allocations[allocation].bytes)});
    for (std::size_t allocation : program.steps[i].releases)
      changes.push_back({timing[i].end_s, -static_cast<std::int64_t>(program.allocations[allocation].bytes)});
  }
  std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    return a.time_s < b.time_s || (a.time_s == b.time_s && a.delta < 0 && b.delta >= 0);
  });
  std::int64_t in_use = static_cast<std::int64_t>(initial);
  result.memory.push_back({program.device, 0.0, initial});
  for (std::size_t i = 0; i < changes.size();) {
    const double time = changes[i].time_s;
    for (; i < changes.size() && changes[i].time_s == time; ++i)
      in_use += changes[i].delta;
    MemorySample& last = result.memory.back();
    if (last.time_s == time)
      last.bytes = static_cast<std::uint64_t>(in_use);
    else
      result.memory.push_back({program.device, time, static_cast<std::uint64_t>(in_use)});
  }

  result.metrics = metrics_from_timeline(result.timeline, result.memory);
  if (program.failure) {
    const ProgramFailure& failure = *program.failure;
    ExecutionError error;
    error.step = failure.step;
    error.tensor = failure.tensor;
    error.bytes_in_use = failure.bytes_in_use;
    error.bytes_requested = failure.bytes_requested;
    for (StepId after : failure.after_steps)
      for (const StepRecord& record : result.timeline)
        if (record.step == after)
          error.time_s = std::max(error.time_s, record.end_s);
    error.message = failure.message(error.time_s);
    error.kind = failure.kind;
    error.device = program.device;
    error.largest_free_block = failure.largest_free_block;
    result.error = std::move(error);
    result.metrics.feasible = false;
  }
  return result;
}

nlohmann::json measurement_summary(const Program& program, const std::vector<IterationTiming>& iterations,
                                   const RunInfo& info)
{
  using nlohmann::json;
  std::vector<double> times;
  for (const IterationTiming& timing : iterations)
    times.push_back(iteration_time(timing));
  json summary = {{"executor", "memsim-cuda"},
                  {"gpu", info.gpu_name},
                  {"kernels", info.kernels},
                  {"warmup", info.warmup},
                  {"iterations", iterations.size()},
                  {"chosen_iteration", iterations.empty() ? 0 : median_iteration(iterations)},
                  {"iteration_times_s", times},
                  {"iteration_time_s", spread(times)},
                  {"spin_overhead_s", info.spin_overhead_s},
                  {"enqueue_gate_s", info.enqueue_gate_s},
                  {"enqueue_s", info.enqueue_s},
                  {"streams", program.streams.size()},
                  {"dependency_waits", program.dependency_waits},
                  {"memory_waits", program.memory_waits},
                  {"pool",
                   {{"budget_bytes", program.pool.budget_bytes},
                    {"arena_bytes", program.pool.arena_bytes},
                    {"list_order_peak_bytes", program.peak_bytes}}}};
  json steps = json::array();
  std::vector<double> kernel_errors;
  std::vector<double> kernel_relative_errors;
  for (std::size_t i = 0; i < program.steps.size(); ++i) {
    std::vector<double> durations;
    for (const IterationTiming& timing : iterations)
      durations.push_back(timing[i].end_s - timing[i].start_s);
    json entry = {{"step", program.steps[i].step}, {"duration_s", spread(durations)}};
    if (program.steps[i].work == WorkKind::kernel) {
      const double requested = program.steps[i].kernel_time_s;
      entry["requested_s"] = requested;
      const double error = median_of(durations) - requested;
      kernel_errors.push_back(std::fabs(error));
      if (requested > 0)
        kernel_relative_errors.push_back(std::fabs(error) / requested);
    }
    steps.push_back(std::move(entry));
  }
  summary["steps"] = std::move(steps);
  summary["kernel_time_error"] = {
      {"kernels", kernel_errors.size()},
      {"median_abs_s", median_of(kernel_errors)},
      {"max_abs_s", kernel_errors.empty() ? 0.0 : *std::max_element(kernel_errors.begin(), kernel_errors.end())},
      {"median_relative", median_of(kernel_relative_errors)}};
  return summary;
}

nlohmann::json measured_timeline_document(const Program& program, const std::vector<IterationTiming>& iterations,
                                          const RunInfo& info)
{
  IterationTiming none;
  const IterationTiming& chosen = iterations.empty() ? none : iterations[median_iteration(iterations)];
  nlohmann::json document = timeline_to_json(assemble_run_result(program, chosen));
  document["measured"] = measurement_summary(program, iterations, info);
  return document;
}

nlohmann::json raw_timings_to_json(const RawTimings& raw)
{
  using nlohmann::json;
  json iterations = json::array();
  for (const IterationTiming& timing : raw.iterations) {
    json starts = json::array();
    json ends = json::array();
    for (const StepTiming& step : timing) {
      starts.push_back(step.start_s);
      ends.push_back(step.end_s);
    }
    iterations.push_back({{"start_s", std::move(starts)}, {"end_s", std::move(ends)}});
  }
  return {{"format", "memsim-cuda-timings"},
          {"version", 1},
          {"gpu", raw.info.gpu_name},
          {"kernels", raw.info.kernels},
          {"warmup", raw.info.warmup},
          {"spin_overhead_s", raw.info.spin_overhead_s},
          {"enqueue_gate_s", raw.info.enqueue_gate_s},
          {"enqueue_s", raw.info.enqueue_s},
          {"pool",
           {{"budget_bytes", raw.pool.budget_bytes},
            {"arena_bytes", raw.pool.arena_bytes},
            {"alignment", raw.pool.alignment}}},
          {"iterations", std::move(iterations)}};
}

RawTimings raw_timings_from_json(const nlohmann::json& document, const std::string& source_name)
{
  auto fail = [&](const std::string& path, const std::string& what) {
    throw InputError(fmt::format("{}: at {}", source_name, path), what);
  };
  try {
    if (document.at("format") != "memsim-cuda-timings")
      fail("/format", "expected format 'memsim-cuda-timings'");
    if (document.at("version") != 1)
      fail("/version", "unsupported version (expected 1)");
    RawTimings raw;
    raw.info.gpu_name = document.at("gpu").get<std::string>();
    raw.info.kernels = document.at("kernels").get<std::string>();
    raw.info.warmup = document.at("warmup").get<std::size_t>();
    raw.info.spin_overhead_s = document.at("spin_overhead_s").get<double>();
    raw.info.enqueue_gate_s = document.at("enqueue_gate_s").get<double>();
    raw.info.enqueue_s = document.value("enqueue_s", 0.0); // absent in the first H100 runs
    const auto& pool = document.at("pool");
    raw.pool.budget_bytes = pool.at("budget_bytes").get<std::uint64_t>();
    raw.pool.arena_bytes = pool.at("arena_bytes").get<std::uint64_t>();
    raw.pool.alignment = pool.at("alignment").get<std::uint64_t>();
    const auto& iterations = document.at("iterations");
    for (std::size_t i = 0; i < iterations.size(); ++i) {
      const auto& starts = iterations[i].at("start_s");
      const auto& ends = iterations[i].at("end_s");
      if (starts.size() != ends.size())
        fail(fmt::format("/iterations/{}", i), "start_s and end_s differ in length");
      IterationTiming timing(starts.size());
      for (std::size_t j = 0; j < starts.size(); ++j)
        timing[j] = {starts[j].get<double>(), ends[j].get<double>()};
      raw.iterations.push_back(std::move(timing));
    }
    if (raw.iterations.empty())
      fail("/iterations", "no iterations");
    return raw;
  } catch (const nlohmann::json::exception& error) {
    throw InputError(source_name, fmt::format("not a memsim-cuda-timings document: {}", error.what()));
  }
}

} // namespace memsim::runtime
