#include "memsim/traces/decisions.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace memsim {

double jaccard_distance(const std::vector<std::string>& a, const std::vector<std::string>& b)
{
  const std::set<std::string> left(a.begin(), a.end());
  std::size_t common = 0;
  for (const std::string& choice : std::set<std::string>(b.begin(), b.end()))
    common += left.count(choice);
  const std::size_t either = left.size() + std::set<std::string>(b.begin(), b.end()).size() - common;
  return either == 0 ? 0.0 : 1.0 - static_cast<double>(common) / static_cast<double>(either);
}

namespace {

// Table I's bin of a distance: closed at 0.2 k + 0.2, open below (the first bin includes 0).
std::size_t table_i_bin(double distance)
{
  constexpr std::array<double, 4> kUpper{0.2, 0.4, 0.6, 0.8};
  for (std::size_t bin = 0; bin < kUpper.size(); ++bin)
    if (distance <= kUpper[bin])
      return bin;
  return 4;
}

double mean(const std::vector<double>& values, std::size_t skip)
{
  if (values.size() <= skip)
    return 0;
  double sum = 0;
  for (std::size_t i = skip; i < values.size(); ++i)
    sum += values[i];
  return sum / static_cast<double>(values.size() - skip);
}

double max_of(const std::vector<double>& values)
{
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

} // namespace

DecisionSummary summarize_decisions(const Trace& trace, const std::string& source_name)
{
  if (trace.decisions.empty())
    throw InputError(source_name, "the trace records no decisions (a dynamic-network generator writes them)");
  DecisionSummary summary;
  summary.iterations = trace.decisions.size();
  for (const auto& taken : trace.decisions)
    summary.to_first.push_back(jaccard_distance(taken, trace.decisions.front()));
  for (std::size_t k = 1; k < trace.decisions.size(); ++k)
    summary.consecutive.push_back(jaccard_distance(trace.decisions[k], trace.decisions[k - 1]));
  summary.mean_to_first = mean(summary.to_first, 1); // iteration 0 against itself is not a sample
  summary.max_to_first = max_of(summary.to_first);
  summary.mean_consecutive = mean(summary.consecutive, 0);
  summary.max_consecutive = max_of(summary.consecutive);
  if (summary.iterations > 1) {
    for (std::size_t k = 1; k < summary.to_first.size(); ++k)
      summary.table_i_shares[table_i_bin(summary.to_first[k])] += 1;
    for (double& share : summary.table_i_shares)
      share /= static_cast<double>(summary.iterations - 1);
  }
  return summary;
}

nlohmann::json decision_summary_to_json(const DecisionSummary& summary)
{
  return {{"iterations", summary.iterations},
          {"jaccard_to_first", summary.to_first},
          {"jaccard_consecutive", summary.consecutive},
          {"mean_jaccard_to_first", summary.mean_to_first},
          {"max_jaccard_to_first", summary.max_to_first},
          {"mean_jaccard_consecutive", summary.mean_consecutive},
          {"max_jaccard_consecutive", summary.max_consecutive},
          {"table_i_bins", {"[0,0.2]", "(0.2,0.4]", "(0.4,0.6]", "(0.6,0.8]", "(0.8,1]"}},
          {"table_i_shares", summary.table_i_shares}};
}

std::string format_decision_summary(const DecisionSummary& summary)
{
  std::string text = fmt::format("iterations: {}\n", summary.iterations);
  text += fmt::format("Jaccard distance to iteration 0: mean {:.4f}, max {:.4f}\n", summary.mean_to_first,
                      summary.max_to_first);
  text += fmt::format("Jaccard distance to the previous iteration: mean {:.4f}, max {:.4f}\n", summary.mean_consecutive,
                      summary.max_consecutive);
  text += "share of iterations 1.. by distance to iteration 0 (DyNN-Offload Table I bins):\n";
  constexpr std::array<const char*, 5> kBins{"[0,0.2]", "(0.2,0.4]", "(0.4,0.6]", "(0.6,0.8]", "(0.8,1]"};
  for (std::size_t bin = 0; bin < kBins.size(); ++bin)
    text += fmt::format("  {:<10} {:6.1f} %\n", kBins[bin], 100.0 * summary.table_i_shares[bin]);
  return text;
}

} // namespace memsim
