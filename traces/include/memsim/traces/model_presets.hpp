#pragma once
// Published models as analytic traces (`memsim gen preset --model NAME`, `memsim gen --list`): the networks the
// seed papers train (TSPLIT: VGG-16/19, ResNet-50/101, Inception-v4, the IWSLT Transformer; Harmony: BERT-large,
// GPT-2 XL and its 10B-100B configurations; mu-TWO: ResNet-101, BERT-base, GPT-2 small), with exact shapes, flops,
// bytes and split dimensions, timed by the caller's roofline. traces/src/PRESETS.md gives each architecture, its
// parameter count and what the count includes.
#include "memsim/traces/generators.hpp"

#include <string>
#include <vector>

namespace memsim {

struct PresetSpec {
  std::string model = "resnet50";
  int batch = 0;      // 0: the preset's default
  double width = 1.0; // multiplies every hidden width (channels; d_model, heads kept, and d_ff)
  double depth = 1.0; // multiplies the blocks per stage (CNNs) or the layers (transformers); at least 1 each
  int image = 0;      // CNNs: image height and width (0: the preset's, 224 or 299)
  int seq = 0;        // transformers: sequence length (0: the preset's)
  std::string dtype = "fp32";
};

struct ModelPreset {
  std::string name;
  std::string description;
  int batch = 0; // default batch
  Trace (*generate)(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline) = nullptr;
  // Family parameters, read by `generate`.
  std::vector<int> blocks; // CNNs: blocks per stage; transformers: {layers} or {encoder, decoder}
  bool batchnorm = false;  // VGG: conv-BN-ReLU
  int hidden = 0, heads = 0, ffn = 0, vocab = 0, seq = 0, positions = 0;
};

// Every preset, in listing order.
const std::vector<ModelPreset>& model_presets();
// Throws InputError naming the valid presets when `name` is unknown.
const ModelPreset& model_preset(const std::string& name);
Trace generate_preset(const PresetSpec& spec, const Roofline& roofline);

// A count or width under a knob: max(1, round(value x factor)).
std::int64_t scaled(std::int64_t value, double factor);

// The sum over weight tensors of their elements (biases and normalization scales included; a tied weight once).
std::uint64_t weight_parameter_count(const Trace& trace);

// Family generators (cnn_presets.cpp, transformer_presets.cpp).
Trace generate_vgg(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline);
Trace generate_resnet(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline);
Trace generate_inception_v4(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline);
Trace generate_encoder_decoder(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline);
Trace generate_bert(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline);
Trace generate_gpt2(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline);

} // namespace memsim
