// Harmony's layer-packing methods: balanced cut search (by time or by memory), greedy fills, reuse.
#include "memsim/planners/harmony/layer_packing.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

namespace memsim::harmony {
namespace {

struct NamedMethod {
  PackingMethod method;
  const char* name;
};

constexpr NamedMethod kMethods[] = {
    {PackingMethod::balanced_time, "balanced_time"},
    {PackingMethod::reuse, "reuse"},
    {PackingMethod::greedy, "greedy"},
    {PackingMethod::greedy_addx, "greedy_addx"},
    {PackingMethod::greedy_reverse, "greedy_reverse"},
    {PackingMethod::greedy_reverse_addx, "greedy_reverse_addx"},
    {PackingMethod::balanced, "balanced"},
    {PackingMethod::balanced_addx, "balanced_addx"},
};

// The default of the authors' searcher (sched_args.py); their paper scripts pass the `paper` set instead.
const PackingMethods kAuthorsMethods{{PackingMethod::greedy_reverse_addx, PackingMethod::balanced_addx,
                                      PackingMethod::reuse, PackingMethod::balanced_time},
                                     {PackingMethod::greedy_reverse_addx, PackingMethod::balanced_addx,
                                      PackingMethod::balanced_time}};

std::string method_names()
{
  std::string names;
  for (const NamedMethod& named : kMethods)
    names += fmt::format("{}{}", names.empty() ? "" : ", ", named.name);
  return names;
}

// numpy.searchsorted(prefix, target, side='left') on a non-decreasing prefix: the first index reaching the target.
// A binary search of its own so that a prefix that dips (a layer with m_l < 0) still has one defined answer.
template <class T>
std::size_t first_reaching(const std::vector<T>& prefix, T target)
{
  std::size_t low = 0;
  std::size_t high = prefix.size();
  while (low < high) {
    const std::size_t mid = low + (high - low) / 2;
    if (prefix[mid] < target)
      low = mid + 1;
    else
      high = mid;
  }
  return low;
}

// `values` split into `packs` packs cut where the running sum first reaches k * total / packs (k = 1 .. packs - 1),
// or nothing when a pack comes out empty. T = double divides exactly; T = std::int64_t floors the share first, as
// the authors' integer `//` does for memory.
template <class T>
std::optional<std::vector<LayerPack>> balanced_split(const std::vector<T>& values, std::size_t packs)
{
  std::vector<T> prefix;
  T running{};
  for (const T value : values)
    prefix.push_back(running += value);
  const T share = prefix.back() / static_cast<T>(packs);
  std::vector<LayerPack> result;
  std::size_t first = 0;
  for (std::size_t k = 1; k <= packs; ++k) {
    const std::size_t end = k == packs ? values.size() : first_reaching(prefix, static_cast<T>(k) * share);
    if (end <= first)
      return std::nullopt;
    result.push_back({first, end - 1});
    first = end;
  }
  return result;
}

// The fewest balanced packs, trying ⌈Σm / cap⌉ packs first, whose every pack `fits`.
template <class T, class Fits>
std::optional<std::vector<LayerPack>> fewest_balanced_packs(const std::vector<T>& values, const LayerCosts& costs,
                                                            double memory_cap, Fits fits)
{
  std::int64_t total_memory = 0;
  for (const std::int64_t m : costs.memory)
    total_memory += m;
  const auto first_guess =
      static_cast<std::size_t>(std::max(1.0, std::ceil(static_cast<double>(total_memory) / memory_cap)));
  for (std::size_t packs = first_guess; packs <= values.size(); ++packs) {
    const std::optional<std::vector<LayerPack>> split = balanced_split(values, packs);
    if (split && std::all_of(split->begin(), split->end(), fits))
      return split;
  }
  return std::nullopt;
}

std::int64_t memory_without_input(const LayerCosts& costs, const LayerPack& pack)
{
  std::int64_t total = 0;
  for (std::size_t l = pack.first; l <= pack.last; ++l)
    total += costs.memory[l];
  return total;
}

// Each pack as long as its Σm (+ x of its first layer with `add_x`) stays < cap, front to back or back to front;
// nothing when one layer alone does not fit.
std::optional<std::vector<LayerPack>> greedy_packs(const LayerCosts& costs, double memory_cap, bool reverse, bool add_x)
{
  const auto x = [&](std::size_t l) { return add_x ? costs.input[l] : std::int64_t{0}; };
  const auto fits = [&](std::int64_t bytes) { return static_cast<double>(bytes) < memory_cap; };
  const std::size_t count = costs.memory.size();
  std::vector<LayerPack> packs;
  if (!reverse) {
    std::size_t first = 0;
    std::int64_t sum = costs.memory[0];
    if (!fits(sum + x(0)))
      return std::nullopt;
    for (std::size_t l = 1; l < count; ++l) {
      if (fits(sum + costs.memory[l] + x(first))) {
        sum += costs.memory[l];
        continue;
      }
      packs.push_back({first, l - 1});
      first = l;
      sum = costs.memory[l];
      if (!fits(sum + x(l)))
        return std::nullopt;
    }
    packs.push_back({first, count - 1});
    return packs;
  }
  std::size_t last = count - 1;
  std::int64_t sum = costs.memory[last];
  if (!fits(sum + x(last)))
    return std::nullopt;
  for (std::size_t l = count - 1; l-- > 0;) {
    if (fits(sum + costs.memory[l] + x(l))) {
      sum += costs.memory[l];
      continue;
    }
    packs.push_back({l + 1, last});
    last = l;
    sum = costs.memory[l];
    if (!fits(sum + x(l)))
      return std::nullopt;
  }
  packs.push_back({0, last});
  std::reverse(packs.begin(), packs.end());
  return packs;
}

std::vector<PackingMethod> parse_list(const std::string& text, const std::string& where)
{
  std::vector<PackingMethod> methods;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    const auto* named = std::find_if(std::begin(kMethods), std::end(kMethods),
                                     [&](const NamedMethod& candidate) { return name == candidate.name; });
    if (named == std::end(kMethods))
      throw InputError(where, fmt::format("unknown packing method '{}' (methods: {}; sets: paper, authors)", name,
                                          method_names()));
    methods.push_back(named->method);
    start = comma + 1;
  }
  return methods;
}

} // namespace

