#pragma once
// SimGrid's Engine is one per process, so a test that simulates more than once (or shares its process with other
// tests, as when the binary is run by hand) simulates in a forked child and gets the result back as JSON.
#include <cstdio>
#include "memsim/common/json_io.hpp"
#include "memsim/sim/simulator.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace memsim::test {

inline RunResult simulate_in_child(const Trace& trace, const Machine& machine, const Plan& plan,
                                   const SimOptions& options = {})
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
      const RunResult result = simulate(trace, machine, plan, options);
      reply = timeline_to_json(result);
      if (result.realized_plan)
        reply["realized_plan"] = plan_to_json(*result.realized_plan);
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
  nlohmann::json reply = nlohmann::json::parse(text);
  if (reply.contains("exception"))
    throw std::runtime_error(reply["exception"].get<std::string>());

  std::optional<Plan> realized_plan;
  if (reply.contains("realized_plan")) {
    realized_plan = plan_from_json(reply["realized_plan"], "child's realized plan");
    reply.erase("realized_plan");
  }
  RunResult result = timeline_from_json(reply, "child");
  result.realized_plan = std::move(realized_plan);
  // The metrics as the simulator computed them (not re-derived), and the error in full.
  const nlohmann::json& metrics = reply["metrics"];
  result.metrics.feasible = metrics["feasible"].get<bool>();
  result.metrics.iteration_time_s = metrics["iteration_time_s"].get<double>();
  result.metrics.compute_busy_s = metrics["compute_busy_s"].get<double>();
  result.metrics.stall_time_s = metrics["stall_time_s"].get<double>();
  result.metrics.recompute_time_s = metrics["recompute_time_s"].get<double>();
  result.metrics.peak_device_bytes = metrics["peak_device_bytes"].get<std::uint64_t>();
  result.metrics.peak_host_bytes = metrics["peak_host_bytes"].get<std::uint64_t>();
  result.metrics.h2d_bytes = metrics["h2d_bytes"].get<std::uint64_t>();
  result.metrics.d2h_bytes = metrics["d2h_bytes"].get<std::uint64_t>();
  result.metrics.p2p_bytes = metrics["p2p_bytes"].get<std::uint64_t>();
  result.metrics.steps_executed = metrics["steps_executed"].get<std::size_t>();
  if (metrics.contains("error")) {
    const nlohmann::json& error = metrics["error"];
    ExecutionError execution_error;
    execution_error.step = error["step"].get<StepId>();
    if (!error["tensor"].is_null())
      execution_error.tensor = error["tensor"].get<TensorId>();
    execution_error.time_s = error["time_s"].get<double>();
    execution_error.bytes_in_use = error["bytes_in_use"].get<std::uint64_t>();
    execution_error.bytes_requested = error["bytes_requested"].get<std::uint64_t>();
    execution_error.message = error["message"].get<std::string>();
    result.error = execution_error;
  }
  return result;
}

} // namespace memsim::test
