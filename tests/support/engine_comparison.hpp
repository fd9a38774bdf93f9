#pragma once
// The differential check between memsim's two engines. compare_runs compares two runs of one plan (SimGrid vs the
// fast engine): every step's start and end to 1e-9 relative (an absolute floor of 1e-15 s for times near zero), the
// memory profile and peaks per device exactly, bytes moved exactly, feasibility and the error (kind, step, tensor,
// device, numbers exactly, time to 1e-9 relative), and returns the differences, one line each (empty: the runs
// agree). run_on_engine runs one plan on a chosen engine; run_on_both_engines runs it on both and expects exactly
// that agreement.
#include "simulate_in_child.hpp"

#include "memsim/sim/simulator.hpp"
#include "memsim/sim/timeline.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace memsim::test {

inline bool same_time(double a, double b)
{
  return std::abs(a - b) <= std::max(1e-9 * std::max(std::abs(a), std::abs(b)), 1e-15);
}

inline std::map<int, std::uint64_t> peaks_per_device(const RunResult& result)
{
  std::map<int, std::uint64_t> peaks;
  for (const MemorySample& sample : result.memory)
    peaks[sample.device] = std::max(peaks[sample.device], sample.bytes);
  return peaks;
}

inline std::vector<std::string> compare_runs(const RunResult& reference, const RunResult& other)
{
  std::vector<std::string> differences;
  auto differ = [&](std::string line) {
    if (differences.size() < 12)
      differences.push_back(std::move(line));
  };
  const Metrics& a = reference.metrics;
  const Metrics& b = other.metrics;
  if (a.feasible != b.feasible)
    differ(fmt::format("feasible {} vs {}", a.feasible, b.feasible));
  if (reference.error.has_value() != other.error.has_value())
    differ(fmt::format("error: '{}' vs '{}'", reference.error ? reference.error->message : "none",
                       other.error ? other.error->message : "none"));
  if (reference.error && other.error) {
    const ExecutionError& x = *reference.error;
    const ExecutionError& y = *other.error;
    if (x.kind != y.kind || x.step != y.step || x.tensor != y.tensor || x.device != y.device ||
        x.bytes_in_use != y.bytes_in_use || x.bytes_requested != y.bytes_requested ||
        x.largest_free_block != y.largest_free_block || !same_time(x.time_s, y.time_s))
      differ(fmt::format("error: '{}' vs '{}'", x.message, y.message));
  }
  for (auto [name, x, y] :
       {std::tuple{"peak_device_bytes", a.peak_device_bytes, b.peak_device_bytes},
        std::tuple{"peak_host_bytes", a.peak_host_bytes, b.peak_host_bytes},
        std::tuple{"h2d_bytes", a.h2d_bytes, b.h2d_bytes}, std::tuple{"d2h_bytes", a.d2h_bytes, b.d2h_bytes},
        std::tuple{"p2p_bytes", a.p2p_bytes, b.p2p_bytes},
        std::tuple{"swapped_bytes", a.swapped_bytes, b.swapped_bytes},
        std::tuple{"recomputed_bytes", a.recomputed_bytes, b.recomputed_bytes}})
    if (x != y)
      differ(fmt::format("{} {} vs {}", name, x, y));
  for (auto [name, x, y] : {std::tuple{"pcie_h2d_utilization", a.pcie_h2d_utilization, b.pcie_h2d_utilization},
                            std::tuple{"pcie_d2h_utilization", a.pcie_d2h_utilization, b.pcie_d2h_utilization},
                            std::tuple{"recompute_fraction", a.recompute_fraction, b.recompute_fraction},
                            std::tuple{"swap_overlap_fraction", a.swap_overlap_fraction, b.swap_overlap_fraction},
                            std::tuple{"samples_per_s", a.samples_per_s.value_or(-1), b.samples_per_s.value_or(-1)}})
    if (!same_time(x, y))
      differ(fmt::format("{} {} vs {}", name, x, y));
  if (peaks_per_device(reference) != peaks_per_device(other))
    differ("peaks per device differ");
  if (!same_time(a.iteration_time_s, b.iteration_time_s))
    differ(fmt::format("iteration_time_s {} vs {}", a.iteration_time_s, b.iteration_time_s));
  if (a.iteration_times_s.size() != b.iteration_times_s.size())
    differ(fmt::format("{} vs {} iterations", a.iteration_times_s.size(), b.iteration_times_s.size()));
  for (std::size_t i = 0; i < std::min(a.iteration_times_s.size(), b.iteration_times_s.size()); ++i)
    if (!same_time(a.iteration_times_s[i], b.iteration_times_s[i]))
      differ(fmt::format("iteration {} time {} vs {}", i, a.iteration_times_s[i], b.iteration_times_s[i]));
  if (reference.timeline.size() != other.timeline.size())
    differ(fmt::format("{} vs {} steps executed", reference.timeline.size(), other.timeline.size()));
  for (std::size_t i = 0; i < std::min(reference.timeline.size(), other.timeline.size()); ++i) {
    const StepRecord& x = reference.timeline[i];
    const StepRecord& y = other.timeline[i];
    if (x.step != y.step) {
      differ(fmt::format("timeline entry {}: step {} vs {}", i, x.step, y.step));
      break;
    }
    if (!same_time(x.start_s, y.start_s) || !same_time(x.end_s, y.end_s) || x.bytes != y.bytes)
      differ(fmt::format("step {} ({} {}): [{:.17g}, {:.17g}] {} B vs [{:.17g}, {:.17g}] {} B", x.step,
                         to_string(x.kind), x.label, x.start_s, x.end_s, x.bytes, y.start_s, y.end_s, y.bytes));
  }
  if (reference.memory.size() != other.memory.size()) {
    differ(fmt::format("{} vs {} memory samples", reference.memory.size(), other.memory.size()));
  } else {
    for (std::size_t i = 0; i < reference.memory.size(); ++i) {
      const MemorySample& x = reference.memory[i];
      const MemorySample& y = other.memory[i];
      if (x.device != y.device || x.bytes != y.bytes || !same_time(x.time_s, y.time_s)) {
        differ(fmt::format("memory sample {}: gpu{} {} B at {:.17g} vs gpu{} {} B at {:.17g}", i, x.device, x.bytes,
                           x.time_s, y.device, y.bytes, y.time_s));
        break;
      }
    }
  }
  return differences;
}

