// The rest of DyNN-Offload's Table II as dynamic generators (tree-cnn, unrolled-gan, recycle): op counts per
// iteration worked out by hand below, the weights each iteration reads, seeded output, decisions, located errors.
#include "memsim/common/error.hpp"
#include "memsim/traces/dynamic_generators.hpp"
#include "memsim/traces/generator_registry.hpp"
#include "test_traces.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <regex>
#include <set>

namespace memsim {
namespace {

using test::ops_per_iteration;

using ::testing::HasSubstr;

const Roofline kRoofline{10e12, 1e12, 5e-6, "test-gpu"};

TreeCnnSpec tiny_tree_cnn(int min_leaves, int max_leaves, int iterations = 3)
{
  TreeCnnSpec spec;
  spec.iterations = iterations;
  spec.min_leaves = min_leaves;
  spec.max_leaves = max_leaves;
  spec.types = 4;
  spec.batch = 2;
  spec.channels = 4;
  spec.width = 3;
  spec.vocab = 16;
  spec.classes = 3;
  return spec;
}

UnrolledGanSpec tiny_gan(int layers, int min_unroll, int max_unroll, int iterations = 3)
{
  UnrolledGanSpec spec;
  spec.iterations = iterations;
  spec.layers = layers;
  spec.min_unroll = min_unroll;
  spec.max_unroll = max_unroll;
  spec.hidden = 8;
  spec.noise = 4;
  spec.batch = 4;
  return spec;
}

RecycleSpec tiny_recycle(int blocks, int min_recycles, int max_recycles, int iterations = 3)
{
  RecycleSpec spec;
  spec.iterations = iterations;
  spec.blocks = blocks;
  spec.min_recycles = min_recycles;
  spec.max_recycles = max_recycles;
  spec.min_crop = 4;
  spec.max_crop = 12;
  spec.crop_step = 4;
  spec.msa = 3;
  spec.msa_hidden = 8;
  spec.pair_hidden = 4;
  spec.heads = 2;
  spec.batch = 1;
  spec.bins = 5;
  return spec;
}

// The weights read by iteration k's ops.
std::set<std::string> weights_read(const Trace& trace, int iteration)
{
  std::set<std::string> names;
  for (const Op& op : trace.ops)
    if (op.iteration == iteration)
      for (TensorId id : op.inputs)
        if (trace.tensor(id).kind == TensorKind::weight)
          names.insert(trace.tensor(id).name);
  return names;
}

bool has_op(const Trace& trace, const std::string& name)
{
  for (const Op& op : trace.ops)
    if (op.name == name)
      return true;
  return false;
}

std::string error_of(const std::function<void()>& generate)
{
  try {
    generate();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// Tree-CNN over n leaves (n - 1 nodes): forward 1 + n + 4 (n - 1) + 1 (lookup, a select per leaf, concat, conv,
// relu, 1x1 conv per node, classifier) = 5n - 2, loss 1, backward 5n - 2, gradient sums (n - 1) for the embedded
// sentence + 2 (u_g - 1) per type g used u_g times (its two conv weights), Adam 2 + 2 |types used|; with
// sum u_g = n - 1 the types cancel: 13 n - 4 (22 for 2 leaves: one node).
TEST(TreeCnn, OpsPerIterationMatchTheHandCount)
{
  for (int leaves = 2; leaves <= 7; ++leaves)
    EXPECT_EQ(generate_tree_cnn(tiny_tree_cnn(leaves, leaves, 1), kRoofline).ops.size(),
              static_cast<std::size_t>(13 * leaves - 4))
        << leaves << " leaves";
  const Trace mixed = generate_tree_cnn(tiny_tree_cnn(2, 9, 8), kRoofline);
  ASSERT_EQ(mixed.decisions.size(), 8u);
  for (auto [iteration, count] : ops_per_iteration(mixed)) {
    const auto leaves = static_cast<int>(mixed.decisions[static_cast<std::size_t>(iteration)].size()) + 1;
    EXPECT_EQ(count, 13 * leaves - 4) << "iteration " << iteration;
  }
}

// Every node's decision names its span and type; the root spans every leaf and is merged last; an iteration reads
// the embedding, the classifier and exactly the CNNs of the types its nodes have, and updates only those.
TEST(TreeCnn, AnIterationReadsOnlyItsTypesWeights)
{
  const Trace trace = generate_tree_cnn(tiny_tree_cnn(3, 6, 10), kRoofline);
  const std::regex decision(R"(node\[(\d+),(\d+)\):g(\d+))");
  std::set<std::set<std::string>> distinct_type_sets;
  for (int k = 0; k < 10; ++k) {
    const auto& nodes = trace.decisions[static_cast<std::size_t>(k)];
    std::set<std::string> expected{"embed.w", "cls.w"};
    std::set<int> types;
    for (const std::string& node : nodes) {
      std::smatch match;
      ASSERT_TRUE(std::regex_match(node, match, decision)) << node;
      const int type = std::stoi(match[3]);
      EXPECT_LT(type, 4);
      types.insert(type);
      expected.insert(fmt::format("g{}.conv.w", type));
      expected.insert(fmt::format("g{}.project.w", type));
    }
    EXPECT_EQ(nodes.back().substr(0, nodes.back().find(':')), fmt::format("node[0,{})", nodes.size() + 1));
    EXPECT_EQ(weights_read(trace, k), expected) << "iteration " << k;
    int updates = 0;
    for (const Op& op : trace.ops)
      updates += op.iteration == k && op.type == "adam" ? 1 : 0;
    EXPECT_EQ(updates, 2 + 2 * static_cast<int>(types.size()));
    std::set<std::string> type_weights(expected);
    type_weights.erase("embed.w");
    type_weights.erase("cls.w");
    distinct_type_sets.insert(type_weights);
  }
  EXPECT_GT(distinct_type_sets.size(), 1u) << "ten trees all used the same types";
  // Each type its own kernel and inner width: g1 is a 3-wide conv from 2C = 8 to C (g + 1) / 2 = 4 channels.
  for (const Tensor& tensor : trace.tensors)
    if (tensor.name == "g1.conv.w") {
      EXPECT_EQ(tensor.shape, (std::vector<std::int64_t>{4, 8, 3}));
    } else if (tensor.name == "g3.conv.w") {
      EXPECT_EQ(tensor.shape, (std::vector<std::int64_t>{8, 8, 7}));
    }
}

// Unrolled GAN, L hidden layers (L + 1 linears per MLP), k unrolled steps.
// Forward: generator 2L + 1, the [real; fake] concat 1, per step: discriminator 2L + 1, its loss gradient 1, L + 1
// weight gradients, L input gradients, L + 1 SGD steps (5L + 4), the last discriminator on the fakes 2L + 1:
// 4L + 3 + k (5L + 4). Loss 1; backward the same as forward (every op reaches the loss through the unrolled
// parameters). Gradient sums: the fakes 1 (concat, last discriminator), the concat 2k - 1 (first linear and its
// weight gradient, per step); per step 3L (each pre-relu value: relu, input gradient; each relu output: next linear,
// its weight gradient; each upstream gradient above layer 0: weight and input gradient) and 1 + 2L (each step's
// parameters: linear, SGD step, and above layer 0 the input gradient). Adam 2 (L + 1).
// Total: 10 L + 9 + k (15 L + 11).
TEST(UnrolledGan, OpsPerIterationMatchTheHandCount)
{
  for (int layers : {0, 1, 2})
    for (int unroll : {1, 2, 3}) {
      const Trace trace = generate_unrolled_gan(tiny_gan(layers, unroll, unroll, 1), kRoofline);
      EXPECT_EQ(trace.ops.size(), static_cast<std::size_t>(10 * layers + 9 + unroll * (15 * layers + 11)))
          << layers << " layers, " << unroll << " steps";
    }
  const Trace mixed = generate_unrolled_gan(tiny_gan(1, 1, 6, 8), kRoofline);
  std::set<std::size_t> unrolls;
  for (auto [iteration, count] : ops_per_iteration(mixed)) {
    const auto& steps = mixed.decisions[static_cast<std::size_t>(iteration)];
    unrolls.insert(steps.size());
    EXPECT_EQ(count, 19 + static_cast<int>(steps.size()) * 26);
    for (std::size_t j = 0; j < steps.size(); ++j)
      EXPECT_EQ(steps[j], fmt::format("unroll{}", j));
  }
  EXPECT_GT(unrolls.size(), 1u);
}

// The generator's loss differentiates through every unrolled step: the first step's ops have backward ops, the
// shared discriminator weights are read by step 0 only (later steps read the unrolled parameters, which have no
// batch axis) and get one gradient per iteration.
TEST(UnrolledGan, TheLossDifferentiatesThroughTheUnroll)
{
  const Trace trace = generate_unrolled_gan(tiny_gan(1, 3, 3, 1), kRoofline);
  EXPECT_TRUE(has_op(trace, "it0.u0.d.l0.bwd"));
  EXPECT_TRUE(has_op(trace, "it0.u0.l1.sgd.bwd"));
  EXPECT_TRUE(has_op(trace, "it0.u0.l1.wgrad.bwd"));
  EXPECT_TRUE(has_op(trace, "it0.adam.d.l0.w"));
  for (const Op& op : trace.ops)
    for (TensorId id : op.inputs)
      if (trace.tensor(id).name == "d.l0.w") {
        EXPECT_TRUE(op.name.rfind("it0.u0.", 0) == 0 || op.type == "adam") << op.name;
      }
  for (const Tensor& tensor : trace.tensors)
    if (tensor.name == "it0.u1.l0.sgd.out") {
      EXPECT_EQ(tensor.shape, (std::vector<std::int64_t>{2, 8}));
      EXPECT_FALSE(tensor.batch_axis.has_value());
    }
}

// Recycle, B blocks, r recycles: forward 2 embeddings + 2 (r - 1) recycle embeddings + 26 B r (per block: a
// 12-op transformer layer over the MSA, outer product mean, pair add, a 12-op transformer layer over the pair rows)
// + the distogram = 3 + 2 (r - 1) + 26 B r. Only the last recycle is differentiated: backward 3 + 2 [r > 1] + 26 B.
// Loss 1. Gradient sums: 3 per transformer layer (its input, qkv, first residual), and each MSA block output but
// the last also feeds the next block: 7 B - 1. Adam: 2 embeddings + 2 [r > 1] recycle norms + 13 B (6 per layer,
// the outer product) + the distogram. Total: 9 + 2 (r - 1) + 4 [r > 1] + 26 B r + 46 B.
TEST(Recycle, OpsPerIterationMatchTheHandCount)
{
  for (int blocks : {1, 2})
    for (int recycles : {1, 2, 3}) {
      const Trace trace = generate_recycle(tiny_recycle(blocks, recycles, recycles, 1), kRoofline);
      EXPECT_EQ(trace.ops.size(), static_cast<std::size_t>(9 + 2 * (recycles - 1) + (recycles > 1 ? 4 : 0) +
                                                           26 * blocks * recycles + 46 * blocks))
          << blocks << " blocks, " << recycles << " recycles";
    }
}

// Decisions: the recycles taken, then every crop length of the grid up to the drawn one; the shapes follow the
// crop; only the last recycle has backward ops, and every recycle reads the same block weights.
TEST(Recycle, DecisionsCropAndTheLastRecycleDifferentiated)
{
  const Trace trace = generate_recycle(tiny_recycle(1, 1, 4, 12), kRoofline);
  std::set<std::pair<int, int>> seen;
  for (int k = 0; k < 12; ++k) {
    const auto& decisions = trace.decisions[static_cast<std::size_t>(k)];
    int recycles = 0, crop = 0;
    for (const std::string& decision : decisions) {
      if (decision.rfind("recycle", 0) == 0) {
        EXPECT_EQ(decision, fmt::format("recycle{}", recycles++));
      } else {
        EXPECT_EQ(decision, fmt::format("crop{}", 4 + 4 * crop++));
      }
    }
    ASSERT_GE(recycles, 1);
    ASSERT_LE(recycles, 4);
    ASSERT_GE(crop, 1);
    ASSERT_LE(crop, 3);
    seen.emplace(recycles, crop);
    const int length = 4 * crop;
    for (const Tensor& tensor : trace.tensors)
      if (tensor.name == fmt::format("it{}.distogram.out", k)) {
        EXPECT_EQ(tensor.shape, (std::vector<std::int64_t>{length, length, 5}));
      }
    for (int j = 0; j < recycles; ++j) {
      EXPECT_TRUE(has_op(trace, fmt::format("it{}.r{}.evo0.pair.add2", k, j)));
      EXPECT_EQ(has_op(trace, fmt::format("it{}.r{}.evo0.msa.ln1.bwd", k, j)), j + 1 == recycles)
          << "iteration " << k << ", recycle " << j;
    }
    int qkv_reads = 0;
    for (const Op& op : trace.ops)
      for (TensorId id : op.inputs)
        qkv_reads +=
            op.iteration == k && op.phase == Phase::forward && trace.tensor(id).name == "evo0.msa.qkv.w" ? 1 : 0;
    EXPECT_EQ(qkv_reads, recycles) << "one shared weight, read by every recycle";
  }
  EXPECT_GT(seen.size(), 3u);
}

// Every generator: the same seed gives byte-identical JSON, another seed other decisions; names are unique,
// per-iteration tensors belong to one iteration, weights and moments are one tensor each; the decisions
// round-trip through the document.
TEST(Table2Generators, SeededUniqueNamesRoundTrip)
{
  auto tree = [](std::int64_t seed) {
    TreeCnnSpec spec = tiny_tree_cnn(3, 12, 6);
    spec.seed = seed;
    return generate_tree_cnn(spec, kRoofline);
  };
  auto gan = [](std::int64_t seed) {
    UnrolledGanSpec spec = tiny_gan(1, 1, 10, 6);
    spec.seed = seed;
    return generate_unrolled_gan(spec, kRoofline);
  };
  auto recycle = [](std::int64_t seed) {
    RecycleSpec spec = tiny_recycle(1, 1, 4, 6);
    spec.seed = seed;
    return generate_recycle(spec, kRoofline);
  };
  for (const auto& generate : std::vector<std::function<Trace(std::int64_t)>>{tree, gan, recycle}) {
    const Trace trace = generate(7);
    SCOPED_TRACE(trace.name);
    EXPECT_EQ(trace_to_json(trace).dump(), trace_to_json(generate(7)).dump());
    EXPECT_NE(trace.decisions, generate(8).decisions);
    ASSERT_EQ(trace.decisions.size(), 6u);
    EXPECT_EQ(ops_per_iteration(trace).size(), 6u);
    std::set<std::string> names;
    for (const Tensor& tensor : trace.tensors)
      EXPECT_TRUE(names.insert(tensor.name).second) << "tensor name '" << tensor.name << "' twice";
    std::map<TensorId, std::set<int>> used_in;
    for (const Op& op : trace.ops) {
      for (TensorId id : op.inputs)
        used_in[id].insert(op.iteration);
      for (TensorId id : op.outputs)
        used_in[id].insert(op.iteration);
    }
    for (const Tensor& tensor : trace.tensors) {
      const bool shared = tensor.kind == TensorKind::weight || tensor.kind == TensorKind::optimizer_state;
      if (!shared && !used_in[tensor.id].empty()) {
        EXPECT_EQ(used_in[tensor.id].size(), 1u) << tensor.name << " belongs to one iteration";
      }
      EXPECT_EQ(shared, tensor.name.rfind("it", 0) != 0) << tensor.name;
    }
    EXPECT_EQ(trace_from_text(trace_to_json(trace).dump(), "t").decisions, trace.decisions);
  }
}

TEST(Table2Generators, BadParametersAreLocated)
{
  EXPECT_THAT(error_of([] { generate_tree_cnn(tiny_tree_cnn(6, 5), kRoofline); }),
              HasSubstr("--max-leaves: max-leaves (5) must not be below min-leaves (6)"));
  EXPECT_THAT(error_of([] { generate_tree_cnn(tiny_tree_cnn(1, 5), kRoofline); }),
              HasSubstr("--min-leaves: must be at least 2, found 1"));
  EXPECT_THAT(error_of([] {
                TreeCnnSpec spec = tiny_tree_cnn(2, 5);
                spec.types = 0;
                generate_tree_cnn(spec, kRoofline);
              }),
              HasSubstr("--types: must be at least 1, found 0"));
  EXPECT_THAT(error_of([] { generate_unrolled_gan(tiny_gan(1, 0, 3), kRoofline); }),
              HasSubstr("--min-unroll: must be at least 1, found 0"));
  EXPECT_THAT(error_of([] { generate_unrolled_gan(tiny_gan(1, 4, 3), kRoofline); }),
              HasSubstr("--max-unroll: max-unroll (3) must not be below min-unroll (4)"));
  EXPECT_THAT(error_of([] { generate_recycle(tiny_recycle(1, 3, 2), kRoofline); }),
              HasSubstr("--max-recycles: max-recycles (2) must not be below min-recycles (3)"));
  EXPECT_THAT(error_of([] {
                RecycleSpec spec = tiny_recycle(1, 1, 2);
                spec.heads = 3;
                generate_recycle(spec, kRoofline);
              }),
              HasSubstr("--heads: msa-hidden (8) must be a multiple of heads (3)"));
  EXPECT_THAT(error_of([] {
                RecycleSpec spec = tiny_recycle(1, 1, 2);
                spec.crop_step = 0;
                generate_recycle(spec, kRoofline);
              }),
              HasSubstr("--crop-step: must be at least 1, found 0"));
}

// The registry builds each from its declared parameters (the common iterations/seed/dtype included) and passes
// the dtype's roofline.
TEST(Table2Generators, RegisteredWithTheirParameters)
{
  const GeneratorRegistry& registry = generator_registry();
  const std::map<std::string, nlohmann::json> small{
      {"tree-cnn", {{"iterations", 2}, {"min_leaves", 3}, {"max_leaves", 3}, {"channels", 4}, {"width", 2}}},
      {"unrolled-gan", {{"iterations", 2}, {"min_unroll", 2}, {"max_unroll", 2}, {"layers", 1}, {"hidden", 8}}},
      {"recycle", {{"iterations", 2}, {"min_recycles", 2}, {"max_recycles", 2}, {"blocks", 1}, {"max_crop", 64}}}};
  const std::map<std::string, std::size_t> ops{{"tree-cnn", 2 * (13 * 3 - 4)},
                                               {"unrolled-gan", 2 * (19 + 2 * 26)},
                                               {"recycle", 2 * (9 + 2 + 4 + 52 + 46)}};
  for (const auto& [name, values] : small) {
    SCOPED_TRACE(name);
    const GeneratorInfo& info = registry.get(name);
    nlohmann::json params = values;
    params["dtype"] = "fp16";
    std::string asked;
    const Trace trace = info.make(registry.complete_params(info, params), [&](const std::string& dtype) {
      asked = dtype;
      return kRoofline;
    });
    EXPECT_EQ(asked, "fp16");
    EXPECT_EQ(trace.ops.size(), ops.at(name));
    EXPECT_EQ(trace.decisions.size(), 2u);
  }
}

} // namespace
} // namespace memsim
