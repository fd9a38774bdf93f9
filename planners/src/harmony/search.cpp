// Harmony's configuration search with the balanced_time and reuse packing methods.
#include "memsim/planners/harmony/search.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace memsim::harmony {
namespace {

struct PerLayer {
  std::vector<std::int64_t> memory; // profiled peak minus the layer's input X
  std::vector<std::int64_t> input;  // X
  std::vector<double> time;
};

PerLayer per_layer(const LayerProfile& profile, LayerPass pass, int u, std::size_t count)
{
  PerLayer values;
  for (std::size_t l = 0; l < count; ++l) {
    const auto x = static_cast<std::int64_t>(profile.input_bytes(u, l));
    values.memory.push_back(profile.peak_bytes(pass, u, l) - x);
    values.input.push_back(x);
    values.time.push_back(profile.time_s(pass, u, l));
  }
  return values;
}

// A pack costs its layers' memory plus the input of its first layer.
std::int64_t pack_cost(const PerLayer& values, const LayerPack& pack)
{
  std::int64_t total = 0;
  for (std::size_t l = pack.first; l <= pack.last; ++l)
    total += values.memory[l];
  return total + values.input[pack.first];
}

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

const char* method_name(PackingMethod method) { return method == PackingMethod::reuse ? "reuse" : "balanced_time"; }

} // namespace

std::optional<std::vector<LayerPack>> balanced_time_packs(const LayerProfile& profile, LayerPass pass, int u,
                                                          std::size_t count, double memory_cap)
{
  const PerLayer values = per_layer(profile, pass, u, count);
  std::int64_t total_memory = 0;
  for (const std::int64_t m : values.memory)
    total_memory += m;
  std::vector<double> prefix(count);
  double running = 0;
  for (std::size_t l = 0; l < count; ++l)
    prefix[l] = running += values.time[l];
  const auto first_guess =
      static_cast<std::size_t>(std::max(1.0, std::ceil(static_cast<double>(total_memory) / memory_cap)));
  for (std::size_t packs = first_guess; packs <= count; ++packs) {
    // Cut where the running time first reaches k * total / S (numpy.searchsorted, side left).
    const double share = prefix.back() / static_cast<double>(packs);
    std::vector<std::size_t> cuts{0};
    for (std::size_t k = 1; k < packs; ++k) {
      const double target = static_cast<double>(k) * share;
      cuts.push_back(static_cast<std::size_t>(std::lower_bound(prefix.begin(), prefix.end(), target) - prefix.begin()));
    }
    cuts.push_back(count);
    std::vector<LayerPack> result;
    bool empty = false;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      if (cuts[i + 1] <= cuts[i])
        empty = true;
      else
        result.push_back({cuts[i], cuts[i + 1] - 1});
    }
    if (empty)
      continue;
    const bool fits = std::all_of(result.begin(), result.end(), [&](const LayerPack& pack) {
      return static_cast<double>(pack_cost(values, pack)) <= memory_cap;
    });
    if (fits)
      return result;
  }
  return std::nullopt;
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
    for (const PackingMethod backward_method : settings.backward_methods) {
      if (backward_method != PackingMethod::balanced_time)
        throw InputError("--packing-bwd", "reuse packs the forward only");
      const auto packs_backward = balanced_time_packs(profile, LayerPass::backward, u_backward, R, settings.memory_cap);
      if (!packs_backward)
        continue;
      if (packs_backward->size() == 1) {
        candidates.push_back({{u_backward, u_backward, {}, *packs_backward}, "", method_name(backward_method)});
        continue;
      }
      const std::size_t forward_layers = packs_backward->back().first;
      const std::vector<LayerPack> reused(packs_backward->begin(), packs_backward->end() - 1);
      for (const int u_forward : forward_sizes) {
        if (u_forward < u_backward)
          continue;
        for (const PackingMethod forward_method : settings.forward_methods) {
          std::optional<std::vector<LayerPack>> packs_forward;
          if (forward_method == PackingMethod::balanced_time) {
            packs_forward =
                balanced_time_packs(profile, LayerPass::forward, u_forward, forward_layers, settings.memory_cap);
          } else {
            const PerLayer values = per_layer(profile, LayerPass::forward, u_forward, forward_layers);
            if (std::all_of(reused.begin(), reused.end(), [&](const LayerPack& pack) {
                  return static_cast<double>(pack_cost(values, pack)) < settings.memory_cap;
                }))
              packs_forward = reused;
          }
          if (packs_forward)
            candidates.push_back({{u_forward, u_backward, *packs_forward, *packs_backward},
                                  method_name(forward_method),
                                  method_name(backward_method)});
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

PackingMethod parse_packing_method(const std::string& name, const std::string& option)
{
  if (name == "balanced_time")
    return PackingMethod::balanced_time;
  if (name == "reuse")
    return PackingMethod::reuse;
  throw InputError(option, fmt::format("unknown packing method '{}' (this port has balanced_time, reuse)", name));
}

} // namespace memsim::harmony
