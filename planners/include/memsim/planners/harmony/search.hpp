#pragma once
// Harmony's configuration search (Alg. 1; msr-fiddle/harmony 3_scheduler/searcher.py, layer_packing.py): for every
// backward microbatch size, pack the layers, then for every forward size >= it pack the layers before the loss pack,
// estimate each candidate with Harmony's estimator and keep the fastest. Packing methods: layer_packing.hpp; by
// default those of the paper's scripts, balanced_time (Alg. 2) and reuse (P_F = P_B minus its last pack).
#include "memsim/planners/harmony/estimator.hpp"
#include "memsim/planners/harmony/layer_packing.hpp"

#include <optional>
#include <string>
#include <vector>

namespace memsim::harmony {

struct SearchSettings {
  double memory_cap = 10.0 * 1024 * 1024 * 1024; // bytes per pack (Harmony's --memory_cap)
  PackingMethods methods;
  bool rank_fit_normally = true; // false: a one-pack model is ranked first (its time divided by 1000), as by default
  EstimatorSettings estimator;
};

struct SearchResult {
  Configuration best;
  Estimate estimate; // of the best
  std::string forward_method;
  std::string backward_method;
  std::size_t candidates = 0;
};

// Packs of layers [0, count) at microbatch size u, or nothing when no pack count fits the cap.
std::optional<std::vector<LayerPack>> balanced_time_packs(const LayerProfile& profile, LayerPass pass, int u,
                                                          std::size_t count, double memory_cap);

// Nothing when no candidate exists (every packing fails the cap).
std::optional<SearchResult> search(const LayerProfile& profile, int gpus, int minibatch, Mode mode,
                                   const SearchSettings& settings = {});

} // namespace memsim::harmony
