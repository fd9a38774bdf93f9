#include "memsim/sim/timeline.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace memsim {

std::string_view to_string(FailureKind kind)
{
  switch (kind) {
  case FailureKind::out_of_memory: return "out_of_memory";
  case FailureKind::fragmentation: return "fragmentation";
  case FailureKind::host_out_of_memory: return "host_out_of_memory";
  case FailureKind::not_resident: return "not_resident";
  case FailureKind::double_allocation: return "double_allocation";
  case FailureKind::no_host_copy: return "no_host_copy";
  case FailureKind::deadlock: return "deadlock";
  }
  return "?";
}

namespace {

// The union of the intervals as sorted, disjoint intervals.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> intervals)
{
  std::sort(intervals.begin(), intervals.end());
  std::vector<std::pair<double, double>> result;
  for (auto [start, end] : intervals) {
    if (!result.empty() && start <= result.back().second)
      result.back().second = std::max(result.back().second, end);
    else if (end > start)
      result.emplace_back(start, end);
  }
  return result;
}

// The length of the union of the intervals.
double covered_time(const std::vector<std::pair<double, double>>& intervals)
{
  double covered = 0;
  for (auto [start, end] : merged(intervals))
    covered += end - start;
  return covered;
}

// The length of the intersection of two unions of intervals.
double overlap_time(const std::vector<std::pair<double, double>>& a, const std::vector<std::pair<double, double>>& b)
{
  const auto x = merged(a);
  const auto y = merged(b);
  double overlap = 0;
  for (std::size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    overlap += std::max(0.0, std::min(x[i].second, y[j].second) - std::max(x[i].first, y[j].first));
    if (x[i].second < y[j].second)
      ++i;
    else
      ++j;
  }
  return overlap;
}

} // namespace

MetricsAccumulator::StreamTotals& MetricsAccumulator::totals(int device, const std::string& name)
{
  if (last_ < streams_.size() && streams_[last_].device == device && *streams_[last_].name == name)
    return streams_[last_];
  for (last_ = 0; last_ < streams_.size(); ++last_)
    if (streams_[last_].device == device && *streams_[last_].name == name)
      return streams_[last_];
  streams_.push_back(StreamTotals{device, &name, 0, 0});
  return streams_.back();
}

void MetricsAccumulator::add(StepKind kind, int device, const std::string& stream_name, double start_s, double end_s,
                             std::uint64_t bytes, int iteration, int loop)
{
  metrics_.iteration_time_s = std::max(metrics_.iteration_time_s, end_s);
  ++metrics_.steps_executed;
  const auto loop_index = static_cast<std::size_t>(std::max(loop, 0));
  if (iteration_ends_.size() <= loop_index)
    iteration_ends_.resize(loop_index + 1);
  std::vector<double>& ends = iteration_ends_[loop_index];
  const auto index = static_cast<std::size_t>(std::max(iteration, 0));
  if (ends.size() <= index)
    ends.resize(index + 1, 0.0);
  ends[index] = std::max(ends[index], end_s);
  const double duration = end_s - start_s;
  if (device != kHostDevice)
    gpus_.insert(device);
  if (kind == StepKind::prefetch || kind == StepKind::offload)
    host_copies_[device][kind == StepKind::prefetch ? 0 : 1].emplace_back(start_s, end_s);
  switch (kind) {
  case StepKind::compute:
  case StepKind::recompute: {
    if (kind == StepKind::recompute)
      metrics_.recomputed_bytes += bytes;
    if (device == kHostDevice)
      break; // host compute: the GPU metrics (busy, stalls) are about GPUs
    metrics_.compute_busy_s += duration;
    compute_intervals_[device].emplace_back(start_s, end_s);
    if (kind == StepKind::recompute)
      metrics_.recompute_time_s += duration;
    StreamTotals& stream = totals(device, stream_name);
    stream.busy += duration;
    stream.last_compute_end = std::max(stream.last_compute_end, end_s);
    break;
  }
  case StepKind::offload: metrics_.d2h_bytes += bytes; break;
  case StepKind::prefetch: metrics_.h2d_bytes += bytes; break;
  case StepKind::send:
  case StepKind::allreduce:
  case StepKind::allgather:
  case StepKind::reducescatter: metrics_.p2p_bytes += bytes; break;
  case StepKind::free:
  case StepKind::recv:
  case StepKind::split:
  case StepKind::merge: break;
  }
}

