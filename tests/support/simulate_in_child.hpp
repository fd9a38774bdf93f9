#pragma once
// SimGrid's Engine is one per process, so a test that simulates more than once (or shares its process with other
// tests, as when the binary is run by hand) simulates in a forked child. The child sends the whole RunResult back
// through a pipe as compact JSON (doubles round-trip exactly, the error with every field), cheap enough for
// thousands of runs per test.
#include "memsim/sim/simulator.hpp"

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

namespace memsim::test {

inline nlohmann::json run_result_to_wire(const RunResult& result)
{
  const Metrics& m = result.metrics;
  nlohmann::json steps = nlohmann::json::array();
  for (const StepRecord& r : result.timeline)
    steps.push_back({r.step, static_cast<int>(r.kind), r.device, r.stream, r.start_s, r.end_s, r.bytes, r.label,
                     r.iteration});
  nlohmann::json memory = nlohmann::json::array();
  for (const MemorySample& s : result.memory)
    memory.push_back({s.device, s.time_s, s.bytes});
  nlohmann::json wire = {{"metrics",
                          {m.feasible,
                           m.iteration_time_s,
                           m.compute_busy_s,
                           m.stall_time_s,
                           m.recompute_time_s,
                           m.peak_device_bytes,
                           m.peak_host_bytes,
                           m.h2d_bytes,
                           m.d2h_bytes,
                           m.p2p_bytes,
                           m.steps_executed,
                           m.iteration_times_s,
                           m.steady_iteration_time_s,
                           m.samples_per_s ? nlohmann::json(*m.samples_per_s) : nlohmann::json(nullptr),
                           m.pcie_h2d_utilization,
                           m.pcie_d2h_utilization,
                           m.swapped_bytes,
                           m.recomputed_bytes,
                           m.recompute_fraction,
                           m.swap_overlap_fraction,
                           m.policy.on_demand_fetches,
                           m.policy.on_demand_bytes,
                           m.policy.mispredicted_iterations,
                           m.policy.fault_batches,
                           m.policy.fault_missing_bytes,
                           m.policy.fault_migrated_bytes}},
                         {"steps", std::move(steps)},
                         {"memory", std::move(memory)}};
  if (result.error) {
    const ExecutionError& e = *result.error;
    wire["error"] = {e.step,
                     e.tensor ? nlohmann::json(*e.tensor) : nlohmann::json(nullptr),
                     e.time_s,
                     e.bytes_in_use,
                     e.bytes_requested,
                     e.message,
                     static_cast<int>(e.kind),
                     e.device,
                     e.largest_free_block};
  }
  if (result.realized_plan)
    wire["realized_plan"] = plan_to_json(*result.realized_plan);
  return wire;
}

inline RunResult run_result_from_wire(const nlohmann::json& wire)
{
  RunResult result;
  const nlohmann::json& m = wire.at("metrics");
  Metrics& metrics = result.metrics;
  metrics.feasible = m[0].get<bool>();
  metrics.iteration_time_s = m[1].get<double>();
  metrics.compute_busy_s = m[2].get<double>();
  metrics.stall_time_s = m[3].get<double>();
  metrics.recompute_time_s = m[4].get<double>();
  metrics.peak_device_bytes = m[5].get<std::uint64_t>();
  metrics.peak_host_bytes = m[6].get<std::uint64_t>();
  metrics.h2d_bytes = m[7].get<std::uint64_t>();
  metrics.d2h_bytes = m[8].get<std::uint64_t>();
  metrics.p2p_bytes = m[9].get<std::uint64_t>();
  metrics.steps_executed = m[10].get<std::size_t>();
  metrics.iteration_times_s = m[11].get<std::vector<double>>();
  metrics.steady_iteration_time_s = m[12].get<double>();
  if (!m[13].is_null())
    metrics.samples_per_s = m[13].get<double>();
  metrics.pcie_h2d_utilization = m[14].get<double>();
  metrics.pcie_d2h_utilization = m[15].get<double>();
  metrics.swapped_bytes = m[16].get<std::uint64_t>();
  metrics.recomputed_bytes = m[17].get<std::uint64_t>();
  metrics.recompute_fraction = m[18].get<double>();
  metrics.swap_overlap_fraction = m[19].get<double>();
  metrics.policy.on_demand_fetches = m[20].get<std::uint64_t>();
  metrics.policy.on_demand_bytes = m[21].get<std::uint64_t>();
  metrics.policy.mispredicted_iterations = m[22].get<std::uint64_t>();
  metrics.policy.fault_batches = m[23].get<std::uint64_t>();
  metrics.policy.fault_missing_bytes = m[24].get<std::uint64_t>();
  metrics.policy.fault_migrated_bytes = m[25].get<std::uint64_t>();
  for (const nlohmann::json& s : wire.at("steps"))
    result.timeline.push_back(StepRecord{s[0].get<StepId>(), static_cast<StepKind>(s[1].get<int>()), s[2].get<int>(),
                                         s[3].get<std::string>(), s[4].get<double>(), s[5].get<double>(),
                                         s[6].get<std::uint64_t>(), s[7].get<std::string>(), s[8].get<int>()});
  for (const nlohmann::json& s : wire.at("memory"))
    result.memory.push_back(MemorySample{s[0].get<int>(), s[1].get<double>(), s[2].get<std::uint64_t>()});
  if (wire.contains("error")) {
    const nlohmann::json& e = wire["error"];
    ExecutionError error;
    error.step = e[0].get<StepId>();
    if (!e[1].is_null())
      error.tensor = e[1].get<TensorId>();
    error.time_s = e[2].get<double>();
    error.bytes_in_use = e[3].get<std::uint64_t>();
    error.bytes_requested = e[4].get<std::uint64_t>();
    error.message = e[5].get<std::string>();
    error.kind = static_cast<FailureKind>(e[6].get<int>());
    error.device = e[7].get<int>();
    error.largest_free_block = e[8].get<std::uint64_t>();
    result.error = std::move(error);
  }
  if (wire.contains("realized_plan"))
    result.realized_plan = plan_from_json(wire["realized_plan"], "child's realized plan");
  return result;
}

// Runs `work` in a forked child and returns its result; an exception in the child is rethrown here as
// std::runtime_error with the same message.
inline RunResult run_in_child(const std::function<RunResult()>& work)
{
  int pipe_ends[2];
  if (::pipe(pipe_ends) != 0)
    throw std::runtime_error("pipe failed");
  std::fflush(nullptr); // else the child (SimGrid flushes stdio) prints the parent's buffered output again
  const pid_t child = ::fork();
  if (child < 0)
    throw std::runtime_error("fork failed");
  if (child == 0) {
    ::close(pipe_ends[0]);
    nlohmann::json reply;
    try {
      reply = run_result_to_wire(work());
    } catch (const std::exception& error) {
      reply = {{"exception", error.what()}};
    }
    const std::string text = reply.dump();
    std::size_t written = 0;
    while (written < text.size()) {
      const ssize_t n = ::write(pipe_ends[1], text.data() + written, text.size() - written);
      if (n <= 0)
        break;
      written += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(pipe_ends[1]);
  std::string text;
  char buffer[65536];
  for (ssize_t n; (n = ::read(pipe_ends[0], buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_ends[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || text.empty())
    throw std::runtime_error("the simulating child process died");
  const nlohmann::json reply = nlohmann::json::parse(text);
  if (reply.contains("exception"))
    throw std::runtime_error(reply["exception"].get<std::string>());
  return run_result_from_wire(reply);
}

inline RunResult simulate_in_child(const Trace& trace, const Machine& machine, const Plan& plan,
                                   const SimOptions& options = {})
{
  return run_in_child([&] { return simulate(trace, machine, plan, options); });
}

} // namespace memsim::test
