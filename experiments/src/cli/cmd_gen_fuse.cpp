// memsim gen fuse: k copies of a trace's model fused horizontally (hwmodels/fuse.hpp, shared/specs/mu-two.md §3).
#include "commands.hpp"
#include "param_options.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <fmt/format.h>

#include <memory>

namespace memsim::cli {
namespace {

struct FuseFiles {
  std::string trace;
  std::string out;
};

// The GPU of `machine_name` whose model is the trace's device (its efficiency curves), nullopt without a machine.
std::optional<Gpu> recording_gpu_of(const std::string& machine_name, const Trace& trace)
{
  if (machine_name.empty())
    return std::nullopt;
  const Machine machine = load_machine_or_preset(machine_name, default_presets_dir());
  for (const Gpu& gpu : machine.gpus)
    if (trace.source.device.empty() || gpu.model == trace.source.device)
      return gpu;
  throw InputError("--machine", fmt::format("machine '{}' has no GPU of model '{}', the trace's recording GPU",
                                            machine.name, trace.source.device));
}

} // namespace

void add_gen_fuse_command(CLI::App* gen)
{
  CLI::App* command = gen->add_subcommand(
      "fuse", "K copies of a trace's model fused horizontally (μ-TWO/HFTA; K = 1 gives the trace back unchanged).\n"
              "Every tensor's bytes x K (shapes get a leading model axis), op flops, bytes and workspace x K, the same "
              "ops. --fusion times the fused ops:\n"
              "  efficiency (default): each op at K x its work on the recording GPU's efficiency curve "
              "(traces/src/RESCALING.md)\n"
              "  batch-proxy: each op as in the trace rescaled to batch K*b (memsim trace rescale), update ops K x\n"
              "  measured: the recorded vmap-fused trace of K models in --measured; it replaces the trace (vmap adds "
              "ops)");
  auto files = std::make_shared<FuseFiles>();
  command->add_option("--trace", files->trace, "the single-model trace (.trace.json or .trace.json.gz)")->required();
  command->add_option("--out", files->out, "trace to write (.trace.json, or .trace.json.gz to compress)")->required();
  auto params = std::make_shared<ParamOptions>(command, fuse_params().specs());
  command->callback([files, params] {
    const FuseSpec spec =
        fuse_params().bind(complete_params("generator", "fuse", fuse_params().specs(), params->given()));
    const FusionModel model = parse_fusion_model(spec.fusion);
    const Trace single = load_trace(files->trace);
    const bool timed_by_curves = spec.models > 1 && model != FusionModel::measured;
    const Trace fused =
        fuse_models(single, spec.models, model, spec.measured,
                    timed_by_curves ? recording_gpu_of(spec.machine, single) : std::nullopt, files->trace);
    const std::filesystem::path out = files->out;
    if (out.has_parent_path())
      std::filesystem::create_directories(out.parent_path());
    save_trace(fused, out);
    const MemoryProfile before = default_memory_profile(single);
    const MemoryProfile after = default_memory_profile(fused);
    fmt::print("{}: {} models ({}): {} -> {} ops, compute {:.6g} s -> {:.6g} s (x{:.3f}), default-schedule peak {} -> "
               "{} bytes\n",
               out.string(), spec.models, spec.fusion, single.ops.size(), fused.ops.size(), single.total_time_s(),
               fused.total_time_s(), fused.total_time_s() / single.total_time_s(), before.peak_bytes, after.peak_bytes);
  });
}

} // namespace memsim::cli