Metrics MetricsAccumulator::finish(const std::vector<MemorySample>& memory)
{
  // A compute stream is only ever idle because it waits for a dependency (data or memory).
  std::sort(streams_.begin(), streams_.end(), [](const StreamTotals& a, const StreamTotals& b) {
    return a.device != b.device ? a.device < b.device : *a.name < *b.name;
  });
  for (const StreamTotals& stream : streams_)
    metrics_.stall_time_s += std::max(0.0, stream.last_compute_end - stream.busy);
  for (const MemorySample& sample : memory)
    metrics_.peak_device_bytes = std::max(metrics_.peak_device_bytes, sample.bytes);
  // Each loop's iterations, timed from the end of the loop before it (loops without steps are skipped).
  double previous_end = 0;
  std::vector<std::vector<double>> loop_times;
  for (const std::vector<double>& ends : iteration_ends_) {
    if (ends.empty())
      continue;
    std::vector<double>& times = loop_times.emplace_back();
    for (double end : ends) {
      end = std::max(end, previous_end);
      times.push_back(end - previous_end);
      previous_end = end;
    }
  }
  if (metrics_.iteration_time_s > 0 && !gpus_.empty()) {
    std::array<double, 2> busy{0, 0};
    for (auto& [device, directions] : host_copies_)
      for (std::size_t direction = 0; direction < 2; ++direction)
        busy[direction] += covered_time(directions[direction]);
    const double span = metrics_.iteration_time_s * static_cast<double>(gpus_.size());
    metrics_.pcie_h2d_utilization = busy[0] / span;
    metrics_.pcie_d2h_utilization = busy[1] / span;
  }
  if (metrics_.compute_busy_s > 0) {
    metrics_.recompute_fraction = metrics_.recompute_time_s / metrics_.compute_busy_s;
    double overlapped = 0;
    for (const auto& [device, computing] : compute_intervals_) {
      const auto copies = host_copies_.find(device);
      if (copies == host_copies_.end())
        continue;
      std::vector<std::pair<double, double>> copying = copies->second[0];
      copying.insert(copying.end(), copies->second[1].begin(), copies->second[1].end());
      overlapped += overlap_time(copying, computing);
    }
    metrics_.swap_overlap_fraction = overlapped / metrics_.compute_busy_s;
  }
  auto steady = [](const std::vector<double>& times) {
    return times.size() == 1
               ? times[0]
               : std::accumulate(times.begin() + 1, times.end(), 0.0) / static_cast<double>(times.size() - 1);
  };
  if (loop_times.size() == 1) {
    metrics_.iteration_times_s = std::move(loop_times[0]);
    metrics_.steady_iteration_time_s = steady(metrics_.iteration_times_s);
  } else {
    for (const std::vector<double>& times : loop_times) {
      if (metrics_.iteration_times_s.size() < times.size())
        metrics_.iteration_times_s.resize(times.size(), 0.0);
      for (std::size_t i = 0; i < times.size(); ++i)
        metrics_.iteration_times_s[i] += times[i];
      metrics_.steady_iteration_time_s += steady(times);
    }
  }
  return metrics_;
}

Metrics metrics_from_timeline(const std::vector<StepRecord>& timeline, const std::vector<MemorySample>& memory)
{
  MetricsAccumulator metrics;
  for (const StepRecord& record : timeline)
    metrics.add(record.kind, record.device, record.stream, record.start_s, record.end_s, record.bytes, record.iteration,
                record.loop);
  return metrics.finish(memory);
}

