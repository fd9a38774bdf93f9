// The dynamic-network generators (var-lstm, treelstm, moe): seeded, one shared set of weights and Adam moments,
// per-iteration graphs whose op counts are worked out by hand below, and the decisions each iteration recorded.
#include "dynamic_specs.hpp"
#include "memsim/common/error.hpp"
#include "memsim/traces/decisions.hpp"
#include "memsim/traces/dynamic_generators.hpp"
#include "memsim/traces/generator_registry.hpp"
#include "test_traces.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <map>
#include <set>

namespace memsim {
namespace {

using test::ops_per_iteration;

using ::testing::HasSubstr;

const Roofline kRoofline{10e12, 1e12, 5e-6, "test-gpu"};

TreeLstmSpec tiny_tree(int min_leaves, int max_leaves, int iterations = 3)
{
  TreeLstmSpec spec;
  spec.iterations = iterations;
  spec.min_leaves = min_leaves;
  spec.max_leaves = max_leaves;
  spec.batch = 2;
  spec.hidden = 8;
  spec.vocab = 16;
  spec.classes = 3;
  return spec;
}

MoeSpec tiny_moe(int layers, int groups, int top_k, int iterations = 3)
{
  MoeSpec spec;
  spec.iterations = iterations;
  spec.layers = layers;
  spec.experts = 4;
  spec.top_k = top_k;
  spec.groups = groups;
  spec.group_tokens = 4;
  spec.hidden = 8;
  spec.ffn = 16;
  spec.classes = 5;
  return spec;
}

// MoE expert tensors ("l0.e3.up.w", "adam.m.l1.e0.down.w"): used only in the iterations that chose them.
bool is_expert(const std::string& name)
{
  for (std::size_t at = name.find(".e"); at != std::string::npos; at = name.find(".e", at + 1))
    if (at + 2 < name.size() && std::isdigit(static_cast<unsigned char>(name[at + 2])))
      return true;
  return false;
}

int ops_of_type(const Trace& trace, int iteration, const std::string& type)
{
  int count = 0;
  for (const Op& op : trace.ops)
    count += op.iteration == iteration && op.type == type ? 1 : 0;
  return count;
}

// var-LSTM, L steps: forward 4L + 2 (the embedding lookup; select, gates, cell, hidden per step; classifier), loss
// 1, backward 4L + 2, gradient sums L (gates feed cell and hidden) + (L - 1) (c_t feeds hidden_t and cell_t+1) +
// 3 (L - 1) (the embedded sequence, lstm.w and lstm.b are read by every step), Adam 4: 13 L + 5.
TEST(VarLstm, OpsPerIterationMatchTheHandCount)
{
  for (int length : {2, 3}) {
    const Trace trace = generate_var_lstm(test::tiny_var_lstm(length, length), kRoofline);
    for (auto [iteration, count] : ops_per_iteration(trace))
      EXPECT_EQ(count, 13 * length + 5) << "length " << length << ", iteration " << iteration;
  }
  const Trace two = generate_var_lstm(test::tiny_var_lstm(2, 2, 1), kRoofline);
  EXPECT_EQ(two.ops.size(), 31u);
  EXPECT_EQ(two.decisions, (std::vector<std::vector<std::string>>{{"step0", "step1"}}));
  // Lengths drawn from [2, 5]: each iteration's count follows its recorded length.
  const Trace mixed = generate_var_lstm(test::tiny_var_lstm(2, 5, 8), kRoofline);
  ASSERT_EQ(mixed.decisions.size(), 8u);
  std::set<std::size_t> lengths;
  for (auto [iteration, count] : ops_per_iteration(mixed)) {
    const std::size_t length = mixed.decisions[static_cast<std::size_t>(iteration)].size();
    lengths.insert(length);
    EXPECT_EQ(count, 13 * static_cast<int>(length) + 5);
    EXPECT_EQ(ops_of_type(mixed, iteration, "lstm_gates"), static_cast<int>(length));
  }
  EXPECT_GT(lengths.size(), 1u) << "eight draws from [2, 5] all gave the same length";
}

// Tree-LSTM over n leaves: forward 1 + n + 3 (n - 1) + 1 (lookup, a select per leaf, a cell per internal node,
// classifier), loss 1, backward the same, gradient sums (n - 1) gates + (n - 2) non-root cell states + (n - 1) the
// embedded sentence + 2 (n - 2) tree.w/tree.b, Adam 4: 13 n - 5 (34 for 3 leaves).
TEST(TreeLstm, AThreeLeafTreeHasTwoCells)
{
  const Trace trace = generate_tree_lstm(tiny_tree(3, 3), kRoofline);
  ASSERT_EQ(trace.decisions.size(), 3u);
  for (auto [iteration, count] : ops_per_iteration(trace)) {
    EXPECT_EQ(count, 34);
    EXPECT_EQ(ops_of_type(trace, iteration, "tree_lstm_gates"), 2);
    EXPECT_EQ(ops_of_type(trace, iteration, "select"), 3);
    EXPECT_EQ(ops_of_type(trace, iteration, "embedding"), 1);
    const auto& nodes = trace.decisions[static_cast<std::size_t>(iteration)];
    ASSERT_EQ(nodes.size(), 2u);
    EXPECT_EQ(nodes[1], "node[0,3)"); // the root, merged last
    EXPECT_TRUE(nodes[0] == "node[0,2)" || nodes[0] == "node[1,3)") << nodes[0];
  }
  for (int leaves = 2; leaves <= 6; ++leaves)
    EXPECT_EQ(generate_tree_lstm(tiny_tree(leaves, leaves, 1), kRoofline).ops.size(),
              static_cast<std::size_t>(13 * leaves - 5));
}

// The merge order follows the seed's grammar plus shape_noise of per-iteration noise: without noise every iteration of
// one length builds the same tree (the grammar decides); with all noise the trees differ; the grammar does not depend
// on the iterations drawn before it.
TEST(TreeLstm, ShapeNoiseMixesAFixedGrammarWithPerIterationChance)
{
  TreeLstmSpec fixed = tiny_tree(12, 12, 6);
  fixed.shape_noise = 0;
  const Trace grammar_only = generate_tree_lstm(fixed, kRoofline);
  for (const auto& nodes : grammar_only.decisions)
    EXPECT_EQ(nodes, grammar_only.decisions.front());
  TreeLstmSpec noisy = fixed;
  noisy.shape_noise = 1;
  const Trace random = generate_tree_lstm(noisy, kRoofline);
  std::set<std::vector<std::string>> shapes(random.decisions.begin(), random.decisions.end());
  EXPECT_GT(shapes.size(), 1u);
  TreeLstmSpec longer = fixed;
  longer.iterations = 1;
  EXPECT_EQ(generate_tree_lstm(longer, kRoofline).decisions.front(), grammar_only.decisions.front());
  TreeLstmSpec bad = fixed;
  bad.shape_noise = 1.5;
  EXPECT_THROW(generate_tree_lstm(bad, kRoofline), InputError);
}

// One layer, one group, top-2: forward router + 2 x (up, down) + combine + classifier = 7, loss 1, backward 7, one
// gradient sum (the router scores feed both experts), Adam 6 (router, 2 x 2 expert weights, classifier): 22.
TEST(Moe, OnlyTheChosenExpertsRun)
{
  const Trace trace = generate_moe(tiny_moe(1, 1, 2, 4), kRoofline);
  ASSERT_EQ(trace.decisions.size(), 4u);
  for (auto [iteration, count] : ops_per_iteration(trace)) {
    EXPECT_EQ(count, 22);
    const auto& chosen = trace.decisions[static_cast<std::size_t>(iteration)];
    ASSERT_EQ(chosen.size(), 2u);
    EXPECT_NE(chosen[0], chosen[1]);
    std::set<std::string> read_experts;
    for (const Op& op : trace.ops)
      if (op.iteration == iteration)
        for (TensorId id : op.inputs)
          if (trace.tensor(id).kind == TensorKind::weight && trace.tensor(id).name.find(".up.w") != std::string::npos)
            read_experts.insert(trace.tensor(id).name);
    std::set<std::string> expected;
    for (const std::string& choice : chosen) // "l0.g0.e3" -> "l0.e3.up.w"
      expected.insert("l0." + choice.substr(choice.rfind('.') + 1) + ".up.w");
    EXPECT_EQ(read_experts, expected);
  }
  // Two groups picking experts independently, two layers: one decision per group, layer and k.
  const Trace wide = generate_moe(tiny_moe(2, 3, 2), kRoofline);
  for (const auto& chosen : wide.decisions)
    EXPECT_EQ(chosen.size(), 2u * 3u * 2u);
}

// Every generator: the same seed gives byte-identical JSON, another seed other decisions; one tensor per weight and
// Adam moment, read in every iteration (MoE: the router and classifier), and unique names.
TEST(DynamicGenerators, SeededSharedWeightsUniqueNames)
{
  auto lstm = [](std::int64_t seed) {
    VarLstmSpec spec = test::tiny_var_lstm(1, 40, 6);
    spec.seed = seed;
    return generate_var_lstm(spec, kRoofline);
  };
  auto tree = [](std::int64_t seed) {
    TreeLstmSpec spec = tiny_tree(4, 20, 6);
    spec.seed = seed;
    return generate_tree_lstm(spec, kRoofline);
  };
  auto moe = [](std::int64_t seed) {
    MoeSpec spec = tiny_moe(2, 4, 1, 6);
    spec.seed = seed;
    return generate_moe(spec, kRoofline);
  };
  for (const auto& generate : std::vector<std::function<Trace(std::int64_t)>>{lstm, tree, moe}) {
    const Trace trace = generate(7);
    SCOPED_TRACE(trace.name);
    EXPECT_EQ(trace_to_json(trace).dump(), trace_to_json(generate(7)).dump());
    EXPECT_NE(trace.decisions, generate(8).decisions);
    ASSERT_EQ(trace.decisions.size(), 6u);
    EXPECT_EQ(ops_per_iteration(trace).size(), 6u);
    std::set<std::string> names;
    for (const Tensor& tensor : trace.tensors)
      EXPECT_TRUE(names.insert(tensor.name).second) << "tensor name '" << tensor.name << "' twice";
    // Each weight and each moment is one tensor; the shared ones are read in every iteration.
    std::map<TensorId, std::set<int>> read_in;
    std::map<TensorId, int> adam_reads;
    for (const Op& op : trace.ops)
      for (TensorId id : op.inputs) {
        read_in[id].insert(op.iteration);
        if (trace.tensor(id).kind == TensorKind::optimizer_state)
          ++adam_reads[id];
      }
    for (const Tensor& tensor : trace.tensors) {
      const bool always_used = !is_expert(tensor.name);
      if (tensor.kind == TensorKind::weight && always_used) {
        EXPECT_EQ(read_in[tensor.id].size(), 6u) << tensor.name;
      }
      if (tensor.kind == TensorKind::optimizer_state && always_used) {
        EXPECT_EQ(adam_reads[tensor.id], 6) << tensor.name << ": one Adam update per iteration";
      }
      if (tensor.kind == TensorKind::activation || tensor.kind == TensorKind::weight_grad ||
          tensor.kind == TensorKind::gradient) {
        EXPECT_EQ(read_in[tensor.id].size(), 1u) << tensor.name << " belongs to one iteration";
      }
    }
    // The document round-trips with its decisions.
    EXPECT_EQ(trace_from_text(trace_to_json(trace).dump(), "t").decisions, trace.decisions);
  }
}

TEST(DynamicGenerators, RegisteredWithTheirParameters)
{
  const GeneratorRegistry& registry = generator_registry();
  const GeneratorInfo& info = registry.get("var-lstm");
  std::string asked;
  const Trace trace = info.make(registry.complete_params(info, {{"iterations", 2},
                                                                {"min_len", 3},
                                                                {"max_len", 3},
                                                                {"batch", 2},
                                                                {"hidden", 8},
                                                                {"embed", 4},
                                                                {"vocab", 16},
                                                                {"classes", 3},
                                                                {"dtype", "fp16"}}),
                                [&](const std::string& dtype) {
                                  asked = dtype;
                                  return kRoofline;
                                });
  EXPECT_EQ(asked, "fp16");
  EXPECT_EQ(trace.ops.size(), 2u * (13 * 3 + 5));
  // Times from the roofline the registry passes: the largest of flops / peak and bytes / bandwidth, plus launch.
  for (const Op& op : trace.ops)
    EXPECT_DOUBLE_EQ(op.time_s, std::max(*op.flops / 10e12, *op.bytes_accessed / 1e12) + 5e-6) << op.name;
  for (const char* name : {"treelstm", "moe"})
    EXPECT_NO_THROW(registry.get(name).make(registry.complete_params(registry.get(name), {{"iterations", 2}}),
                                            [](const std::string&) { return kRoofline; }));
  EXPECT_THROW(generate_moe(tiny_moe(1, 1, 5), kRoofline), InputError); // top-k above the 4 experts
  EXPECT_THROW(generate_var_lstm(test::tiny_var_lstm(4, 3), kRoofline), InputError);
}

// var-BERT's iteration k is the transformer generator's trace at the drawn length: the same op types and times in
// the same order (names carry the iteration prefix), the weights shared.
TEST(VarBert, EachIterationIsTheTransformerAtItsLength)
{
  VarBertSpec spec;
  spec.iterations = 4;
  spec.min_seq = 3;
  spec.max_seq = 9;
  spec.layers = 2;
  spec.hidden = 8;
  spec.heads = 2;
  spec.batch = 2;
  spec.vocab = 11;
  const Trace trace = generate_var_bert(spec, kRoofline);
  ASSERT_EQ(trace.decisions.size(), 4u);
  std::size_t next = 0;
  for (int k = 0; k < spec.iterations; ++k) {
    const auto seq = static_cast<int>(trace.decisions[static_cast<std::size_t>(k)].size());
    EXPECT_GE(seq, 3);
    EXPECT_LE(seq, 9);
    const Trace single =
        generate_transformer(TransformerSpec{spec.layers, spec.hidden, spec.heads, seq, spec.batch, spec.vocab, "fp32"},
                             kRoofline);
    for (const Op& op : single.ops) {
      ASSERT_LT(next, trace.ops.size());
      const Op& dynamic = trace.ops[next++];
      EXPECT_EQ(dynamic.iteration, k);
      EXPECT_EQ(dynamic.name, fmt::format("it{}.{}", k, op.name));
      EXPECT_EQ(dynamic.type, op.type);
      EXPECT_DOUBLE_EQ(dynamic.time_s, op.time_s) << op.name;
    }
  }
  EXPECT_EQ(next, trace.ops.size());
  int weights = 0;
  for (const Tensor& tensor : trace.tensors)
    weights += tensor.kind == TensorKind::weight ? 1 : 0;
  EXPECT_EQ(weights, 2 + 6 * spec.layers); // embedding, LM head, six per layer: once for all iterations
}

TEST(Decisions, JaccardDistanceOnHandMadeSets)
{
  EXPECT_DOUBLE_EQ(jaccard_distance({"a", "b", "c"}, {"b", "c", "d"}), 0.5); // 1 - 2/4
  EXPECT_DOUBLE_EQ(jaccard_distance({"a"}, {"b"}), 1.0);
  EXPECT_DOUBLE_EQ(jaccard_distance({}, {}), 0.0);
  EXPECT_DOUBLE_EQ(jaccard_distance({"b", "a"}, {"a", "b"}), 0.0);

  Trace trace;
  trace.decisions = {{"a", "b"}, {"a", "b"}, {"c"}, {"a", "b", "c", "d", "e"}};
  const DecisionSummary summary = summarize_decisions(trace, "hand");
  EXPECT_EQ(summary.iterations, 4u);
  EXPECT_EQ(summary.to_first, (std::vector<double>{0.0, 0.0, 1.0, 0.6}));
  ASSERT_EQ(summary.consecutive.size(), 3u);
  EXPECT_DOUBLE_EQ(summary.consecutive[0], 0.0);
  EXPECT_DOUBLE_EQ(summary.consecutive[1], 1.0);
  EXPECT_DOUBLE_EQ(summary.consecutive[2], 0.8); // 1 - 1/5
  EXPECT_DOUBLE_EQ(summary.mean_to_first, (0.0 + 1.0 + 0.6) / 3);
  EXPECT_DOUBLE_EQ(summary.max_to_first, 1.0);
  EXPECT_DOUBLE_EQ(summary.mean_consecutive, 0.6);
  EXPECT_DOUBLE_EQ(summary.max_consecutive, 1.0);
  // Iterations 1..3 against 0: 0 in [0,0.2], 1 in (0.8,1], 0.6 in (0.4,0.6].
  EXPECT_DOUBLE_EQ(summary.table_i_shares[0], 1.0 / 3);
  EXPECT_DOUBLE_EQ(summary.table_i_shares[1], 0.0);
  EXPECT_DOUBLE_EQ(summary.table_i_shares[2], 1.0 / 3);
  EXPECT_DOUBLE_EQ(summary.table_i_shares[3], 0.0);
  EXPECT_DOUBLE_EQ(summary.table_i_shares[4], 1.0 / 3);
  EXPECT_THROW(summarize_decisions(Trace{}, "none"), InputError);
}

// For var-LSTM the decisions are the steps taken, so two iterations' distance is 1 - shorter / longer.
TEST(Decisions, VarLstmDistanceIsOneMinusTheLengthRatio)
{
  const Trace trace = generate_var_lstm(test::tiny_var_lstm(1, 30, 5), kRoofline);
  const DecisionSummary summary = summarize_decisions(trace, trace.name);
  const double first = static_cast<double>(trace.decisions[0].size());
  for (std::size_t k = 0; k < trace.decisions.size(); ++k) {
    const double length = static_cast<double>(trace.decisions[k].size());
    EXPECT_DOUBLE_EQ(summary.to_first[k], 1.0 - std::min(first, length) / std::max(first, length));
  }
}

TEST(Decisions, TheLoaderChecksThem)
{
  const std::string head = R"({"format": "memsim-trace", "version": 1, "name": "t",
    "tensors": [{"id": 0, "name": "x", "bytes": 8, "kind": "input"}, {"id": 1, "name": "a", "bytes": 8,
                "kind": "activation"}, {"id": 2, "name": "b", "bytes": 8, "kind": "activation"}],
    "ops": [{"id": 0, "phase": "forward", "inputs": [0], "outputs": [1], "time_s": 0.001},
            {"id": 1, "phase": "forward", "inputs": [0], "outputs": [2], "time_s": 0.001, "iteration": 1}],)";
  EXPECT_EQ(trace_from_text(head + R"("decisions": [["x"], []]})", "t").decisions,
            (std::vector<std::vector<std::string>>{{"x"}, {}}));
  auto error = [&](const std::string& decisions) {
    try {
      trace_from_text(head + R"("decisions": )" + decisions + "}", "t.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error(R"([["x"]])"), HasSubstr("t.json: at /decisions: 1 entries, but the ops run 2 iterations"));
  EXPECT_THAT(error(R"([["x"], ["y", "y"]])"),
              HasSubstr("at /decisions/1/1: decision 'y' appears twice in iteration 1"));
  EXPECT_THAT(error(R"([["x"], [""]])"), HasSubstr("at /decisions/1/0: a decision must not be empty"));
  EXPECT_THAT(error(R"([["x"], [3]])"), HasSubstr("/decisions/1/0"));
}

} // namespace
} // namespace memsim
