// The analytic generators' parameters, bound to the fields of their spec structs. Registered here, in the file
// that defines the registry, so that every program using the registry links them.
#include "memsim/traces/generator_registry.hpp"

#include "memsim/traces/model_presets.hpp"

namespace memsim {
namespace {

// Spec is CnnSpec or TransformerSpec: its dtype picks the roofline.
template <class Spec>
GeneratorInfo generator(std::string name, std::string description, ParamList<Spec> params,
                        Trace (*generate)(const Spec&, const Roofline&))
{
  std::vector<ParamSpec> specs = params.specs();
  return GeneratorInfo{std::move(name), std::move(description), std::move(specs),
                       [params = std::move(params), generate](const ParamValues& values, const RooflineFor& roofline) {
                         const Spec spec = params.bind(values);
                         return generate(spec, roofline(spec.dtype));
                       }};
}

ParamRange positive() { return {.min = 1}; }
ParamRange dtypes() { return {.choices = {"fp32", "fp16", "bf16"}}; }

GeneratorInfo cnn_generator()
{
  return generator<CnnSpec>(
      "cnn", "VGG-style (or ResNet-style with --residual) CNN",
      {param("depth", &CnnSpec::depth, "conv layers (residual blocks with --residual)", positive()),
       param("channel_scale", &CnnSpec::channel_scale, "channel width scale (1: 64..512)").flag("--channels"),
       param("image", &CnnSpec::image, "image height and width", positive()),
       param("batch", &CnnSpec::batch, "batch size", positive()),
       param("classes", &CnnSpec::classes, "classifier outputs", positive()),
       param("dtype", &CnnSpec::dtype, "element type", dtypes()),
       param("residual", &CnnSpec::residual, "ResNet-style blocks with skip connections")},
      generate_cnn);
}

GeneratorInfo transformer_generator()
{
  return generator<TransformerSpec>("transformer", "Transformer encoder/decoder stack",
                                    {param("layers", &TransformerSpec::layers, "transformer layers", positive()),
                                     param("hidden", &TransformerSpec::hidden, "hidden size", positive()),
                                     param("heads", &TransformerSpec::heads, "attention heads", positive()),
                                     param("seq", &TransformerSpec::seq, "sequence length", positive()),
                                     param("batch", &TransformerSpec::batch, "batch size", positive()),
                                     param("vocab", &TransformerSpec::vocab, "vocabulary (0: no embedding or LM head)",
                                           {.min = 0}),
                                     param("dtype", &TransformerSpec::dtype, "element type", dtypes())},
                                    generate_transformer);
}

GeneratorInfo preset_generator()
{
  ParamRange models;
  for (const ModelPreset& preset : model_presets())
    models.choices.push_back(preset.name);
  return generator<PresetSpec>(
      "preset", "a published model (`memsim gen --list`): VGG, ResNet, Inception-v4, Transformer, BERT, GPT-2",
      {param("model", &PresetSpec::model, "model preset", models),
       param("batch", &PresetSpec::batch, "batch size (0: the preset's)", {.min = 0}),
       param("width", &PresetSpec::width, "width scale: channels, or d_model (per head) and d_ff", {.min = 1e-3}),
       param("depth", &PresetSpec::depth, "depth scale: blocks per stage, or layers", {.min = 1e-3}),
       param("image", &PresetSpec::image, "CNN image height and width (0: the preset's)", {.min = 0}),
       param("seq", &PresetSpec::seq, "transformer sequence length (0: the preset's)", {.min = 0}),
       param("dtype", &PresetSpec::dtype, "element type", dtypes())},
      generate_preset);
}

} // namespace

GeneratorRegistry& generator_registry()
{
  static GeneratorRegistry registry = [] {
    GeneratorRegistry generators("generator");
    register_or_abort(generators, cnn_generator());
    register_or_abort(generators, transformer_generator());
    register_or_abort(generators, preset_generator());
    return generators;
  }();
  return registry;
}

} // namespace memsim