nlohmann::json metrics_to_json(const RunResult& result)
{
  const Metrics& m = result.metrics;
  nlohmann::json document = {{"feasible", m.feasible && !result.error}};
  if (result.error) {
    const ExecutionError& e = *result.error;
    nlohmann::json error = {{"kind", to_string(e.kind)},
                            {"device", e.device},
                            {"step", e.step},
                            {"time_s", e.time_s},
                            {"bytes_in_use", e.bytes_in_use},
                            {"bytes_requested", e.bytes_requested},
                            {"largest_free_block", e.largest_free_block},
                            {"message", e.message}};
    error["tensor"] = e.tensor ? nlohmann::json(*e.tensor) : nlohmann::json(nullptr);
    document["error"] = std::move(error);
  }
  document["iteration_time_s"] = m.iteration_time_s;
  document["compute_busy_s"] = m.compute_busy_s;
  document["stall_time_s"] = m.stall_time_s;
  document["recompute_time_s"] = m.recompute_time_s;
  document["peak_device_bytes"] = m.peak_device_bytes;
  document["peak_host_bytes"] = m.peak_host_bytes;
  document["h2d_bytes"] = m.h2d_bytes;
  document["d2h_bytes"] = m.d2h_bytes;
  document["p2p_bytes"] = m.p2p_bytes;
  document["steps_executed"] = m.steps_executed;
  document["iteration_times_s"] = m.iteration_times_s;
  document["steady_iteration_time_s"] = m.steady_iteration_time_s;
  document["samples_per_s"] = m.samples_per_s ? nlohmann::json(*m.samples_per_s) : nlohmann::json(nullptr);
  document["pcie_h2d_utilization"] = m.pcie_h2d_utilization;
  document["pcie_d2h_utilization"] = m.pcie_d2h_utilization;
  document["swapped_bytes"] = m.swapped_bytes;
  document["recomputed_bytes"] = m.recomputed_bytes;
  document["recompute_fraction"] = m.recompute_fraction;
  document["swap_overlap_fraction"] = m.swap_overlap_fraction;
  document["on_demand_fetches"] = m.policy.on_demand_fetches;
  document["on_demand_bytes"] = m.policy.on_demand_bytes;
  document["mispredicted_iterations"] = m.policy.mispredicted_iterations;
  document["fault_batches"] = m.policy.fault_batches;
  document["fault_missing_bytes"] = m.policy.fault_missing_bytes;
  document["fault_migrated_bytes"] = m.policy.fault_migrated_bytes;
  return document;
}

nlohmann::json timeline_to_json(const RunResult& result, const std::string& process_name)
{
  nlohmann::json steps = nlohmann::json::array();
  for (const StepRecord& record : result.timeline) {
    steps.push_back({{"step", record.step},
                     {"kind", to_string(record.kind)},
                     {"device", record.device},
                     {"stream", record.stream},
                     {"start_s", record.start_s},
                     {"end_s", record.end_s},
                     {"bytes", record.bytes},
                     {"label", record.label}});
    if (record.iteration != 0)
      steps.back()["iteration"] = record.iteration;
    if (record.loop != 0)
      steps.back()["loop"] = record.loop;
  }
  nlohmann::json memory = nlohmann::json::array();
  for (const MemorySample& sample : result.memory)
    memory.push_back({sample.device, sample.time_s, sample.bytes});
  // One document for both readers: Perfetto reads traceEvents and ignores the other keys; memsim reads the rest.
  nlohmann::json document = to_perfetto(result, process_name);
  document["format"] = "memsim-timeline";
  document["version"] = 1;
  document["metrics"] = metrics_to_json(result);
  document["steps"] = std::move(steps);
  document["memory"] = std::move(memory);
  return document;
}

