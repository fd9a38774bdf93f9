#pragma once
// How much a dynamic network's control flow changes between iterations: the Jaccard distance between the sets of
// decisions two iterations took (a trace's `decisions`), as DyNN-Offload's Table I reports it (HPCA 2024, §II-B):
// JD(a, b) = 1 - |a ∩ b| / |a ∪ b|, each iteration against iteration 0, shares of iterations in five bins. The
// distances between consecutive iterations are summarized too (how stale the previous iteration's profile is).
#include "memsim/traces/trace.hpp"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <string>
#include <vector>

namespace memsim {

// 0 for two empty sets. Each list holds distinct ids (the trace loader checks it); order does not matter.
double jaccard_distance(const std::vector<std::string>& a, const std::vector<std::string>& b);

struct DecisionSummary {
  std::size_t iterations = 0;
  std::vector<double> to_first;    // JD(iteration k, iteration 0), k = 0..n-1 (Table I)
  std::vector<double> consecutive; // JD(iteration k, iteration k-1), k = 1..n-1
  double mean_to_first = 0, max_to_first = 0;
  double mean_consecutive = 0, max_consecutive = 0;
  // Table I's bins over iterations 1..n-1 against iteration 0: [0,0.2], (0.2,0.4], (0.4,0.6], (0.6,0.8], (0.8,1];
  // shares in [0, 1] (all 0 when there is a single iteration).
  std::array<double, 5> table_i_shares{};
};

// Throws InputError(source_name, ...) when the trace records no decisions.
DecisionSummary summarize_decisions(const Trace& trace, const std::string& source_name);
nlohmann::json decision_summary_to_json(const DecisionSummary& summary);
std::string format_decision_summary(const DecisionSummary& summary);

} // namespace memsim
