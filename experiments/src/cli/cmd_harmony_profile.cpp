// memsim harmony profile: a layer profile (memsim-layer-profile JSON) from memsim traces of one model at several
// batch sizes, for `memsim harmony estimate|search --profile`.
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/planners/harmony/profile_from_traces.hpp"

#include <fmt/format.h>

#include <memory>
#include <optional>

namespace memsim::cli {
namespace {

struct ProfileOptions {
  std::vector<std::string> traces;
  std::string out;
  std::string machine;
  double host_memory_bandwidth = 0;
  double tolerance = harmony::LayerProfileOptions{}.proportionality_tolerance;
  std::string model;
};

void run_profile(const ProfileOptions& options)
{
  std::vector<harmony::SourcedTrace> traces;
  for (const std::string& path : options.traces)
    traces.push_back({path, load_trace(path)});
  if (options.host_memory_bandwidth < 0)
    throw InputError("--host-memory-bandwidth", "must not be negative");
  if (options.host_memory_bandwidth > 0 && options.machine.empty())
    throw InputError("--host-memory-bandwidth", "needs --machine (it replaces the machine's host bandwidth)");
  harmony::LayerProfileOptions settings;
  settings.proportionality_tolerance = options.tolerance;
  settings.model = options.model;
  std::optional<Machine> machine;
  std::vector<std::unique_ptr<CostModel>> cost; // CostModel keeps pointers to its trace and machine
  if (!options.machine.empty()) {
    machine = load_machine_or_preset(options.machine, default_presets_dir());
    if (options.host_memory_bandwidth > 0)
      machine->host.memory_bandwidth = options.host_memory_bandwidth;
    // Update ops are the same in every trace (checked by the profiler); time them with the first one's tensors.
    cost.push_back(std::make_unique<CostModel>(traces.front().trace, *machine));
    const CostModel* model = cost.front().get();
    settings.host_update_time = [model](const Op& op) { return model->host_op_time(op); };
  }
  const LayerProfile profile = harmony::layer_profile_from_traces(traces, settings);
  save_layer_profile(profile, options.out);
  std::string sizes;
  for (const int u : profile.sampled_forward)
    sizes += fmt::format("{}{}", sizes.empty() ? "" : ",", u);
  fmt::print("{}: {} layers, u = {} -> {}\n", profile.model, profile.num_layers(), sizes, options.out);
}

} // namespace

void add_harmony_profile_command(CLI::App* harmony)
{
  auto options = std::make_shared<ProfileOptions>();
  CLI::App* profile = harmony->add_subcommand(
      "profile", "a layer profile from memsim traces of one model at several batch sizes (each batch a sampled u; "
                 "rules in traces/src/LAYER_PROFILE.md)");
  profile->add_option("--trace", options->traces, "a trace of the model at one batch size (repeat, one per size)")
      ->required()
      ->check(CLI::ExistingFile);
  profile->add_option("-o,--out", options->out, "the memsim-layer-profile JSON to write")->required();
  profile->add_option("--machine", options->machine,
                      "machine preset or YAML: CPU update times from its host roofline (else the update ops' "
                      "cpu_time_s, else their recorded GPU time)");
  profile->add_option("--host-memory-bandwidth", options->host_memory_bandwidth,
                      "bytes/s of host memory for the update roofline, replacing the machine's (needs --machine)");
  profile
      ->add_option("--tolerance", options->tolerance, "relative tolerance of X(u,l) against u x its per-sample bytes")
      ->capture_default_str();
  profile->add_option("--model", options->model, "model name in the profile (default: the traces' name)");
  profile->callback([options] { run_profile(*options); });
}

} // namespace memsim::cli