struct EngineRuns {
  RunResult fast;
  RunResult simgrid;
};

// Adds a test failure listing every difference between the two runs (SimGrid taken as the reference); callers
// name what was run with SCOPED_TRACE.
inline void expect_engines_agree(const EngineRuns& runs)
{
  std::string text;
  for (const std::string& line : compare_runs(runs.simgrid, runs.fast))
    text += "\n  " + line;
  EXPECT_TRUE(text.empty()) << "SimGrid vs fast:" << text;
}

// Runs `plan` with `options` on `engine` (which replaces options.engine): the fast engine in this process, SimGrid
// in a forked child (SimGrid's Engine is one per process).
inline RunResult run_on_engine(EngineKind engine, const Trace& trace, const Machine& machine, const Plan& plan,
                               SimOptions options = {})
{
  options.engine = engine;
  return engine == EngineKind::fast ? simulate(trace, machine, plan, options)
                                    : simulate_in_child(trace, machine, plan, options);
}

// Runs `plan` on both engines (run_on_engine), both with `options` but for its engine, and expects the two runs to
// agree (expect_engines_agree).
inline EngineRuns run_on_both_engines(const Trace& trace, const Machine& machine, const Plan& plan,
                                      const SimOptions& options = {})
{
  EngineRuns runs{run_on_engine(EngineKind::fast, trace, machine, plan, options),
                  run_on_engine(EngineKind::simgrid, trace, machine, plan, options)};
  expect_engines_agree(runs);
  return runs;
}

} // namespace memsim::test
