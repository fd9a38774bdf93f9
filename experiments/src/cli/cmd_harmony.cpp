// memsim harmony estimate: Harmony's own runtime estimate of one configuration on a layer profile.
#include "commands.hpp"
#include "param_options.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/estimator.hpp"
#include "memsim/planners/harmony/layer_packing.hpp"
#include "memsim/planners/harmony/search.hpp"
#include "memsim/traces/layer_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

namespace memsim::cli {
namespace {

struct Options {
  std::string profile;
  int gpus = 1;
  int minibatch = 1;
  std::string mode = "pp";
  int u_forward = 1;
  int u_backward = 1;
  std::string packs_forward;
  std::string packs_backward;
  harmony::EstimatorSettings settings;
  std::string events; // CSV of the event timeline ("" = none)
};

// Harmony's memory estimate as it prints it: the largest rank, then each rank, in MiB.
void print_memory(const harmony::Estimate& estimate)
{
  std::string memory;
  double largest = 0;
  for (const double bytes : estimate.rank_memory_bytes) {
    memory += fmt::format("{}{:.0f}", memory.empty() ? "" : ", ", bytes / 1024 / 1024);
    largest = std::max(largest, bytes);
  }
  fmt::print("memory_mib {:.0f} ({})\n", largest / 1024 / 1024, memory);
}

void run_estimate(const Options& options)
{
  const LayerProfile profile = load_layer_profile(options.profile);
  if (options.mode != "pp" && options.mode != "dp")
    throw InputError("--mode", fmt::format("expected pp or dp, found '{}'", options.mode));
  const harmony::Mode mode = options.mode == "pp" ? harmony::Mode::pp : harmony::Mode::dp;
  harmony::Configuration config;
  config.u_forward = options.u_forward;
  config.u_backward = options.u_backward;
  config.packs_forward = harmony::parse_packs(options.packs_forward, "--packs-fwd");
  config.packs_backward = harmony::parse_packs(options.packs_backward, "--packs-bwd");
  const harmony::Estimate estimate =
      harmony::estimate(profile, options.gpus, options.minibatch, mode, config, options.settings);
  std::string ranks;
  for (const double end : estimate.rank_end_s)
    ranks += fmt::format("{}{:.3f}", ranks.empty() ? "" : ", ", end);
  fmt::print("{} {} N={} D={} u_fwd={} |P_F|={} u_bwd={} |P_B|={}: {:.3f} s ({}) {} events\n", profile.model,
             options.mode, options.gpus, options.minibatch, config.u_forward, config.packs_forward.size(),
             config.u_backward, config.packs_backward.size(), estimate.iteration_s, ranks, estimate.events.size());
  fmt::print("iteration_s {:.17g}\n", estimate.iteration_s);
  print_memory(estimate);
  if (!options.events.empty()) {
    std::string text = "task,microbatch,subpack,rank,stream,kind,begin_s,end_s\n";
    for (const harmony::EstimatedEvent& event : estimate.events)
      text += fmt::format("{},{},{},{},{},{},{:.9f},{:.9f}\n", event.task, event.microbatch, event.subpack, event.rank,
                          event.stream, event.kind, event.begin_s, event.end_s);
    std::FILE* file = std::fopen(options.events.c_str(), "w");
    if (file == nullptr)
      throw InputError("--events", fmt::format("cannot write '{}'", options.events));
    std::fputs(text.c_str(), file);
    std::fclose(file);
  }
}

// packing_fwd / packing_bwd: declared with harmony-pp's and harmony-dp's (layer_packing.hpp).
struct SearchOptions : harmony::PackingLists {
  std::string profile;
  int gpus = 1;
  int minibatch = 1;
  std::string mode = "pp";
  bool rank_fit_first = false;
  harmony::SearchSettings settings;
};

const ParamList<SearchOptions>& packing_param_list()
{
  static const ParamList<SearchOptions> list(harmony::packing_params<SearchOptions>());
  return list;
}

void run_search(SearchOptions options, const ParamOptions& packing)
{
  const harmony::PackingLists lists = packing_param_list().bind(
      complete_params("command", "harmony search", packing_param_list().specs(), packing.given()));
  options.packing_fwd = lists.packing_fwd;
  options.packing_bwd = lists.packing_bwd;
  const LayerProfile profile = load_layer_profile(options.profile);
  if (options.mode != "pp" && options.mode != "dp")
    throw InputError("--mode", fmt::format("expected pp or dp, found '{}'", options.mode));
  harmony::SearchSettings settings = options.settings;
  settings.methods = harmony::parse_packing_methods(options, "--packing-fwd", "--packing-bwd");
  settings.rank_fit_normally = !options.rank_fit_first;
  const auto start = std::chrono::steady_clock::now();
  const auto result = harmony::search(profile, options.gpus, options.minibatch,
                                      options.mode == "pp" ? harmony::Mode::pp : harmony::Mode::dp, settings);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!result) {
    fmt::print("{} {} N={} D={}: no configuration fits memory_cap {:.0f} B\n", profile.model, options.mode,
               options.gpus, options.minibatch, settings.memory_cap);
    return;
  }
  const harmony::Configuration& best = result->best;
  fmt::print("{} {} N={} D={}: best of {} configurations {:.3f} s: u_fwd={} |P_F|={} ({}) u_bwd={} |P_B|={} ({})\n",
             profile.model, options.mode, options.gpus, options.minibatch, result->candidates,
             result->estimate.iteration_s, best.u_forward, best.packs_forward.size(), result->forward_method,
             best.u_backward, best.packs_backward.size(), result->backward_method);
  fmt::print("iteration_s {:.17g}\npacks_fwd {}\npacks_bwd {}\n", result->estimate.iteration_s,
             harmony::format_packs(best.packs_forward), harmony::format_packs(best.packs_backward));
  print_memory(result->estimate);
  std::fprintf(stderr, "search time %.3f s\n", seconds);
}

// The estimator's machine parameters, shared by `estimate` and `search`.
void add_estimator_options(CLI::App* command, harmony::EstimatorSettings& settings)
{
  command->add_option("--bw-swap", settings.bw_swap, "host<->GPU bytes/s shared by the N GPUs")->capture_default_str();
  command->add_option("--bw-p2p", settings.bw_p2p, "GPU<->GPU bytes/s")->capture_default_str();
  command->add_option("--bw-msg", settings.bw_msg, "host-memory copy bytes/s between rank processes")
      ->capture_default_str();
  command->add_option("--time-del", settings.time_del, "seconds per FWD/BWD task to free its tensors")
      ->capture_default_str();
}

} // namespace

