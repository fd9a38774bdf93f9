// harmony-pp and harmony-dp (Li et al., PVLDB 2022): Harmony's configuration <U_F, P_F, U_B, P_B> (given, or found by
// its search) bound to GPUs by its task graph and emitted as a multi-GPU plan over a layer-chain trace
// (`memsim gen layer-chain`). The layer profile the estimator and the search need is read back from the trace
// (layer_profile_from_traces), so the plan and its `estimate` describe the same workload. With `profile` (the file the
// trace was generated from, checked against it) U_F and U_B may be any sizes the profile covers: the search runs
// over them and the chains at sizes other than the trace's come from the profile (microbatch_chain.hpp).
// `estimator` picks the bandwidths of the plan's `estimate` (and of the search): Harmony's defaults or the machine's.
#include "microbatch_chain.hpp"
#include "plan_emission.hpp"
#include "task_graph.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/estimator.hpp"
#include "memsim/planners/harmony/layer_packing.hpp"
#include "memsim/planners/harmony/profile_from_traces.hpp"
#include "memsim/planners/harmony/search.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/traces/layer_chain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace memsim::harmony {
namespace {

// packing_fwd / packing_bwd: the search's packing methods (layer_packing.hpp).
struct HarmonyOptions : PackingLists {
  int gpus = 0;        // 0: the machine's GPU count
  int minibatch = 0;   // samples per iteration (D)
  int u_fwd = 0;       // 0: the trace's microbatch
  int u_bwd = 0;       // 0: the trace's microbatch
  std::string profile; // the layer profile the trace was generated from ("": the trace's own size only)
  std::string pack_fwd;
  std::string pack_bwd;
  bool search = false;
  double memory_cap = 0; // search: bytes per pack; 0: the budget
  bool group = true;
  bool jit_update = true;
  bool p2p = true;
  bool prefetch = true;
  bool optimizer_offload = true;
  std::string gradient_out = "updater";
  std::string estimator = "harmony";
};

// Harmony's estimator with the machine's bandwidths: bw_swap the slowest host route of the N GPUs (the estimator
// still shares it statically, bw_swap / N), bw_p2p the slowest route of the ring rank r -> r + 1 mod N (pp's
// wrap-around sends and dp's all-reduce go around it). bw_msg and time_del stay Harmony's: the machine has no
// figure for a process's host-memory messages or for freeing a task's tensors.
EstimatorSettings estimator_settings(const std::string& estimator, const Machine& machine, int gpus)
{
  EstimatorSettings settings;
  if (estimator == "harmony")
    return settings;
  settings.bw_swap = std::numeric_limits<double>::infinity();
  for (int r = 0; r < gpus; ++r)
    settings.bw_swap = std::min(settings.bw_swap, machine.host_link_bandwidth(static_cast<std::size_t>(r)));
  if (gpus > 1) {
    settings.bw_p2p = std::numeric_limits<double>::infinity();
    for (int r = 0; r < gpus; ++r)
      settings.bw_p2p =
          std::min(settings.bw_p2p,
                   machine.route_bandwidth(machine.gpus.at(static_cast<std::size_t>(r)).name,
                                           machine.gpus.at(static_cast<std::size_t>((r + 1) % gpus)).name));
  }
  return settings;
}

void not_yet(bool supported, const char* what)
{
  if (!supported)
    throw InputError("harmony", fmt::format("{} is not implemented yet", what));
}

int resolved_u(int asked, int trace_u, bool have_profile, const char* option)
{
  const int u = asked == 0 ? trace_u : asked;
  if (u != trace_u && !have_profile)
    throw InputError(option,
                     fmt::format("microbatch {} differs from the trace's ({}): give the layer profile the trace "
                                 "was generated from (profile=FILE), or generate the trace at that size "
                                 "(memsim gen layer-chain --microbatch {})",
                                 u, trace_u, u));
  return u;
}

// The samples of one rank split into microbatches of u must all be u (the emitted chains have one size each).
void check_even_split(int minibatch, int gpus, Mode mode, int u, const char* option)
{
  const int per_rank = mode == Mode::dp ? minibatch / gpus : minibatch;
  if ((mode == Mode::dp && minibatch % gpus != 0) || per_rank % u != 0)
    throw InputError(option, fmt::format("not yet: {} samples do not split evenly into {}microbatches of {}", minibatch,
                                         mode == Mode::dp ? fmt::format("{} GPUs x ", gpus) : "", u));
}

Plan plan_harmony(const Trace& trace, const Machine& machine, const PlanRequest& request, const HarmonyOptions& options,
                  Mode mode)
{
  not_yet(options.optimizer_offload || options.jit_update,
          "optimizer_offload=false with jit_update=false (a GPU update after the whole backward)");
  const LayerChainIds chain = layer_chain_ids(trace, trace.name);
  const int trace_u = static_cast<int>(trace.source.batch);
  const int gpus = options.gpus == 0 ? static_cast<int>(machine.gpus.size()) : options.gpus;
  if (gpus > static_cast<int>(machine.gpus.size()))
    throw InputError("gpus",
                     fmt::format("{} GPUs asked, machine '{}' has {}", gpus, machine.name, machine.gpus.size()));
  if (options.minibatch <= 0)
    throw InputError("minibatch", "the minibatch size D is required");
  const EstimatorSettings estimator = estimator_settings(options.estimator, machine, gpus);
  const PackingMethods packing = parse_packing_methods(options); // checked also when no search uses it
  const bool have_profile = !options.profile.empty();
  const LayerProfile profile =
      have_profile ? load_layer_profile(options.profile) : layer_profile_from_traces({{trace.name, trace}});
  if (have_profile)
    check_trace_of_profile(trace, profile, "profile");
  Configuration config;
  std::string how = "given";
  if (options.search) {
    SearchSettings settings;
    settings.estimator = estimator;
    settings.memory_cap = options.memory_cap > 0 ? options.memory_cap : static_cast<double>(request.budget_bytes);
    settings.methods = packing;
    const std::optional<SearchResult> found = search(profile, gpus, options.minibatch, mode, settings);
    if (!found)
      throw Infeasible(fmt::format("harmony search: no packing of {} layers fits {} bytes per pack at {}",
                                   profile.num_layers(), settings.memory_cap,
                                   have_profile ? "any microbatch size" : fmt::format("u = {}", trace_u)));
    config = found->best;
    how = fmt::format("search ({} fwd, {} bwd)", found->forward_method, found->backward_method);
  } else {
    config.u_forward = resolved_u(options.u_fwd, trace_u, have_profile, "u_fwd");
    config.u_backward = resolved_u(options.u_bwd, trace_u, have_profile, "u_bwd");
    config.packs_backward = parse_packs(options.pack_bwd, "pack_bwd");
    if (!options.pack_fwd.empty())
      config.packs_forward = parse_packs(options.pack_fwd, "pack_fwd");
  }
  check_even_split(options.minibatch, gpus, mode, config.u_forward, "minibatch");
  check_even_split(options.minibatch, gpus, mode, config.u_backward, "minibatch");
  const TaskGraph graph = compose_task_graph(profile.num_layers(), gpus, options.minibatch, mode, config);
  Plan plan;
  const LayerChainIds backward_chain = chain_at_microbatch(trace, chain, profile, config.u_backward, plan);
  const LayerChainIds forward_chain = config.u_forward == config.u_backward
                                          ? backward_chain
                                          : chain_at_microbatch(trace, chain, profile, config.u_forward, plan);
  // Instances count microbatches of one size; the default samples/s (batch x instances) would miss the other size.
  if (config.u_forward != trace_u || config.u_backward != trace_u)
    plan.samples_per_iteration = options.minibatch;
  emit_plan({forward_chain, backward_chain}, graph, mode,
            EmissionSwitches{.p2p = options.p2p,
                             .prefetch = options.prefetch,
                             .jit_update = options.jit_update,
                             .group = options.group,
                             .optimizer_offload = options.optimizer_offload,
                             .every_rank_swaps_gradients = options.gradient_out == "every_rank"},
            plan);
  const Estimate estimated = estimate(profile, gpus, options.minibatch, mode, config, estimator);
  plan.estimate.iteration_time_s = estimated.iteration_s;
  double memory = 0;
  for (double bytes : estimated.rank_memory_bytes)
    memory = std::max(memory, bytes);
  plan.estimate.peak_bytes = static_cast<std::uint64_t>(memory);
  plan.params["configuration"] = {{"gpus", gpus},
                                  {"minibatch", options.minibatch},
                                  {"u_fwd", config.u_forward},
                                  {"u_bwd", config.u_backward},
                                  {"pack_fwd", format_packs(config.packs_forward)},
                                  {"pack_bwd", format_packs(config.packs_backward)},
                                  {"chosen_by", how}};
  // The registry records `estimator` itself; these are the values it stood for.
  plan.params["estimator_settings"] = {{"bw_swap", estimator.bw_swap},
                                       {"bw_p2p", estimator.bw_p2p},
                                       {"bw_msg", estimator.bw_msg},
                                       {"time_del", estimator.time_del}};
  return plan;
}

Plan plan_harmony_pp(const Trace& trace, const Machine& machine, const PlanRequest& request,
                     const HarmonyOptions& options)
{
  return plan_harmony(trace, machine, request, options, Mode::pp);
}

Plan plan_harmony_dp(const Trace& trace, const Machine& machine, const PlanRequest& request,
                     const HarmonyOptions& options)
{
  return plan_harmony(trace, machine, request, options, Mode::dp);
}

ParamList<HarmonyOptions> harmony_params()
{
  using O = HarmonyOptions;
  std::vector<BoundParam<O>> params{
      param("gpus", &O::gpus, "GPUs N (0: the machine's)", {.min = 0}),
      param("minibatch", &O::minibatch, "samples per iteration D", {.min = 0}),
      param("u_fwd", &O::u_fwd, "forward microbatch U_F (0: the trace's; another size needs `profile`)", {.min = 0}),
      param("u_bwd", &O::u_bwd, "backward microbatch U_B (0: the trace's; another size needs `profile`)", {.min = 0}),
      param("profile", &O::profile,
            "the layer profile the trace was generated from (memsim-layer-profile JSON): U_F, U_B and the search "
            "over any size it covers (empty: the trace's size only)"),
      param("pack_fwd", &O::pack_fwd, "forward packs P_F, e.g. 0-3,4-7 (layers before the last backward pack)"),
      param("pack_bwd", &O::pack_bwd, "backward packs P_B covering every layer, e.g. 0-3,4-7,8-11"),
      param("search", &O::search,
            "find <U_F, P_F, U_B, P_B> with Harmony's search (packing methods: packing_fwd, packing_bwd): over the "
            "sizes of `profile`, else at the trace's u"),
      param("memory_cap", &O::memory_cap, "search: bytes per pack (0: the budget)", {.min = 0}),
      param("group", &O::group, "input-batch grouping: W loaded once per task (false: once per microbatch)"),
      param("jit_update", &O::jit_update, "CPU update right after each backward task (false: after the backward)"),
      param("p2p", &O::p2p, "boundary tensors GPU to GPU (false: through host memory)"),
      param("prefetch", &O::prefetch, "load a task's W during the previous task, double-buffer inputs"),
      param("optimizer_offload", &O::optimizer_offload,
            "optimizer step on the host CPU (false: on the GPU after each backward task, at the profiled CPU time)"),
      param("gradient_out", &O::gradient_out,
            "dp with the CPU update: who swaps the all-reduced dW out: updater (rank 0, the authors' code: (2N+1)|W| "
            "of weight traffic) or every_rank (the paper's 3N|W|)",
            {.choices = {"updater", "every_rank"}}),
      param("estimator", &O::estimator,
            "the plan's `estimate` and the search: Harmony's estimator (static swap share bw_swap/N, uncontended p2p, "
            "time_del per task, prefetch off) with the authors' bandwidths (harmony: 11.5 GiB/s swap, 8.2 GiB/s "
            "p2p) or the machine's (machine: bw_swap the slowest GPU-host route, bw_p2p the slowest route of the "
            "GPU ring)",
            {.choices = {"harmony", "machine"}})};
  for (BoundParam<O>& packing : packing_params<O>())
    params.push_back(std::move(packing));
  return ParamList<O>(std::move(params));
}

} // namespace
} // namespace memsim::harmony

namespace memsim {

MEMSIM_REGISTER_PLANNER(harmony_pp, "harmony-pp",
                        "Harmony PP (PVLDB'22): layer packs bound round-robin to the GPUs (wrap-around pipeline), "
                        "grouped microbatches, p2p boundaries, CPU update; workload: memsim gen layer-chain",
                        harmony::harmony_params(), harmony::plan_harmony_pp);
MEMSIM_REGISTER_PLANNER(harmony_dp, "harmony-dp",
                        "Harmony DP (PVLDB'22): every GPU runs all packs on its share of the minibatch, dW "
                        "all-reduced, rank 0 updates on the CPU; workload: memsim gen layer-chain",
                        harmony::harmony_params(), harmony::plan_harmony_dp);

} // namespace memsim
