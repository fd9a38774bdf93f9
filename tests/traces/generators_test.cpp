#include "memsim/common/error.hpp"
#include "memsim/traces/generator_registry.hpp"
#include "memsim/traces/generators.hpp"
#include "memsim/traces/views.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace memsim {
namespace {

const Roofline kRoofline{10e12, 1e12, 5e-6, "test-gpu"};

// The registry binds the given parameters to the spec's fields (defaults for the rest) and asks for the roofline
// of the spec's dtype.
TEST(GeneratorRegistry, BindsParametersToTheSpec)
{
  const GeneratorRegistry& registry = generator_registry();
  EXPECT_EQ(
      registry.names(),
      "cnn, layer-chain, moe, preset, recycle, transformer, tree-cnn, treelstm, unrolled-gan, var-bert, var-lstm");
  const GeneratorInfo& cnn = registry.get("cnn");
  std::string asked_dtype;
  const Trace trace = cnn.make(
      registry.complete_params(cnn, {{"depth", 4}, {"batch", 2}, {"image", 16}, {"dtype", "fp16"}, {"residual", true}}),
      [&](const std::string& dtype) {
        asked_dtype = dtype;
        return kRoofline;
      });
  EXPECT_EQ(asked_dtype, "fp16");
  CnnSpec spec;
  spec.depth = 4;
  spec.batch = 2;
  spec.image = 16;
  spec.dtype = "fp16";
  spec.residual = true;
  EXPECT_EQ(trace_to_json(trace), trace_to_json(generate_cnn(spec, kRoofline)));
  EXPECT_EQ(registry.complete_params(registry.get("transformer"), nlohmann::json::object()),
            (nlohmann::json{{"layers", 12},
                            {"hidden", 768},
                            {"heads", 12},
                            {"seq", 512},
                            {"batch", 8},
                            {"vocab", 0},
                            {"dtype", "fp32"}}));
}

TEST(GenerateCnn, ValidChainWithConvolutions)
{
  CnnSpec spec;
  spec.depth = 8;
  spec.batch = 4;
  spec.image = 32;
  const Trace trace = generate_cnn(spec, kRoofline);
  const ChainView view = chain_view(trace);
  EXPECT_EQ(view.layers.size(), 9u); // 8 conv layers + the classifier
  EXPECT_EQ(trace.source.device, "test-gpu");
  std::size_t convs = 0;
  for (const Op& op : trace.ops)
    convs += op.type == "conv2d";
  EXPECT_EQ(convs, 8u);
  // The first conv: 3->64 channels, 3x3, 32x32 pixels, batch 4: 2*4*32*32*64*3*9 flops.
  const Op& first = trace.ops[0];
  ASSERT_EQ(first.type, "conv2d");
  EXPECT_DOUBLE_EQ(*first.flops, 2.0 * 4 * 32 * 32 * 64 * 3 * 9);
  // Its time is the roofline's: compute-bound here.
  EXPECT_DOUBLE_EQ(first.time_s, std::max(*first.flops / 10e12, *first.bytes_accessed / 1e12) + 5e-6);
}

TEST(GenerateCnn, ResidualBlocksKeepTheChain)
{
  CnnSpec spec;
  spec.depth = 6;
  spec.batch = 2;
  spec.image = 32;
  spec.residual = true;
  const Trace trace = generate_cnn(spec, kRoofline);
  EXPECT_NO_THROW((void)chain_view(trace));
  bool has_accumulation = false;
  for (const Op& op : trace.ops)
    has_accumulation |= op.name.rfind("accumulate.", 0) == 0;
  EXPECT_TRUE(has_accumulation) << "a skip connection's gradient is the sum of two paths";
}

TEST(GenerateTransformer, LayerStructureAndFlops)
{
  TransformerSpec spec;
  spec.layers = 2;
  spec.hidden = 64;
  spec.heads = 4;
  spec.seq = 16;
  spec.batch = 2;
  const Trace trace = generate_transformer(spec, kRoofline);
  const ChainView view = chain_view(trace);
  EXPECT_EQ(view.layers.size(), 2u);
  // 12 forward ops per layer.
  EXPECT_EQ(view.layers[0].forward_ops.size(), 12u);
  // The qkv projection: 2 * tokens * h * 3h.
  const Op& qkv = trace.ops[1];
  EXPECT_EQ(qkv.name, "l0.qkv");
  EXPECT_DOUBLE_EQ(*qkv.flops, 2.0 * 32 * 64 * 192);
  std::size_t updates = 0;
  for (const Op& op : trace.ops)
    updates += op.phase == Phase::update;
  EXPECT_EQ(updates, 12u); // 6 weights per layer
}

TEST(Generators, Deterministic)
{
  TransformerSpec spec;
  spec.layers = 2;
  spec.hidden = 64;
  spec.heads = 4;
  spec.seq = 16;
  EXPECT_EQ(trace_to_json(generate_transformer(spec, kRoofline)).dump(),
            trace_to_json(generate_transformer(spec, kRoofline)).dump());
}

TEST(Generators, RejectBadParameters)
{
  TransformerSpec spec;
  spec.hidden = 100;
  spec.heads = 3;
  EXPECT_THROW((void)generate_transformer(spec, kRoofline), InputError);
  CnnSpec cnn;
  cnn.dtype = "fp8";
  EXPECT_THROW((void)generate_cnn(cnn, kRoofline), InputError);
}

} // namespace
} // namespace memsim
