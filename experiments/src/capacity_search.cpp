#include "memsim/experiments/capacity_search.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace memsim::experiments {
namespace {

// Runs each value's probe once and remembers every outcome in order.
class ProbeLog {
public:
  ProbeLog(const ProbeFunction& probe, const ProbeObserver& observer) : probe_(probe), observer_(observer) {}

  bool feasible(std::int64_t value)
  {
    auto known = outcomes_.find(value);
    if (known != outcomes_.end())
      return known->second;
    Probe probe{value, probe_(value)};
    outcomes_.emplace(value, probe.outcome.feasible);
    probes_.push_back(probe);
    if (observer_)
      observer_(probes_.back(), probes_.size());
    return probe.outcome.feasible;
  }

  std::vector<Probe> take() { return std::move(probes_); }

private:
  const ProbeFunction& probe_;
  const ProbeObserver& observer_;
  std::map<std::int64_t, bool> outcomes_;
  std::vector<Probe> probes_;
};

} // namespace

const Probe* find_probe(const CapacityResult& result, std::int64_t value)
{
  for (const Probe& probe : result.probes)
    if (probe.value == value)
      return &probe;
  return nullptr;
}

CapacityResult find_largest_feasible(const ProbeFunction& probe, const CapacitySearchOptions& options,
                                     const ProbeObserver& observer)
{
  if (options.start < 1 || options.limit < options.start || options.scan < 0)
    throw std::invalid_argument("capacity search: need 1 <= start <= limit and scan >= 0");
  ProbeLog log(probe, observer);
  CapacityResult result;

  std::optional<std::int64_t> low; // largest value known feasible
  if (log.feasible(options.start)) {
    low = options.start;
  } else {
    // Nothing at the start: the window above it, then doubling values up to the limit, may still hold a feasible
    // value (a runtime-overhead limit fails small sizes whose fixed costs, e.g. moving the weights, dominate).
    for (std::int64_t value = options.start + 1; value <= std::min(options.limit, options.start + options.scan);
         ++value)
      if (log.feasible(value)) {
        low = value;
        break;
      }
    for (std::int64_t value = options.start; !low && value < options.limit;) {
      value = value > options.limit / 2 ? options.limit : value * 2;
      if (log.feasible(value))
        low = value;
    }
  }

  while (low) {
    // Exponential probing from the known feasible value up to the first infeasible one (or the limit).
    std::int64_t high = *low;
    while (high < options.limit) {
      const std::int64_t next = high > options.limit / 2 ? options.limit : std::max(high * 2, high + 1);
      if (!log.feasible(next)) {
        high = next;
        break;
      }
      low = next;
      high = next;
    }
    if (high == *low) { // the limit itself is feasible
      result.reached_limit = true;
      break;
    }
    // Bisection keeps low feasible and high infeasible until they are adjacent.
    while (high - *low > 1) {
      const std::int64_t middle = *low + (high - *low) / 2;
      if (log.feasible(middle))
        low = middle;
      else
        high = middle;
    }
    // Local scan: the largest feasible value in the window above the boundary, if any, restarts the search.
    std::optional<std::int64_t> above;
    for (std::int64_t value = *low + 1; value <= std::min(options.limit, *low + options.scan); ++value)
      if (log.feasible(value))
        above = value;
    if (!above)
      break;
    low = above;
  }
  result.largest = low;
  result.probes = log.take();
  return result;
}

} // namespace memsim::experiments
