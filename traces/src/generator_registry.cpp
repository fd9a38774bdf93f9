// The analytic generators' parameters, bound to the fields of their spec structs. Registered here, in the file
// that defines the registry, so that every program using the registry links them.
#include "memsim/traces/generator_registry.hpp"

#include "memsim/common/error.hpp"
#include "memsim/traces/dynamic_generators.hpp"
#include "memsim/traces/layer_chain.hpp"
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

// The dynamic networks' common parameters: how many iterations the trace holds and the seed of their decisions.
template <class Spec>
std::vector<BoundParam<Spec>> dynamic_params()
{
  // Explicit template arguments: the fields are DynamicSpec's, bound as fields of Spec.
  return {param<Spec, int>("iterations", &Spec::iterations, "training iterations in the trace (a different graph each)",
                           positive()),
          param<Spec, std::int64_t>("seed", &Spec::seed,
                                    "seed of the per-iteration decisions (same seed: byte-identical trace)",
                                    {.min = 0})};
}

template <class Spec>
GeneratorInfo dynamic_generator(std::string name, std::string description, std::vector<BoundParam<Spec>> own,
                                Trace (*generate)(const Spec&, const Roofline&))
{
  std::vector<BoundParam<Spec>> all = dynamic_params<Spec>();
  all.insert(all.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  all.push_back(param<Spec, std::string>("dtype", &Spec::dtype, "element type", dtypes()));
  return generator<Spec>(std::move(name), std::move(description), ParamList<Spec>(std::move(all)), generate);
}

GeneratorInfo var_lstm_generator()
{
  return dynamic_generator<VarLstmSpec>(
      "var-lstm", "variable-length LSTM classifier: sequence length drawn per iteration, the cell unrolled per step",
      {param("min_len", &VarLstmSpec::min_len, "shortest sequence", positive()),
       param("max_len", &VarLstmSpec::max_len, "longest sequence", positive()),
       param("batch", &VarLstmSpec::batch, "batch size", positive()),
       param("hidden", &VarLstmSpec::hidden, "LSTM hidden size", positive()),
       param("embed", &VarLstmSpec::embed, "token embedding size", positive()),
       param("vocab", &VarLstmSpec::vocab, "vocabulary", positive()),
       param("classes", &VarLstmSpec::classes, "classifier outputs", positive())},
      generate_var_lstm);
}

GeneratorInfo tree_lstm_generator()
{
  return dynamic_generator<TreeLstmSpec>(
      "treelstm", "binary Tree-LSTM: a random tree per iteration, one cell per internal node, leaves embedded",
      {param("min_leaves", &TreeLstmSpec::min_leaves, "fewest leaves (tokens)", {.min = 2}),
       param("max_leaves", &TreeLstmSpec::max_leaves, "most leaves (tokens)", {.min = 2}),
       param("shape_noise", &TreeLstmSpec::shape_noise,
             "weight of per-iteration noise against the seed's fixed grammar in each merge (0: one tree per length, "
             "1: uniformly random; 0.2 spreads Jaccard distances over Table I's bins)",
             {.min = 0, .max = 1}),
       param("batch", &TreeLstmSpec::batch, "batch size", positive()),
       param("hidden", &TreeLstmSpec::hidden, "hidden size", positive()),
       param("vocab", &TreeLstmSpec::vocab, "vocabulary", positive()),
       param("classes", &TreeLstmSpec::classes, "classifier outputs", positive())},
      generate_tree_lstm);
}

GeneratorInfo moe_generator()
{
  return dynamic_generator<MoeSpec>(
      "moe", "mixture of experts: a seeded router picks top-k experts per token group, per layer and iteration",
      {param("layers", &MoeSpec::layers, "MoE layers", positive()),
       param("experts", &MoeSpec::experts, "experts per layer", positive()),
       param("top_k", &MoeSpec::top_k, "experts per token group", positive()),
       param("groups", &MoeSpec::groups, "token groups (the batch)", positive()),
       param("group_tokens", &MoeSpec::group_tokens, "tokens per group", positive()),
       param("hidden", &MoeSpec::hidden, "hidden size", positive()),
       param("ffn", &MoeSpec::ffn, "expert FFN inner size", positive()),
       param("classes", &MoeSpec::classes, "classifier outputs", positive())},
      generate_moe);
}

GeneratorInfo var_bert_generator()
{
  return dynamic_generator<VarBertSpec>(
      "var-bert", "BERT-style encoder (the transformer generator's layers): sequence length drawn per iteration",
      {param("min_seq", &VarBertSpec::min_seq, "shortest sequence", positive()),
       param("max_seq", &VarBertSpec::max_seq, "longest sequence", positive()),
       param("layers", &VarBertSpec::layers, "transformer layers", positive()),
       param("hidden", &VarBertSpec::hidden, "hidden size", positive()),
       param("heads", &VarBertSpec::heads, "attention heads", positive()),
       param("batch", &VarBertSpec::batch, "batch size", positive()),
       param("vocab", &VarBertSpec::vocab, "vocabulary (embedding and LM head)", positive())},
      generate_var_bert);
}

GeneratorInfo tree_cnn_generator()
{
  return dynamic_generator<TreeCnnSpec>(
      "tree-cnn",
      "Tree-CNN (DyNN-Offload Fig. 1): a greedy best-pair parse per iteration, each node its grammar type's own CNN",
      {param("min_leaves", &TreeCnnSpec::min_leaves, "fewest leaves (tokens); 5 as SICK's shortest sentences",
             {.min = 2}),
       param("max_leaves", &TreeCnnSpec::max_leaves, "most leaves (tokens); 30 as SICK's longest", {.min = 2}),
       param("types", &TreeCnnSpec::types, "grammar types, each with its own CNN; 4 as Fig. 1's S, NP, VP, PP",
             positive()),
       param("batch", &TreeCnnSpec::batch, "batch size; 32 as Table II", positive()),
       param("channels", &TreeCnnSpec::channels, "channels of a node's features; 64 as the narrowest VGG stage",
             positive()),
       param("width", &TreeCnnSpec::width,
             "positions of a node's features (the convs' length); 16 keeps the default trace small", positive()),
       param("vocab", &TreeCnnSpec::vocab, "vocabulary; 30000 as the other text generators", positive()),
       param("classes", &TreeCnnSpec::classes, "classifier outputs; 200 as CUB-200 (Table II)", positive())},
      generate_tree_cnn);
}

GeneratorInfo unrolled_gan_generator()
{
  return dynamic_generator<UnrolledGanSpec>(
      "unrolled-gan",
      "unrolled GAN: the discriminator unrolled a drawn number of SGD steps inside the generator's graph",
      {param("min_unroll", &UnrolledGanSpec::min_unroll,
             "fewest unrolled steps; 1 so that some iterations barely unroll", positive()),
       param("max_unroll", &UnrolledGanSpec::max_unroll, "most unrolled steps; 10 as DTR's unrolled-GAN log",
             positive()),
       param("layers", &UnrolledGanSpec::layers, "hidden layers of each MLP; 2 as Metz et al.'s generator", {.min = 0}),
       param("hidden", &UnrolledGanSpec::hidden, "hidden width; 512 as DTR's log", positive()),
       param("noise", &UnrolledGanSpec::noise, "generator input size; 256 as Metz et al.'s toy experiment", positive()),
       param("batch", &UnrolledGanSpec::batch, "batch size; 512 as Table II", positive())},
      generate_unrolled_gan);
}

GeneratorInfo recycle_generator()
{
  return dynamic_generator<RecycleSpec>(
      "recycle", "AlphaFold-like: evoformer-style blocks run a drawn number of recycles over a drawn crop length",
      {param("min_recycles", &RecycleSpec::min_recycles, "fewest recycles; 1: the first pass alone", positive()),
       param("max_recycles", &RecycleSpec::max_recycles, "most recycles; 4 as Table II's \"2,3,4\" read as counts",
             positive()),
       param("min_crop", &RecycleSpec::min_crop, "shortest crop (residues); 64 a small domain", positive()),
       param("max_crop", &RecycleSpec::max_crop, "longest crop; 256 as AlphaFold's training crop", positive()),
       param("crop_step", &RecycleSpec::crop_step,
             "crop lengths are min_crop + i * crop_step; 64: four lengths, as many as recycle counts", positive()),
       param("blocks", &RecycleSpec::blocks, "evoformer blocks per recycle (AlphaFold: 48; small by default)",
             positive()),
       param("msa", &RecycleSpec::msa, "MSA rows (sequences); 16, small (AlphaFold clusters 512)", positive()),
       param("msa_hidden", &RecycleSpec::msa_hidden, "MSA representation channels; 64 (AlphaFold: 256)", positive()),
       param("pair_hidden", &RecycleSpec::pair_hidden, "pair representation channels; 32 (AlphaFold: 128)", positive()),
       param("heads", &RecycleSpec::heads, "attention heads (divides both widths); 4", positive()),
       param("batch", &RecycleSpec::batch, "proteins per batch; 1 keeps the default trace near 3 GB (Table II: 6)",
             positive()),
       param("bins", &RecycleSpec::bins, "distogram bins; 64 as AlphaFold", positive())},
      generate_recycle);
}

struct LayerChainSpec {
  std::string profile;
  int microbatch = 1;
};

// Harmony's workload: a layer profile at one microbatch size as fused per-layer ops (layer_chain.hpp). Not a
// roofline model: times and sizes come from the profile.
GeneratorInfo layer_chain_generator()
{
  ParamList<LayerChainSpec> params{param("profile", &LayerChainSpec::profile,
                                         "layer profile file (memsim-layer-profile or harmony-profile JSON)"),
                                   param("microbatch", &LayerChainSpec::microbatch,
                                         "microbatch size u (within the profile's sampled range)", positive())};
  std::vector<ParamSpec> specs = params.specs();
  return GeneratorInfo{"layer-chain",
                       "a layer profile at one microbatch size: fused forward, backward and CPU update ops per layer "
                       "(the workload of harmony-pp / harmony-dp)",
                       std::move(specs), [params = std::move(params)](const ParamValues& values, const RooflineFor&) {
                         const LayerChainSpec spec = params.bind(values);
                         if (spec.profile.empty())
                           throw InputError("--profile", "a layer profile file is required");
                         return layer_chain_trace(load_layer_profile(spec.profile), spec.microbatch);
                       }};
}

} // namespace

GeneratorRegistry& generator_registry()
{
  static GeneratorRegistry registry = [] {
    GeneratorRegistry generators("generator");
    register_or_abort(generators, cnn_generator());
    register_or_abort(generators, transformer_generator());
    register_or_abort(generators, preset_generator());
    register_or_abort(generators, var_lstm_generator());
    register_or_abort(generators, tree_lstm_generator());
    register_or_abort(generators, moe_generator());
    register_or_abort(generators, var_bert_generator());
    register_or_abort(generators, tree_cnn_generator());
    register_or_abort(generators, unrolled_gan_generator());
    register_or_abort(generators, recycle_generator());
    register_or_abort(generators, layer_chain_generator());
    return generators;
  }();
  return registry;
}

} // namespace memsim
