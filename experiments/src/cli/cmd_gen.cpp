// memsim gen: analytic traces from a machine's roofline.
#include "commands.hpp"

#include "memsim/common/error.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/traces/generators.hpp"
#include "memsim/sim/trace_analysis.hpp"
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
  auto peak = gpu.peak_flops.find(dtype);
  if (peak == gpu.peak_flops.end())
    throw InputError("--dtype", fmt::format("GPU '{}' of machine '{}' has no peak_flops for {}", gpu.name, machine.name,
                                            dtype));
  return Roofline{peak->second, gpu.hbm_bandwidth, gpu.kernel_launch_s, gpu.model};
}

void write(const Trace& trace, const std::string& out)
{
  save_trace(trace, out);
  const MemoryProfile profile = default_memory_profile(trace);
  fmt::print("{}: {} ops, {} tensors, {:.6f} s of compute, keep-all peak {} bytes\n", out, trace.ops.size(),
             trace.tensors.size(), trace.total_time_s(), profile.peak_bytes);
}

} // namespace

void add_gen_command(CLI::App& app, Context&)
{
  CLI::App* gen = app.add_subcommand("gen", "Generate an analytic trace (op-level, flops/bytes, roofline times)");
  gen->require_subcommand(1);

  auto cnn_options = std::make_shared<std::pair<CnnSpec, MachineOptions>>();
  CLI::App* cnn = gen->add_subcommand("cnn", "VGG-style (or ResNet-style with --residual) CNN");
  auto& cnn_spec = cnn_options->first;
  cnn->add_option("--depth", cnn_spec.depth, "conv layers (residual blocks with --residual)")->default_val(16);
  cnn->add_option("--channels", cnn_spec.channel_scale, "channel width scale (1: 64..512)")->default_val(1.0);
  cnn->add_option("--image", cnn_spec.image, "image height and width")->default_val(224);
  cnn->add_option("--batch", cnn_spec.batch, "batch size")->default_val(64);
  cnn->add_option("--classes", cnn_spec.classes, "classifier outputs")->default_val(1000);
  cnn->add_option("--dtype", cnn_spec.dtype, "fp32, fp16 or bf16")->default_val("fp32");
  cnn->add_flag("--residual", cnn_spec.residual, "ResNet-style blocks with skip connections");
  add_machine_options(cnn, cnn_options->second);
  cnn->callback([cnn_options] {
    Roofline roofline = roofline_for(cnn_options->second, cnn_options->first.dtype);
    write(generate_cnn(cnn_options->first, roofline), cnn_options->second.out);
  });

  auto tf_options = std::make_shared<std::pair<TransformerSpec, MachineOptions>>();
  CLI::App* transformer = gen->add_subcommand("transformer", "Transformer encoder/decoder stack");
  auto& tf_spec = tf_options->first;
  transformer->add_option("--layers", tf_spec.layers, "transformer layers")->default_val(12);
  transformer->add_option("--hidden", tf_spec.hidden, "hidden size")->default_val(768);
  transformer->add_option("--heads", tf_spec.heads, "attention heads")->default_val(12);
  transformer->add_option("--seq", tf_spec.seq, "sequence length")->default_val(512);
  transformer->add_option("--batch", tf_spec.batch, "batch size")->default_val(8);
  transformer->add_option("--vocab", tf_spec.vocab, "vocabulary (0: no embedding or LM head)")->default_val(0);
  transformer->add_option("--dtype", tf_spec.dtype, "fp32, fp16 or bf16")->default_val("fp32");
  add_machine_options(transformer, tf_options->second);
  transformer->callback([tf_options] {
    Roofline roofline = roofline_for(tf_options->second, tf_options->first.dtype);
    write(generate_transformer(tf_options->first, roofline), tf_options->second.out);
  });
}

} // namespace memsim::cli