RunResult timeline_from_json(const nlohmann::json& document, const std::string& source_name)
{
  json_io::Node root(document, source_name);
  root.expect_format("memsim-timeline", 1);
  root.only_keys({"format", "version", "metrics", "steps", "memory", "source", "notes", "measured", "traceEvents",
                  "displayTimeUnit"});
  RunResult result;
  auto steps = root.at("steps");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    auto node = steps.item(i);
    node.only_keys({"step", "kind", "device", "stream", "start_s", "end_s", "bytes", "label", "iteration", "loop"});
    StepRecord record;
    record.step = node.at("step").as_int();
    auto kind = step_kind_from_string(node.at("kind").as_string());
    if (!kind)
      node.at("kind").fail("unknown step kind");
    record.kind = *kind;
    record.device = static_cast<int>(node.get_int("device", 0));
    record.stream = node.get_string("stream", "");
    record.start_s = node.at("start_s").as_number();
    record.end_s = node.at("end_s").as_number();
    if (record.end_s < record.start_s)
      node.at("end_s").fail("a step cannot end before it starts");
    record.bytes = node.get_uint("bytes", 0);
    record.label = node.get_string("label", "");
    record.iteration = static_cast<int>(node.get_int("iteration", 0));
    record.loop = static_cast<int>(node.get_int("loop", 0));
    result.timeline.push_back(std::move(record));
  }
  if (root.has("memory")) {
    auto memory = root.at("memory");
    for (std::size_t i = 0; i < memory.size(); ++i) {
      auto sample = memory.item(i);
      if (sample.size() != 3)
        sample.fail("a memory sample is [device, time_s, bytes]");
      result.memory.push_back(MemorySample{static_cast<int>(sample.item(0).as_int()), sample.item(1).as_number(),
                                           sample.item(2).as_uint()});
    }
  }
  result.metrics = metrics_from_timeline(result.timeline, result.memory);
  if (root.has("metrics")) {
    auto metrics = root.at("metrics");
    if (metrics.has("feasible"))
      result.metrics.feasible = metrics.at("feasible").as_bool();
    if (metrics.has("peak_device_bytes"))
      result.metrics.peak_device_bytes = metrics.at("peak_device_bytes").as_uint();
    // Not derivable from the steps: they need the trace and the host's residency.
    if (metrics.has("swapped_bytes"))
      result.metrics.swapped_bytes = metrics.at("swapped_bytes").as_uint();
    if (metrics.has("on_demand_fetches"))
      result.metrics.policy.on_demand_fetches = metrics.at("on_demand_fetches").as_uint();
    if (metrics.has("on_demand_bytes"))
      result.metrics.policy.on_demand_bytes = metrics.at("on_demand_bytes").as_uint();
    if (metrics.has("mispredicted_iterations"))
      result.metrics.policy.mispredicted_iterations = metrics.at("mispredicted_iterations").as_uint();
    for (auto [key, field] : {std::pair{"fault_batches", &PolicyCounters::fault_batches},
                              std::pair{"fault_missing_bytes", &PolicyCounters::fault_missing_bytes},
                              std::pair{"fault_migrated_bytes", &PolicyCounters::fault_migrated_bytes}})
      if (metrics.has(key))
        result.metrics.policy.*field = metrics.at(key).as_uint();
    if (metrics.has("samples_per_s") && !metrics.at("samples_per_s").value().is_null())
      result.metrics.samples_per_s = metrics.at("samples_per_s").as_number();
  }
  return result;
}

nlohmann::json to_perfetto(const RunResult& result, const std::string& process_name)
{
  nlohmann::json events = nlohmann::json::array();
  std::map<std::pair<int, std::string>, int> thread_ids;
  std::set<int> devices;
  for (const StepRecord& record : result.timeline) {
    auto key = std::make_pair(record.device, record.stream);
    if (!thread_ids.count(key)) {
      const int tid = static_cast<int>(thread_ids.size()) + 1;
      thread_ids[key] = tid;
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", record.device},
                        {"tid", tid},
                        {"args", {{"name", record.stream}}}});
    }
    if (devices.insert(record.device).second)
      events.push_back({{"ph", "M"},
                        {"name", "process_name"},
                        {"pid", record.device},
                        {"tid", 0},
                        {"args", {{"name", fmt::format("{} gpu{}", process_name, record.device)}}}});
    events.push_back({{"ph", "X"},
                      {"name", fmt::format("{} {}", to_string(record.kind), record.label)},
                      {"cat", to_string(record.kind)},
                      {"pid", record.device},
                      {"tid", thread_ids[key]},
                      {"ts", record.start_s * 1e6},
                      {"dur", (record.end_s - record.start_s) * 1e6},
                      {"args", {{"step", record.step}, {"bytes", record.bytes}}}});
  }
  for (const MemorySample& sample : result.memory)
    events.push_back({{"ph", "C"},
                      {"name", "memory"},
                      {"pid", sample.device},
                      {"ts", sample.time_s * 1e6},
                      {"args", {{"bytes", sample.bytes}}}});
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

} // namespace memsim