LayerCosts layer_costs(const LayerProfile& profile, LayerPass pass, int u, std::size_t count)
{
  LayerCosts costs;
  for (std::size_t l = 0; l < count; ++l) {
    const auto x = static_cast<std::int64_t>(profile.input_bytes(u, l));
    costs.memory.push_back(profile.peak_bytes(pass, u, l) - x);
    costs.input.push_back(x);
    costs.time.push_back(profile.time_s(pass, u, l));
  }
  return costs;
}

std::int64_t pack_memory(const LayerCosts& costs, const LayerPack& pack)
{
  return memory_without_input(costs, pack) + costs.input[pack.first];
}

std::optional<std::vector<LayerPack>> pack_layers(PackingMethod method, const LayerCosts& costs, double memory_cap)
{
  if (costs.memory.empty())
    return std::nullopt;
  const auto at_most_cap = [&](const LayerPack& pack) {
    return static_cast<double>(pack_memory(costs, pack)) <= memory_cap;
  };
  switch (method) {
  case PackingMethod::balanced_time: return fewest_balanced_packs(costs.time, costs, memory_cap, at_most_cap);
  case PackingMethod::balanced:
    return fewest_balanced_packs(costs.memory, costs, memory_cap, [&](const LayerPack& pack) {
      return static_cast<double>(memory_without_input(costs, pack)) < memory_cap;
    });
  case PackingMethod::balanced_addx: return fewest_balanced_packs(costs.memory, costs, memory_cap, at_most_cap);
  case PackingMethod::greedy: return greedy_packs(costs, memory_cap, false, false);
  case PackingMethod::greedy_addx: return greedy_packs(costs, memory_cap, false, true);
  case PackingMethod::greedy_reverse: return greedy_packs(costs, memory_cap, true, false);
  case PackingMethod::greedy_reverse_addx: return greedy_packs(costs, memory_cap, true, true);
  case PackingMethod::reuse: break;
  }
  throw InputError("packing", "reuse takes the backward packs: it packs nothing of its own");
}

std::optional<std::vector<LayerPack>> reusable_packs(const std::vector<LayerPack>& packs, const LayerCosts& costs,
                                                     double memory_cap)
{
  if (std::all_of(packs.begin(), packs.end(),
                  [&](const LayerPack& pack) { return static_cast<double>(pack_memory(costs, pack)) < memory_cap; }))
    return packs;
  return std::nullopt;
}

const char* packing_method_name(PackingMethod method)
{
  for (const NamedMethod& named : kMethods)
    if (named.method == method)
      return named.name;
  return "?";
}

std::vector<ParamSpec> packing_param_specs()
{
  const PackingLists defaults;
  const auto spec = [](const char* name, std::string description, const std::string& default_value) {
    ParamSpec declared;
    declared.name = name;
    declared.type = ParamType::string;
    declared.description = std::move(description);
    declared.default_value = default_value;
    return declared;
  };
  return {spec("packing_fwd",
               fmt::format("search: forward packing methods tried, comma-separated ({}), or a set: paper ({}, the "
                           "paper's scripts) or authors (greedy_reverse_addx,balanced_addx,reuse,balanced_time, the "
                           "authors' code)",
                           method_names(), defaults.packing_fwd),
               defaults.packing_fwd),
          spec("packing_bwd",
               fmt::format("search: backward packing methods tried, as packing_fwd but without reuse; sets: paper "
                           "({}) or authors (greedy_reverse_addx,balanced_addx,balanced_time)",
                           defaults.packing_bwd),
               defaults.packing_bwd)};
}

PackingMethods parse_packing_methods(const PackingLists& lists, const std::string& forward_where,
                                     const std::string& backward_where)
{
  const auto methods = [](const std::string& text, const std::string& where, bool forward) {
    if (text == "paper")
      return forward ? PackingMethods{}.forward : PackingMethods{}.backward;
    if (text == "authors")
      return forward ? kAuthorsMethods.forward : kAuthorsMethods.backward;
    return parse_list(text, where);
  };
  PackingMethods parsed{methods(lists.packing_fwd, forward_where, true),
                        methods(lists.packing_bwd, backward_where, false)};
  if (std::find(parsed.backward.begin(), parsed.backward.end(), PackingMethod::reuse) != parsed.backward.end())
    throw InputError(backward_where, "reuse packs the forward only (it reuses the backward packs)");
  return parsed;
}

} // namespace memsim::harmony
