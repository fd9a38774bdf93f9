// recycle (AlphaFold-like, DyNN-Offload Table II "AlphaFold", recycling counts "2,3,4"): evoformer-style blocks run
// a drawn number of recycles over a drawn crop length.
#include "memsim/traces/dynamic_generators.hpp"

#include "dynamic_common.hpp"

#include <vector>

namespace memsim {
using namespace dynamic; // the dynamic generators' shared draws and checks

namespace {

constexpr std::int64_t kMsaFeatures = 49;    // AlphaFold's msa_feat channels
constexpr std::int64_t kTargetFeatures = 22; // AlphaFold's target_feat channels

void check_recycle(const RecycleSpec& spec)
{
  check_at_least(spec.iterations, 1, "iterations");
  check_at_least(spec.min_recycles, 1, "min-recycles");
  check_range(spec.min_recycles, spec.max_recycles, "min-recycles", "max-recycles");
  check_at_least(spec.min_crop, 1, "min-crop");
  check_range(spec.min_crop, spec.max_crop, "min-crop", "max-crop");
  check_positive({{spec.crop_step, "crop-step"},
                  {spec.blocks, "blocks"},
                  {spec.msa, "msa"},
                  {spec.msa_hidden, "msa-hidden"},
                  {spec.pair_hidden, "pair-hidden"},
                  {spec.heads, "heads"},
                  {spec.batch, "batch"},
                  {spec.bins, "bins"}});
  for (auto [hidden, name] : {std::pair{spec.msa_hidden, "msa-hidden"}, std::pair{spec.pair_hidden, "pair-hidden"}})
    if (hidden % spec.heads != 0)
      throw InputError("--heads", fmt::format("{} ({}) must be a multiple of heads ({})", name, hidden, spec.heads));
}

} // namespace

Trace generate_recycle(const RecycleSpec& spec, const Roofline& roofline)
{
  check_recycle(spec);
  const std::int64_t b = spec.batch, s = spec.msa, cm = spec.msa_hidden, cz = spec.pair_hidden;
  TraceBuilder builder(fmt::format("recycle-blocks{}-msa{}x{}-pair{}-b{}-crop{}-{}-r{}-{}-seed{}", spec.blocks,
                                   spec.msa, spec.msa_hidden, spec.pair_hidden, spec.batch, spec.min_crop,
                                   spec.max_crop, spec.min_recycles, spec.max_recycles, spec.seed),
                       spec.dtype, spec.batch, roofline);
  const TensorId msa_embed = builder.weight("msa_embed.w", {kMsaFeatures, cm}, 0);
  const TensorId pair_embed = builder.weight("pair_embed.w", {kTargetFeatures, cz}, 0);
  const TensorId msa_recycle = builder.weight("recycle.msa_norm.w", {2, cm}, 0);
  const TensorId pair_recycle = builder.weight("recycle.pair_norm.w", {2, cz}, 0);
  const TensorId distogram = builder.weight("distogram.w", {cz, spec.bins}, spec.blocks + 1);
  const int crops = (spec.max_crop - spec.min_crop) / spec.crop_step + 1;
  SeededDraws draws(spec.seed);
  for (int k = 0; k < spec.iterations; ++k) {
    const int crop_index = draws.between(0, crops - 1);
    const std::int64_t crop = spec.min_crop + static_cast<std::int64_t>(crop_index) * spec.crop_step;
    const int recycles = draws.between(spec.min_recycles, spec.max_recycles);
    builder.begin_iteration(k);
    for (int j = 0; j < recycles; ++j)
      builder.decide(fmt::format("recycle{}", j));
    for (int i = 0; i <= crop_index; ++i)
      builder.decide(fmt::format("crop{}", spec.min_crop + i * spec.crop_step));
    const double l = static_cast<double>(crop), msa_cells = static_cast<double>(b * s) * l,
                 pair_cells = static_cast<double>(b) * l * l;
    // The MSA representation as b * msa sequences of the crop; the pair representation as b * crop rows of the crop
    // (triangle attention attends along a row), so both stacks are the transformer generator's layers.
    const TransformerSpec msa_layer{1, spec.msa_hidden, spec.heads, static_cast<int>(crop), static_cast<int>(b * s),
                                    0, spec.dtype};
    const TransformerSpec pair_layer{
        1, spec.pair_hidden, spec.heads, static_cast<int>(crop), static_cast<int>(b * crop), 0, spec.dtype};
    const Shape msa_shape{b * s, crop, cm}, pair_shape{b * crop, crop, cz};
    const SplitDims token_split{"batch", "sequence"};
    const TensorId msa_feat = builder.input("msa_feat", {b * s, crop, kMsaFeatures});
    const TensorId target_feat = builder.input("target_feat", {b, crop, kTargetFeatures});
    const TensorId labels = builder.input("distogram_labels", {b * crop, crop}, 8);
    const TensorId msa0 = builder.forward("msa_embed", "linear", 0, {msa_feat, msa_embed}, msa_shape,
                                          2 * msa_cells * kMsaFeatures * static_cast<double>(cm), token_split);
    const TensorId pair0 = builder.forward("pair_embed", "outer_sum", 0, {target_feat, pair_embed}, pair_shape,
                                           2 * static_cast<double>(b) * l * kTargetFeatures * static_cast<double>(cz) +
                                               pair_cells * static_cast<double>(cz),
                                           token_split);
    TensorId msa = msa0, pair = pair0;
    for (int j = 0; j < recycles; ++j) {
      const std::string r = fmt::format("r{}", j);
      if (j > 0) {
        // The previous recycle's outputs, normalized and added to the embeddings, their gradient stopped.
        builder.stop_gradient(msa);
        builder.stop_gradient(pair);
        msa = builder.forward(r + ".msa_recycle", "layernorm_add", 0, {msa0, msa, msa_recycle}, msa_shape,
                              9 * msa_cells * static_cast<double>(cm), token_split);
        pair = builder.forward(r + ".pair_recycle", "layernorm_add", 0, {pair0, pair, pair_recycle}, pair_shape,
                               9 * pair_cells * static_cast<double>(cz), token_split);
      }
      for (int block = 0; block < spec.blocks; ++block) {
        const int layer = block + 1;
        const std::string p = fmt::format("{}.evo{}", r, block), w = fmt::format("evo{}", block);
        msa = record_transformer_layer(builder, msa_layer, msa, layer, p + ".msa", w + ".msa");
        const TensorId outer =
            builder.forward(p + ".opm", "outer_product_mean", layer,
                            {msa, builder.shared_weight(w + ".opm.w", {cm, cz}, layer)}, pair_shape,
                            2 * msa_cells * l * static_cast<double>(cm) + 2 * pair_cells * static_cast<double>(cm * cz),
                            token_split);
        pair = builder.forward(p + ".pair_add", "add", layer, {pair, outer}, pair_shape,
                               pair_cells * static_cast<double>(cz), token_split);
        pair = record_transformer_layer(builder, pair_layer, pair, layer, p + ".pair", w + ".pair");
      }
    }
    const TensorId logits =
        builder.forward("distogram", "linear", spec.blocks + 1, {pair, distogram}, {b * crop, crop, spec.bins},
                        2 * pair_cells * static_cast<double>(cz * spec.bins), token_split);
    builder.loss({logits}, labels, spec.blocks + 1, token_split);
    builder.backward_and_update();
  }
  return builder.finish();
}

} // namespace memsim
