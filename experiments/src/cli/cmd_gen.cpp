// memsim gen KIND: analytic traces from a machine's roofline, one subcommand per registered generator.
#include "commands.hpp"
#include "param_options.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/hwmodels/roofline.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/generator_registry.hpp"
#include "memsim/traces/model_presets.hpp"
#include "memsim/traces/views.hpp"

#include <fmt/format.h>

#include <memory>

namespace memsim::cli {
namespace {

struct MachineOptions {
  std::string machine;
  std::size_t gpu = 0;
  std::string out;
};

void add_machine_options(CLI::App* command, MachineOptions& options)
{
  command->add_option("--machine", options.machine, "machine preset or YAML file whose GPU gives the roofline")
      ->required();
  command->add_option("--gpu", options.gpu, "index of the GPU in the machine")->default_val(0);
  command->add_option("--out", options.out, "trace file to write")->required();
}

Roofline roofline_for(const MachineOptions& options, const std::string& dtype)
{
  Machine machine = load_machine_or_preset(options.machine, default_presets_dir());
  if (options.gpu >= machine.gpus.size())
    throw InputError("--gpu", fmt::format("machine '{}' has {} GPU(s)", machine.name, machine.gpus.size()));
  const Gpu& gpu = machine.gpus[options.gpu];
  std::optional<Roofline> roofline = roofline_of(gpu, dtype);
  if (!roofline)
    throw InputError("--dtype",
                     fmt::format("GPU '{}' of machine '{}' has no peak_flops for {}", gpu.name, machine.name, dtype));
  return *roofline;
}

void write(const Trace& trace, const std::string& out)
{
  save_trace(trace, out);
  const MemoryProfile profile = default_memory_profile(trace);
  fmt::print("{}: {} ops, {} tensors, {:.6f} s of compute, keep-all peak {} bytes\n", out, trace.ops.size(),
             trace.tensors.size(), trace.total_time_s(), profile.peak_bytes);
}

// One line per preset: its name, default batch, weights at width = depth = 1 (from a generated batch-1 trace) and
// what it is.
void list_presets()
{
  fmt::print("{:<18} {:>6} {:>15}  {}\n", "model", "batch", "parameters", "description");
  for (const ModelPreset& preset : model_presets()) {
    PresetSpec spec;
    spec.model = preset.name;
    spec.batch = 1;
    spec.seq = 1;
    const Trace trace = generate_preset(spec, Roofline{});
    fmt::print("{:<18} {:>6} {:>15}  {}\n", preset.name, preset.batch, weight_parameter_count(trace),
               preset.description);
  }
}

} // namespace

void add_gen_command(CLI::App& app, Context&)
{
  CLI::App* gen = app.add_subcommand("gen", "Generate an analytic trace (op-level, flops/bytes, roofline times)");
  gen->require_subcommand(0, 1);
  auto list = std::make_shared<bool>(false);
  gen->add_flag("--list", *list, "list the model presets of `memsim gen preset --model NAME`");
  gen->callback([gen, list] {
    if (*list)
      list_presets();
    else if (gen->get_subcommands().empty())
      throw InputError("memsim gen", "name a generator (memsim generators lists them) or give --list");
  });
  const GeneratorRegistry& registry = generator_registry();
  for (const GeneratorInfo* info : registry.all()) {
    CLI::App* command = gen->add_subcommand(info->name, info->description);
    auto params = std::make_shared<ParamOptions>(command, info->params);
    auto machine = std::make_shared<MachineOptions>();
    add_machine_options(command, *machine);
    command->callback([&registry, info, params, machine] {
      const ParamValues values = registry.complete_params(*info, params->given());
      const Trace trace = info->make(values, [&](const std::string& dtype) { return roofline_for(*machine, dtype); });
      write(trace, machine->out);
    });
  }
  add_gen_fuse_command(gen);
}

} // namespace memsim::cli
