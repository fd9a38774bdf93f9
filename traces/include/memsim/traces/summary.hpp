#pragma once
// What `memsim trace info` prints: counts, bytes by kind, compute time and the default-schedule peak.
#include "memsim/traces/trace.hpp"
#include "memsim/traces/views.hpp"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <string>

namespace memsim {

struct TraceSummary {
  std::string name;
  TraceSource source;
  std::size_t ops = 0;
  std::size_t tensors = 0;
  std::size_t layers = 0;                       // 1 + the largest layer index
  std::array<std::size_t, 7> tensors_by_kind{}; // indexed by TensorKind
  std::array<std::uint64_t, 7> bytes_by_kind{};
  std::array<std::size_t, 4> ops_by_phase{}; // indexed by Phase
  std::array<double, 4> time_by_phase_s{};
  double total_time_s = 0;
  std::uint64_t resident_bytes = 0;     // inputs, weights, optimizer state
  std::uint64_t default_peak_bytes = 0; // under the default schedule
  OpId default_peak_op = 0;
  std::uint64_t activation_bytes = 0;       // all activation tensors
  std::uint64_t saved_activation_bytes = 0; // activations alive at the end of the forward phase
  std::size_t ops_with_flops = 0, ops_with_bytes_accessed = 0;
  bool chain_view = false;
  std::string chain_view_reason; // why not, when there is no chain view
  std::size_t chain_layers = 0;
};

// `default_profile`: the default schedule's memory, from the execution core (default_memory_profile).
TraceSummary summarize_trace(const Trace& trace, const MemoryProfile& default_profile);
nlohmann::json summary_to_json(const TraceSummary& summary);
std::string format_summary(const TraceSummary& summary);

} // namespace memsim