void add_harmony_command(CLI::App& app, Context&)
{
  CLI::App* harmony = app.add_subcommand("harmony", "Harmony (Li et al., PVLDB 2022) tools on layer profiles");
  harmony->require_subcommand(1);
  auto options = std::make_shared<Options>();
  CLI::App* estimate = harmony->add_subcommand(
      "estimate", "Harmony's own runtime estimate (its simulator.py rules: bw_swap/N per GPU, uncontended p2p, "
                  "time_del per task, prefetch off) of one configuration <U_F, P_F, U_B, P_B>");
  estimate->add_option("--profile", options->profile, "layer profile (memsim-layer-profile or harmony-profile JSON)")
      ->required();
  estimate->add_option("--gpus", options->gpus, "N, the GPUs")->required();
  estimate->add_option("--minibatch", options->minibatch, "D, samples per iteration")->required();
  estimate->add_option("--mode", options->mode, "pp (wrap-around pipeline) or dp (data parallel)")->required();
  estimate->add_option("--u-fwd", options->u_forward, "U_F, forward microbatch size")->required();
  estimate->add_option("--u-bwd", options->u_backward, "U_B, backward microbatch size")->required();
  estimate->add_option("--packs-fwd", options->packs_forward,
                       "P_F as inclusive layer ranges, e.g. 0-9,10-19 (covers the layers before P_B's last pack; "
                       "empty when P_B has one pack)");
  estimate->add_option("--packs-bwd", options->packs_backward, "P_B as inclusive layer ranges, covering every layer")
      ->required();
  add_estimator_options(estimate, options->settings);
  estimate->add_option("--events", options->events, "write the event timeline as CSV");
  estimate->callback([options] { run_estimate(*options); });

  auto search_options = std::make_shared<SearchOptions>();
  CLI::App* search = harmony->add_subcommand(
      "search", "Harmony's configuration search (Alg. 1) with its estimator; prints the Top-1 <U_F, P_F, U_B, P_B> "
                "(search time on stderr)");
  search->add_option("--profile", search_options->profile, "layer profile (memsim-layer-profile or harmony-profile)")
      ->required();
  search->add_option("--gpus", search_options->gpus, "N, the GPUs")->required();
  search->add_option("--minibatch", search_options->minibatch, "D, samples per iteration")->required();
  search->add_option("--mode", search_options->mode, "pp (wrap-around pipeline) or dp (data parallel)")->required();
  search->add_option("--memory-cap", search_options->settings.memory_cap, "bytes a pack may use")
      ->capture_default_str();
  auto packing = std::make_shared<ParamOptions>(search, packing_param_list().specs());
  search->add_flag("--rank-fit-first", search_options->rank_fit_first,
                   "rank a model that fits one pack first (Harmony's default; its paper scripts pass "
                   "--rank_fit_normally)");
  add_estimator_options(search, search_options->settings.estimator);
  search->callback([search_options, packing] { run_search(*search_options, *packing); });
  add_harmony_profile_command(harmony);
}

} // namespace memsim::cli
