#include "tsplit_simulated.hpp"

#include "tsplit_emit.hpp"

#include <algorithm>
#include <numeric>

namespace memsim::tsplit {
namespace {

// The `kShortlist` best of `candidates` by the analytic ratio (`better` carries the kind's ties), kept in their
// listed order so that the ties after simulation fall as the analytic choice's do.
template <typename Better>
std::vector<Candidate> shortlist(const std::vector<Candidate>& candidates, Better better)
{
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return better(candidates[a], candidates[b]); });
  order.resize(std::min(order.size(), kShortlist));
  std::sort(order.begin(), order.end());
  std::vector<Candidate> kept;
  for (std::size_t k : order)
    kept.push_back(candidates[k]);
  return kept;
}

} // namespace

std::optional<Candidate> choose_by_simulation(const Model& model, OpId op, const TraceAnalysis& analysis,
                                              const Machine& machine, std::uint64_t budget, const Options& options)
{
  std::vector<Candidate> keep_whole = shortlist(model.non_split_candidates(op), better_non_split);
  std::vector<Candidate> split = shortlist(model.split_candidates(op), better_split);
  if (keep_whole.empty() && split.empty())
    return std::nullopt;
  const double without = simulate_partial_plan(model, analysis, machine, budget, options, op);
  const auto score = [&](Candidate& c) {
    Model trial = model;
    trial.apply(c, op);
    // A candidate only adds work and waits; a shorter run is the engine's rounding or reordering of its streams, so
    // ΔT is at least 0, as the analytic terms are.
    c.cost_s = std::max(simulate_partial_plan(trial, analysis, machine, budget, options, op) - without, 0.0);
  };
  std::for_each(keep_whole.begin(), keep_whole.end(), score);
  std::for_each(split.begin(), split.end(), score);
  return prefer_whole_or_split(best_of(keep_whole, better_non_split), best_of(split, better_split));
}

} // namespace memsim::tsplit
