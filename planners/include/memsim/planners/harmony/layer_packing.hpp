#pragma once
// Harmony's layer-packing methods (§4.3.1, Alg. 2; msr-fiddle/harmony 3_scheduler/layer_packing.py): ways to cut a
// chain of layers into packs whose memory fits the cap α. A pack [a..b] costs Σ m_l + x_a (m_l: the layer's profiled
// peak minus its input x_l), except in the methods without `_addx`, which compare Σ m_l alone.
//   balanced_time        fewest packs (from ⌈Σm/α⌉ up) of about equal time; Σm + x_a <= α
//   balanced, _addx      the same cut search balancing Σm instead of time; Σm < α, or Σm + x_a <= α with _addx
//   greedy, _addx        front to back, each pack as long as it stays < α (x_a counted with _addx)
//   greedy_reverse[_addx] the same back to front (the first pack holds the remainder)
//   reuse                forward only: the backward packs before the loss pack, if each is < α at U_F
#include "memsim/common/params.hpp"
#include "memsim/planners/harmony/estimator.hpp"

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memsim::harmony {

enum class PackingMethod {
  balanced_time,
  reuse,
  greedy,
  greedy_addx,
  greedy_reverse,
  greedy_reverse_addx,
  balanced,
  balanced_addx
};

// The per-layer values a packing reads, at one pass and microbatch size.
struct LayerCosts {
  std::vector<std::int64_t> memory; // m_l: profiled peak minus the layer's input x_l
  std::vector<std::int64_t> input;  // x_l
  std::vector<double> time;         // t_l
};

LayerCosts layer_costs(const LayerProfile& profile, LayerPass pass, int u, std::size_t count);

// Σ m_l over the pack plus x of its first layer.
std::int64_t pack_memory(const LayerCosts& costs, const LayerPack& pack);

// Packs of every layer of `costs` by `method`, or nothing when the method finds none under the cap. `reuse` is not a
// packing of its own: see reusable_packs.
std::optional<std::vector<LayerPack>> pack_layers(PackingMethod method, const LayerCosts& costs, double memory_cap);

// `packs` (the backward packs before the loss pack) when each costs < the cap under the forward `costs`.
std::optional<std::vector<LayerPack>> reusable_packs(const std::vector<LayerPack>& packs, const LayerCosts& costs,
                                                     double memory_cap);

const char* packing_method_name(PackingMethod method);

// The methods the search tries for each pass.
struct PackingMethods {
  std::vector<PackingMethod> forward{PackingMethod::balanced_time, PackingMethod::reuse};
  std::vector<PackingMethod> backward{PackingMethod::balanced_time};
};

// The parameters `packing_fwd` and `packing_bwd` as declared (harmony-pp, harmony-dp, `memsim harmony search`): a
// comma-separated list of method names, or a named set: `paper` (the paper's scripts, the default) or `authors`
// (the default of the authors' searcher.py).
struct PackingLists {
  std::string packing_fwd = "balanced_time,reuse";
  std::string packing_bwd = "balanced_time";
};

std::vector<ParamSpec> packing_param_specs();

template <class Options>
requires std::derived_from<Options, PackingLists> std::vector<BoundParam<Options>> packing_params()
{
  const std::vector<ParamSpec> specs = packing_param_specs();
  return {param<Options, std::string>(specs[0].name, &Options::packing_fwd, specs[0].description),
          param<Options, std::string>(specs[1].name, &Options::packing_bwd, specs[1].description)};
}

// Throws InputError at `forward_where` / `backward_where` for an unknown name, an empty list or reuse in the
// backward.
PackingMethods parse_packing_methods(const PackingLists& lists, const std::string& forward_where = "packing_fwd",
                                     const std::string& backward_where = "packing_bwd");

} // namespace memsim::harmony
