// Harmony's configuration search over the packing methods of layer_packing.hpp.
#include "memsim/planners/harmony/search.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace memsim::harmony {
namespace {

// Microbatch sizes the search tries: the profile's range up to the samples per rank, dividing them evenly.
std::vector<int> allowed_sizes(const LayerProfile& profile, LayerPass pass, int gpus, int minibatch, Mode mode)
{
  const std::vector<int>& sampled = profile.sampled(pass);
  const int samples = mode == Mode::dp ? minibatch / gpus : minibatch;
  std::vector<int> sizes;
  for (int u = sampled.front(); u <= std::min(sampled.back(), samples); ++u) {
    bool even = true;
    if (mode == Mode::dp) {
      for (int rank = 0; rank < gpus; ++rank) {
        const int share = minibatch / gpus + (rank < minibatch % gpus ? 1 : 0);
        even = even && share % u == 0;
      }
    } else {
      even = minibatch % u == 0;
    }
    if (even)
      sizes.push_back(u);
  }
  return sizes;
}

} // namespace

std::optional<std::vector<LayerPack>> balanced_time_packs(const LayerProfile& profile, LayerPass pass, int u,
                                                          std::size_t count, double memory_cap)
{
  return pack_layers(PackingMethod::balanced_time, layer_costs(profile, pass, u, count), memory_cap);
}

std::optional<SearchResult> search(const LayerProfile& profile, int gpus, int minibatch, Mode mode,
                                   const SearchSettings& settings)
{
  if (gpus < 1 || minibatch < gpus)
    throw InputError("--minibatch", fmt::format("{} samples on {} GPUs", minibatch, gpus));
  if (!(settings.memory_cap > 0))
    throw InputError("--memory-cap", "must be positive");
  struct Candidate {
    Configuration config;
    const char* forward_method;
    const char* backward_method;
  };
  std::vector<Candidate> candidates;
  const std::size_t R = profile.num_layers();
  const std::vector<int> forward_sizes = allowed_sizes(profile, LayerPass::forward, gpus, minibatch, mode);
  for (const int u_backward : allowed_sizes(profile, LayerPass::backward, gpus, minibatch, mode)) {
    const LayerCosts backward_costs = layer_costs(profile, LayerPass::backward, u_backward, R);
    for (const PackingMethod backward_method : settings.methods.backward) {
      if (backward_method == PackingMethod::reuse)
        throw InputError("packing_bwd", "reuse packs the forward only");
      const auto packs_backward = pack_layers(backward_method, backward_costs, settings.memory_cap);
      if (!packs_backward)
        continue;
      if (packs_backward->size() == 1) {
        candidates.push_back({{u_backward, u_backward, {}, *packs_backward}, "", packing_method_name(backward_method)});
        continue;
      }
      const std::size_t forward_layers = packs_backward->back().first;
      const std::vector<LayerPack> reused(packs_backward->begin(), packs_backward->end() - 1);
      for (const int u_forward : forward_sizes) {
        if (u_forward < u_backward)
          continue;
        const LayerCosts forward_costs = layer_costs(profile, LayerPass::forward, u_forward, forward_layers);
        for (const PackingMethod forward_method : settings.methods.forward) {
          const std::optional<std::vector<LayerPack>> packs_forward =
              forward_method == PackingMethod::reuse ? reusable_packs(reused, forward_costs, settings.memory_cap)
                                                     : pack_layers(forward_method, forward_costs, settings.memory_cap);
          if (packs_forward)
            candidates.push_back({{u_forward, u_backward, *packs_forward, *packs_backward},
                                  packing_method_name(forward_method),
                                  packing_method_name(backward_method)});
        }
      }
    }
  }
  std::optional<SearchResult> best;
  double best_rank = 0;
  for (const Candidate& candidate : candidates) {
    Estimate estimated = estimate(profile, gpus, minibatch, mode, candidate.config, settings.estimator);
    double rank = estimated.iteration_s;
    if (candidate.config.packs_backward.size() == 1 && !settings.rank_fit_normally)
      rank /= 1000.0;
    if (!best || rank < best_rank) {
      best =
          SearchResult{candidate.config, std::move(estimated), candidate.forward_method, candidate.backward_method, 0};
      best_rank = rank;
    }
  }
  if (best)
    best->candidates = candidates.size();
  return best;
}

} // namespace memsim::harmony
