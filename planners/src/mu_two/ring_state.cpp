#include "ring_state.hpp"

#include "memsim/common/atomic_file.hpp"
#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"
#include "memsim/common/stable_hash.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <iterator>
#include <map>

namespace memsim::planning::mu_two {
namespace {

using Json = nlohmann::json;

constexpr const char* kFormat = "memsim-mu-two-ring-state";
constexpr int kVersion = 1;

// The indices of the set flags (most flags are clear: a few hundred decisions over 10^5 tensors).
Json set_indices(const std::vector<bool>& flags)
{
  Json indices = Json::array();
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (flags[i])
      indices.push_back(i);
  return indices;
}

Json flag_lists(const std::vector<std::vector<bool>>& flags)
{
  Json lists = Json::array();
  for (const std::vector<bool>& per_sub_array : flags)
    lists.push_back(set_indices(per_sub_array));
  return lists;
}

Json prompt_json(const std::optional<PromptRef>& prompt)
{
  if (!prompt)
    return nullptr;
  return Json::array({prompt->sub_array, prompt->op, prompt->recompute, prompt->copy_delta});
}

std::optional<PromptRef> prompt_from(const Json& json)
{
  if (json.is_null())
    return std::nullopt;
  return PromptRef{json.at(0).get<int>(), json.at(1).get<OpId>(), json.at(2).get<bool>(), json.at(3).get<int>()};
}

// Per sub-array flags from index lists, each index below that sub-array's `size(j)`.
template <class Size>
std::vector<std::vector<bool>> flags_from(const Json& lists, std::size_t sub_arrays, Size size, const char* what)
{
  if (!lists.is_array() || lists.size() != sub_arrays)
    throw std::invalid_argument(fmt::format("'{}' does not have one list per sub-array ({})", what, sub_arrays));
  std::vector<std::vector<bool>> flags;
  for (std::size_t j = 0; j < sub_arrays; ++j) {
    flags.emplace_back(size(j), false);
    for (const Json& index : lists[j]) {
      const auto i = index.get<std::size_t>();
      if (i >= flags.back().size())
        throw std::invalid_argument(fmt::format("'{}' of sub-array {} names {}, past its {}", what, j, i, size(j)));
      flags.back()[i] = true;
    }
  }
  return flags;
}

} // namespace

std::string ring_fingerprint(const std::vector<const Trace*>& graphs, const std::vector<GraphStats>& stats,
                             const HostLink& d2h, const HostLink& h2d, const RingOptions& options)
{
  std::string bytes;
  auto out = std::back_inserter(bytes);
  auto add_double = [&](double value) { fmt::format_to(out, "{:x};", std::bit_cast<std::uint64_t>(value)); };
  fmt::format_to(out, "{};{};{};{};{};{};{};", kVersion, options.planner, options.budget_bytes,
                 static_cast<int>(options.offload_release), static_cast<int>(options.idle_metric), options.cycles,
                 options.multiplex);
  add_double(d2h.bandwidth);
  add_double(d2h.latency_s);
  add_double(h2d.bandwidth);
  add_double(h2d.latency_s);
  std::map<const Trace*, std::size_t> seen; // the sub-arrays of a uniform ring share one graph: hash it once
  for (std::size_t j = 0; j < graphs.size(); ++j) {
    const auto [at, added] = seen.emplace(graphs[j], j);
    fmt::format_to(out, "|graph {}:", at->second);
    if (!added)
      continue;
    for (const Op& op : graphs[j]->ops) {
      fmt::format_to(out, "{},{},{},{},", static_cast<int>(op.phase), fmt::join(op.inputs, " "),
                     fmt::join(op.outputs, " "), op.workspace_bytes);
      add_double(stats[j].op_time[static_cast<std::size_t>(op.id)]);
    }
    for (const Tensor& tensor : graphs[j]->tensors)
      fmt::format_to(out, "{},{};", tensor.bytes, static_cast<int>(tensor.kind));
  }
  return stable_hash(bytes);
}

std::filesystem::path ring_state_file(const std::filesystem::path& folder, const std::string& label,
                                      const std::string& fingerprint)
{
  std::string name = label;
  std::replace(name.begin(), name.end(), ' ', '-');
  return folder / fmt::format("mu-two-{}-{}.json", name, fingerprint);
}

void save_ring_state(const std::filesystem::path& file, const std::string& fingerprint, const RingState& state)
{
  Json swaps = Json::array();
  for (const SwapChoice& swap : state.swaps)
    swaps.push_back(Json::array({swap.sub_array, swap.tensor, prompt_json(swap.prompt)}));
  Json decisions = Json::array();
  for (const RingDecision& decision : state.decisions)
    decisions.push_back(Json::array({decision.sub_array, decision.tensor,
                                     decision.decision == Decision::swap ? "swap" : "recompute", decision.overhead_s,
                                     decision.swap_case, decision.multiplexed}));
  const Json json = {{"format", kFormat},
                     {"version", kVersion},
                     {"fingerprint", fingerprint},
                     {"round", state.round},
                     {"dropped", flag_lists(state.dropped)},
                     {"swapped", flag_lists(state.swapped)},
                     {"rejected", flag_lists(state.rejected)},
                     {"swaps", std::move(swaps)},
                     {"placement", state.placement},
                     {"last_prompt", prompt_json(state.last_prompt)},
                     {"reached_peak", state.reached_peak},
                     {"decisions", std::move(decisions)},
                     {"swapped_bytes", state.swapped_bytes},
                     {"recomputed_bytes", state.recomputed_bytes},
                     {"multiplexed_ops", state.multiplexed_ops}};
  write_text_atomically(file, json.dump() + "\n");
}

std::optional<RingState> load_ring_state(const std::filesystem::path& file, const std::string& fingerprint,
                                         const std::vector<const Trace*>& graphs)
{
  if (!std::filesystem::exists(file))
    return std::nullopt;
  const std::string text = read_text_file(file);
  const std::size_t sub_arrays = graphs.size();
  try {
    const Json json = Json::parse(text);
    if (json.at("format") != kFormat || json.at("version") != kVersion)
      throw std::invalid_argument(fmt::format("not a version {} {} file", kVersion, kFormat));
    if (json.at("fingerprint") != fingerprint)
      throw std::invalid_argument(fmt::format("the state of other inputs (fingerprint {}, these are {})",
                                              json.at("fingerprint").get<std::string>(), fingerprint));
    RingState state;
    state.round = json.at("round").get<std::size_t>();
    auto ops = [&](std::size_t j) { return graphs[j]->ops.size(); };
    auto tensors = [&](std::size_t j) { return graphs[j]->tensors.size(); };
    state.dropped = flags_from(json.at("dropped"), sub_arrays, ops, "dropped");
    state.swapped = flags_from(json.at("swapped"), sub_arrays, tensors, "swapped");
    state.rejected = flags_from(json.at("rejected"), sub_arrays, tensors, "rejected");
    for (const Json& swap : json.at("swaps")) {
      SwapChoice choice{swap.at(0).get<int>(), swap.at(1).get<TensorId>(), prompt_from(swap.at(2))};
      if (choice.sub_array < 0 || static_cast<std::size_t>(choice.sub_array) >= sub_arrays || choice.tensor < 0 ||
          static_cast<std::size_t>(choice.tensor) >= tensors(static_cast<std::size_t>(choice.sub_array)))
        throw std::invalid_argument(fmt::format("a swap of tensor {} of sub-array {}, which does not exist",
                                                choice.tensor, choice.sub_array));
      state.swaps.push_back(choice);
    }
    state.placement = json.at("placement").get<Placement>();
    if (state.placement.size() > sub_arrays)
      throw std::invalid_argument("a placement for more sub-arrays than the ring has");
    state.last_prompt = prompt_from(json.at("last_prompt"));
    state.reached_peak = json.at("reached_peak").get<bool>();
    for (const Json& decision : json.at("decisions")) {
      const std::string kind = decision.at(2).get<std::string>();
      if (kind != "swap" && kind != "recompute")
        throw std::invalid_argument(fmt::format("a decision '{}' (swap or recompute)", kind));
      state.decisions.push_back({decision.at(0).get<int>(), decision.at(1).get<TensorId>(),
                                 kind == "swap" ? Decision::swap : Decision::recompute, decision.at(3).get<double>(),
                                 decision.at(4).get<std::string>(), decision.at(5).get<std::size_t>()});
    }
    state.swapped_bytes = json.at("swapped_bytes").get<std::uint64_t>();
    state.recomputed_bytes = json.at("recomputed_bytes").get<std::uint64_t>();
    state.multiplexed_ops = json.at("multiplexed_ops").get<std::size_t>();
    return state;
  } catch (const std::exception& error) { // nlohmann's parse, type and out-of-range errors, and the checks above
    throw InputError(file.string(), fmt::format("not the saved state of this mu-two ring search ({}); delete it to "
                                                "search afresh",
                                                error.what()));
  }
}

} // namespace memsim::planning::mu_two
