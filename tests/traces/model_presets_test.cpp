// The model presets: parameter counts against the published ones, shapes and split dimensions on every tensor and
// op, the chain view, and the width/depth knobs against counts worked out by hand.
#include "memsim/common/error.hpp"
#include "memsim/traces/model_presets.hpp"
#include "memsim/traces/views.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace memsim {
namespace {

using Shape = std::vector<std::int64_t>;

const Roofline kRoofline{10e12, 1e12, 5e-6, "test-gpu"};

Trace small(const std::string& model, double width = 1, double depth = 1)
{
  PresetSpec spec;
  spec.model = model;
  spec.batch = 2;
  spec.seq = 8;
  spec.width = width;
  spec.depth = depth;
  return generate_preset(spec, kRoofline);
}

std::uint64_t parameters(const std::string& model, double width = 1, double depth = 1)
{
  return weight_parameter_count(small(model, width, depth));
}

// Published counts: torchvision for the CNNs, Hugging Face for BERT (BertModel: 110 M, 335 M) and GPT-2.
TEST(ModelPresets, ParameterCountsWithinOnePercentOfThePublishedOnes)
{
  const std::pair<const char*, double> published[] = {{"vgg16", 138.4e6},    {"vgg19", 143.7e6},
                                                      {"resnet50", 25.6e6},  {"resnet101", 44.5e6},
                                                      {"resnet152", 60.2e6}, {"bert-base", 110e6},
                                                      {"bert-large", 335e6}, {"gpt2-small", 124e6},
                                                      {"gpt2-xl", 1.56e9},   {"inception-v4", 42.7e6}};
  for (auto [model, count] : published)
    EXPECT_NEAR(static_cast<double>(parameters(model)) / count, 1.0, 0.01) << model << ": " << parameters(model);
}

// Exact where the reference implementation's count is known to the unit.
TEST(ModelPresets, ExactCountsOfTheReferenceImplementations)
{
  EXPECT_EQ(parameters("vgg16"), 138357544u);    // torchvision vgg16
  EXPECT_EQ(parameters("vgg16-bn"), 138365992u); // + BN scale and shift: 2 x 4224 channels
  EXPECT_EQ(parameters("vgg19"), 143667240u);
  EXPECT_EQ(parameters("resnet50"), 25557032u); // torchvision resnet50
  EXPECT_EQ(parameters("resnet101"), 44549160u);
  EXPECT_EQ(parameters("resnet152"), 60192808u);
  EXPECT_EQ(parameters("gpt2-small"), 124439808u); // GPT2LMHeadModel, LM head tied to wte
  EXPECT_EQ(parameters("gpt2-xl"), 1557611200u);
  EXPECT_EQ(parameters("bert-base"), 110106428u); // BertForPreTraining: BertModel 109482240 + heads 624188
}

// A GPT-2 block: 2 LayerNorms (2d each), q, k, v, o (d x d + d each), fc1 (d x f + f), fc2 (f x d + d).
std::uint64_t gpt2_count(std::uint64_t layers, std::uint64_t d, std::uint64_t f)
{
  const std::uint64_t block = 4 * d + 4 * (d * d + d) + (d * f + f) + (f * d + d);
  return 50257 * d + 1024 * d + layers * block + 2 * d; // tied token table, positions, blocks, final LayerNorm
}

std::uint64_t vgg_count(const std::vector<int>& convs, std::uint64_t k)
{
  std::uint64_t count = 0;
  std::uint64_t in = 3;
  const std::uint64_t widths[] = {64, 128, 256, 512, 512};
  for (std::size_t stage = 0; stage < 5; ++stage)
    for (int i = 0; i < convs[stage]; ++i) {
      count += in * widths[stage] * k * 9 + widths[stage] * k;
      in = widths[stage] * k;
    }
  const std::uint64_t hidden = 4096 * k;
  return count + (in * 49 * hidden + hidden) + (hidden * hidden + hidden) + (hidden * 1000 + 1000);
}

TEST(ModelPresets, WidthAndDepthKnobsChangeTheCountsAsComputedByHand)
{
  EXPECT_EQ(parameters("gpt2-small"), gpt2_count(12, 768, 3072));
  EXPECT_EQ(parameters("gpt2-small", 2, 1), gpt2_count(12, 1536, 6144));
  EXPECT_EQ(parameters("gpt2-small", 1, 0.5), gpt2_count(6, 768, 3072));
  EXPECT_EQ(parameters("gpt2-10b"), gpt2_count(50, 4096, 16384)); // Harmony's 10B: 10.3 B with the embeddings
  EXPECT_EQ(parameters("gpt2-100b", 1, 0.02), gpt2_count(10, 4096, 16384));
  EXPECT_EQ(parameters("vgg16"), vgg_count({2, 2, 3, 3, 3}, 1));
  EXPECT_EQ(parameters("vgg16", 2, 1), vgg_count({2, 2, 3, 3, 3}, 2));
  EXPECT_EQ(parameters("vgg16", 1, 2), vgg_count({4, 4, 6, 6, 6}, 1));
  // ResNet-50 at depth 2 has 6-8-12-6 blocks: each extra block of a stage of width w adds a 1x1 (4w -> w), a 3x3
  // (w -> w), a 1x1 (w -> 4w) and three BNs (2w, 2w, 8w).
  std::uint64_t extra = 0;
  const std::uint64_t added[] = {3, 4, 6, 3};
  for (std::uint64_t stage = 0; stage < 4; ++stage) {
    const std::uint64_t w = 64u << stage;
    extra += added[stage] * (4 * w * w + 9 * w * w + 4 * w * w + 12 * w);
  }
  EXPECT_EQ(parameters("resnet50", 1, 2), 25557032u + extra);
}

TEST(ModelPresets, EveryPresetValidatesWithShapesAndSplitDimensions)
{
  for (const ModelPreset& preset : model_presets()) {
    if (preset.name.rfind("gpt2-", 0) == 0 && preset.name.back() == 'b' && preset.name != "gpt2-10b")
      continue; // the larger Harmony configurations differ from gpt2-10b only in depth
    SCOPED_TRACE(preset.name);
    const Trace trace = small(preset.name);
    EXPECT_EQ(trace.source.batch, 2);
    for (const Tensor& tensor : trace.tensors) {
      EXPECT_FALSE(tensor.shape.empty()) << tensor.name;
      const bool per_sample = tensor.kind == TensorKind::activation || tensor.kind == TensorKind::gradient ||
                              tensor.kind == TensorKind::input;
      EXPECT_EQ(tensor.batch_axis.has_value(), per_sample) << tensor.name;
      if (tensor.batch_axis) {
        EXPECT_EQ(tensor.shape[0], 2) << tensor.name;
      }
    }
    for (const Op& op : trace.ops)
      EXPECT_FALSE(op.split.empty()) << op.name;
    // A chain at layer granularity, except the encoder-decoder whose decoder layers all read the encoder.
    if (preset.name == "transformer-iwslt")
      EXPECT_THROW((void)chain_view(trace), Infeasible);
    else
      EXPECT_NO_THROW((void)chain_view(trace));
  }
}

TEST(ModelPresets, ShapesFlopsAndSplitsOfKnownOps)
{
  const Trace resnet = small("resnet50");
  const Op& stem = resnet.ops[0]; // 7x7/2 conv, 3 -> 64 channels, 224 -> 112
  EXPECT_EQ(stem.type, "conv2d");
  EXPECT_EQ(resnet.tensor(stem.outputs[0]).shape, (Shape{2, 64, 112, 112}));
  EXPECT_DOUBLE_EQ(*stem.flops, 2.0 * 2 * 64 * 112 * 112 * 3 * 49);
  EXPECT_EQ(stem.split, (std::vector<std::string>{"batch", "channel", "spatial"}));
  EXPECT_DOUBLE_EQ(stem.time_s, std::max(*stem.flops / 10e12, *stem.bytes_accessed / 1e12) + 5e-6);
  EXPECT_EQ(resnet.ops[1].type, "batchnorm");
  EXPECT_EQ(resnet.ops[1].split, (std::vector<std::string>{"channel"}));

  const Trace gpt = small("gpt2-small");
  for (const Op& op : gpt.ops)
    if (op.name == "l1.attn.scores") {
      EXPECT_EQ(gpt.tensor(op.outputs[0]).shape, (Shape{2, 12, 8, 8}));
      EXPECT_DOUBLE_EQ(*op.flops, 2.0 * 2 * 8 * 8 * 768);
      EXPECT_EQ(op.split, (std::vector<std::string>{"batch", "sequence", "heads"}));
    }
  // The tied token table has one gradient summed from the LM head's and the embedding's, and one update.
  std::size_t updates = 0;
  for (const Op& op : gpt.ops)
    updates += op.name == "adam.wte.w";
  EXPECT_EQ(updates, 1u);

  const Trace inception = small("inception-v4");
  const Op* last_concat = nullptr;
  for (const Op& op : inception.ops)
    if (op.type == "concat")
      last_concat = &op;
  ASSERT_NE(last_concat, nullptr);
  EXPECT_EQ(inception.tensor(last_concat->outputs[0]).shape, (Shape{2, 1536, 8, 8}));
}

TEST(ModelPresets, RejectsUnknownModelsAndBadKnobs)
{
  EXPECT_THROW((void)small("vgg17"), InputError);
  EXPECT_THROW((void)small("vgg16", 0), InputError);
  EXPECT_THROW((void)small("vgg16", 1, -1), InputError);
}

} // namespace
} // namespace memsim
