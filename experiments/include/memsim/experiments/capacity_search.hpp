#pragma once
// The largest value of a size axis (batch, width, depth, ...) at which a workload still trains: the search behind
// `memsim max-scale`. Feasibility is a black box (plan + simulate) and need not be monotone — heuristic planners can
// fail at one size and succeed at a larger one — so the search probes exponentially, bisects, and then scans a
// window above the boundary it found; a feasible value in the window restarts the search from there. When the start
// and its window fail, doubling values up to the limit are probed for a first feasible one.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace memsim::experiments {

struct ProbeOutcome {
  bool feasible = false;
  double iteration_time_s = 0; // when feasible: the run's time, every iteration of the plan (μ-TWO's ring: its cycles)
  double samples_per_s = 0;    // when feasible
  std::string reason;          // when infeasible: why (no plan, OOM, below the throughput floor, ...)
};

struct Probe {
  std::int64_t value = 0;
  ProbeOutcome outcome;
};

struct CapacitySearchOptions {
  std::int64_t start = 1;       // first value probed (the smallest that counts)
  std::int64_t limit = 1 << 20; // no value above it is probed
  std::int64_t scan = 8;        // width of the window scanned above a bisected boundary
};

struct CapacityResult {
  std::optional<std::int64_t> largest; // nullopt: not even `start` is feasible
  bool reached_limit = false;          // `limit` itself is feasible: the true largest may be higher
  std::vector<Probe> probes;           // in the order they ran (each value at most once)
};

// The probe of `value` in a result (the largest value's, for its time and samples/s); nullptr if never probed.
const Probe* find_probe(const CapacityResult& result, std::int64_t value);

using ProbeFunction = std::function<ProbeOutcome(std::int64_t value)>;
// Called after each probe (progress lines).
using ProbeObserver = std::function<void(const Probe& probe, std::size_t probes_so_far)>;

// Throws std::invalid_argument for start < 1, limit < start or scan < 0.
CapacityResult find_largest_feasible(const ProbeFunction& probe, const CapacitySearchOptions& options,
                                     const ProbeObserver& observer = {});

} // namespace memsim::experiments
