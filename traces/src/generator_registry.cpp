// The analytic generators' parameters, bound to the fields of their spec structs. Registered here, in the file
// that defines the registry, so that every program using the registry links them.
#include "memsim/traces/generator_registry.hpp"

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
  return generator<TransformerSpec>(
      "transformer", "Transformer encoder/decoder stack",
      {param("layers", &TransformerSpec::layers, "transformer layers", positive()),
       param("hidden", &TransformerSpec::hidden, "hidden size", positive()),
       param("heads", &TransformerSpec::heads, "attention heads", positive()),
       param("seq", &TransformerSpec::seq, "sequence length", positive()),
       param("batch", &TransformerSpec::batch, "batch size", positive()),
       param("vocab", &TransformerSpec::vocab, "vocabulary (0: no embedding or LM head)", {.min = 0}),
       param("dtype", &TransformerSpec::dtype, "element type", dtypes())},
      generate_transformer);
}

} // namespace

GeneratorRegistry& generator_registry()
{
  static GeneratorRegistry registry = [] {
    GeneratorRegistry generators("generator");
    register_or_abort(generators, cnn_generator());
    register_or_abort(generators, transformer_generator());
    return generators;
  }();
  return registry;
}

} // namespace memsim
