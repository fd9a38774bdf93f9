// The preset table and its lookup. The architectures are in cnn_presets.cpp and transformer_presets.cpp.
#include "memsim/traces/model_presets.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace memsim {

namespace {

ModelPreset vgg(std::string name, std::vector<int> convs, bool batchnorm)
{
  ModelPreset preset{std::move(name), "", 64, generate_vgg, std::move(convs)};
  preset.batchnorm = batchnorm;
  int layers = 3;
  for (int n : preset.blocks)
    layers += n;
  preset.description = fmt::format("VGG-{} ({} conv{} + 3 fc, 224x224, torchvision)", layers, layers - 3,
                                   batchnorm ? "-BN-ReLU" : "-ReLU");
  return preset;
}

ModelPreset resnet(std::string name, std::vector<int> blocks)
{
  int depth = 2;
  for (int n : blocks)
    depth += 3 * n;
  std::string description = fmt::format("ResNet-{} (bottleneck blocks {}-{}-{}-{}, 224x224, torchvision)", depth,
                                        blocks[0], blocks[1], blocks[2], blocks[3]);
  return ModelPreset{std::move(name), std::move(description), 32, generate_resnet, std::move(blocks)};
}

ModelPreset transformer(std::string name, std::string description, int batch,
                        Trace (*generate)(const PresetSpec&, const ModelPreset&, const Roofline&),
                        std::vector<int> layers, int hidden, int heads, int ffn, int vocab, int seq, int positions)
{
  ModelPreset preset{std::move(name), std::move(description), batch, generate, std::move(layers)};
  preset.hidden = hidden;
  preset.heads = heads;
  preset.ffn = ffn;
  preset.vocab = vocab;
  preset.seq = seq;
  preset.positions = positions;
  return preset;
}

ModelPreset gpt2(std::string name, std::string description, int batch, int layers, int hidden, int heads)
{
  return transformer(std::move(name), std::move(description), batch, generate_gpt2, {layers}, hidden, heads, 4 * hidden,
                     50257, 1024, 1024);
}

std::vector<ModelPreset> make_presets()
{
  std::vector<ModelPreset> presets{
      vgg("vgg16", {2, 2, 3, 3, 3}, false),
      vgg("vgg16-bn", {2, 2, 3, 3, 3}, true),
      vgg("vgg19", {2, 2, 4, 4, 4}, false),
      vgg("vgg19-bn", {2, 2, 4, 4, 4}, true),
      resnet("resnet50", {3, 4, 6, 3}),
      resnet("resnet101", {3, 4, 23, 3}),
      resnet("resnet152", {3, 8, 36, 3}),
      ModelPreset{"inception-v4",
                  "Inception-v4 (stem, 4 A, reduction A, 7 B, reduction B, 3 C; 299x299)",
                  32,
                  generate_inception_v4,
                  {4, 7, 3}},
      transformer("transformer-iwslt",
                  "Transformer base encoder-decoder (6+6 layers, d 512, 8 heads, d_ff 2048, shared vocab 32000, "
                  "source 100 / target 99 tokens)",
                  64, generate_encoder_decoder, {6, 6}, 512, 8, 2048, 32000, 100, 0),
      transformer("bert-base", "BERT-base pre-training (12 layers, d 768, 12 heads, seq 512)", 16, generate_bert, {12},
                  768, 12, 3072, 30522, 512, 512),
      transformer("bert-large", "BERT-large pre-training (24 layers, d 1024, 16 heads, seq 512)", 8, generate_bert,
                  {24}, 1024, 16, 4096, 30522, 512, 512),
      gpt2("gpt2-small", "GPT-2 small (12 layers, d 768, 12 heads, seq 1024)", 8, 12, 768, 12),
      gpt2("gpt2-medium", "GPT-2 medium (24 layers, d 1024, 16 heads, seq 1024)", 4, 24, 1024, 16),
      gpt2("gpt2-large", "GPT-2 large (36 layers, d 1280, 20 heads, seq 1024)", 2, 36, 1280, 20),
      gpt2("gpt2-xl", "GPT-2 XL (48 layers, d 1600, 25 heads, seq 1024)", 1, 48, 1600, 25),
  };
  // Harmony's "tens of billions" GPT-2 configurations: d 4096, 32 heads, seq 1024, 50 layers per 10B.
  for (int billions : {10, 20, 30, 40, 50, 60, 70, 80, 90, 100})
    presets.push_back(gpt2(fmt::format("gpt2-{}b", billions),
                           fmt::format("GPT-2 {}B as Harmony configures it ({} layers, d 4096, 32 heads, seq 1024)",
                                       billions, 5 * billions),
                           1, 5 * billions, 4096, 32));
  return presets;
}

} // namespace

const std::vector<ModelPreset>& model_presets()
{
  static const std::vector<ModelPreset> presets = make_presets();
  return presets;
}

const ModelPreset& model_preset(const std::string& name)
{
  std::string names;
  for (const ModelPreset& preset : model_presets()) {
    if (preset.name == name)
      return preset;
    names += (names.empty() ? "" : ", ") + preset.name;
  }
  throw InputError("--model", fmt::format("unknown model preset '{}' (valid: {})", name, names));
}

Trace generate_preset(const PresetSpec& spec, const Roofline& roofline)
{
  const ModelPreset& preset = model_preset(spec.model);
  if (!(spec.width > 0) || !(spec.depth > 0))
    throw InputError(spec.width > 0 ? "--depth" : "--width", "must be positive");
  if (spec.batch < 0 || spec.image < 0 || spec.seq < 0)
    throw InputError("--batch", "batch, image and seq must be positive (or 0 for the preset's)");
  return preset.generate(spec, preset, roofline);
}

std::int64_t scaled(std::int64_t value, double factor)
{
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(value) * factor));
}

std::uint64_t weight_parameter_count(const Trace& trace)
{
  const std::uint64_t element = dtype_bytes(trace.source.dtype);
  std::uint64_t count = 0;
  for (const Tensor& tensor : trace.tensors)
    if (tensor.kind == TensorKind::weight)
      count += tensor.bytes / element;
  return count;
}

} // namespace memsim
