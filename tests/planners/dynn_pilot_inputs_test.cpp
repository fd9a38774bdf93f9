// DyNN-Offload's pilot inputs and labels (spec dynn-offload.md §1.3-§1.6): the idiom table, op signatures (Fig. 3's
// matmul worked out), the fixed-length block labels of the partition DP and their mapping back to op boundaries,
// and the samples of a small var-LSTM workload.
#include "dynamic_specs.hpp"

#include "test_machines.hpp"
#include "test_traces.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/dynn/pilot_inputs.hpp"
#include "memsim/traces/dynamic_generators.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace memsim::dynn {
namespace {

TEST(DynnIdioms, TableClassesAndBackward)
{
  EXPECT_EQ(idiom_counts("matmul"), (IdiomCounts{1, 0, 0, 1, 1, 0})); // Fig. 3
  EXPECT_EQ(idiom_counts("linear_backward"), (IdiomCounts{2, 0, 0, 2, 2, 0}));
  EXPECT_EQ(idiom_counts("relu"), (IdiomCounts{0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(idiom_counts("sigmoid_backward"), (IdiomCounts{0, 0, 0, 1, 1, 0})); // Table V
  EXPECT_EQ(idiom_counts("conv2d"), (IdiomCounts{0, 1, 0, 1, 1, 2}));
  EXPECT_EQ(idiom_counts("maxpool2d"), (IdiomCounts{0, 0, 0, 1, 0, 1}));
  EXPECT_EQ(idiom_counts("embedding_backward"), (IdiomCounts{0, 1, 1, 1, 1, 0}));
  EXPECT_EQ(idiom_counts("threshold_backward"), (IdiomCounts{0, 0, 0, 0, 1, 0}));
  EXPECT_FALSE(idiom_counts("frobnicate").has_value());
  EXPECT_FALSE(idiom_counts("frobnicate_backward").has_value());
}

// A trace of shaped tensors: a (2 x 3), b (3 x 4), an image batch (8 x 3 x 32 x 32) and a kernel (16 x 3 x 3 x 3).
Trace shaped_trace()
{
  Trace trace;
  trace.name = "shaped";
  trace.source = TraceSource{"test", "test-gpu", "fp32", 8, ""};
  trace.tensors = {Tensor{0, "a", 24, TensorKind::input, {}, {2, 3}, {}},
                   Tensor{1, "b", 48, TensorKind::weight, {}, {3, 4}, {}},
                   Tensor{2, "ab", 32, TensorKind::activation, {}, {2, 4}, {}},
                   Tensor{3, "image", 8 * 3 * 32 * 32 * 4, TensorKind::input, {}, {8, 3, 32, 32}, {}},
                   Tensor{4, "kernel", 16 * 27 * 4, TensorKind::weight, {}, {16, 3, 3, 3}, {}},
                   Tensor{5, "feature", 8 * 16 * 30 * 30 * 4, TensorKind::activation, {}, {8, 16, 30, 30}, {}}};
  Op matmul;
  matmul.id = 0;
  matmul.name = "mm";
  matmul.type = "matmul";
  matmul.inputs = {0, 1};
  matmul.outputs = {2};
  Op conv = matmul;
  conv.id = 1;
  conv.name = "conv";
  conv.type = "conv2d";
  conv.inputs = {3, 4};
  conv.outputs = {5};
  trace.ops = {matmul, conv};
  validate_trace(trace, trace.name);
  return trace;
}

TEST(DynnIdioms, SignatureOfFigure3AndFoldedAxes)
{
  const Trace trace = shaped_trace();
  // Fig. 3: matmul(a, b) = [1, 0, 0, 1, 1, 0, ar + br, ac + bc, 0].
  const SignedOp matmul = op_signature(trace, trace.op(0));
  EXPECT_TRUE(matmul.known_type);
  EXPECT_EQ(matmul.signature, (OpSignature{1, 0, 0, 1, 1, 0, 5, 7, 0}));
  // Axes past the third fold into it: 32 x 32 + 3 x 3.
  EXPECT_EQ(op_signature(trace, trace.op(1)).signature, (OpSignature{0, 1, 0, 1, 1, 2, 24, 6, 1033}));
}

TEST(DynnIdioms, UnshapedFallbackAndUnknownTypes)
{
  // hand_trace: x and a0..a2 of 1 MB (250,000 fp32 elements), no shapes; ops "linear" x -> a0 -> a1 -> a2.
  Trace trace = test::hand_trace({1000000, 1000000, 1000000}, {{{0}, {1}}, {{1}, {2}}, {{2}, {3}}});
  trace.ops[2].type = "mystery";
  const FeatureMatrix matrix = feature_matrix(trace, {0, 1, 2});
  ASSERT_EQ(matrix.rows.size(), 3u);
  EXPECT_EQ(matrix.rows[0], (OpSignature{1, 0, 0, 1, 1, 0, 0.25, 0.25, 1}));
  EXPECT_EQ(matrix.rows[2], (OpSignature{0, 0, 0, 0, 0, 0, 0.25, 0.25, 1}));
  EXPECT_EQ(matrix.unknown_types, 1u);
}

// Every op type the seven dynamic generators emit has an idiom row: an unknown type would reach the pilot as an
// all-zero signature, indistinguishable from a view.
TEST(DynnIdioms, EveryDynamicGeneratorsOpTypeIsKnown)
{
  const Roofline roofline{10e12, 1e12, 5e-6, "test-gpu"};
  auto two_iterations = [](auto spec) {
    spec.iterations = 2;
    return spec;
  };
  const std::vector<std::pair<std::string, Trace>> traces{
      {"var-lstm", generate_var_lstm(two_iterations(VarLstmSpec{}), roofline)},
      {"treelstm", generate_tree_lstm(two_iterations(TreeLstmSpec{}), roofline)},
      {"moe", generate_moe(two_iterations(MoeSpec{}), roofline)},
      {"var-bert", generate_var_bert(two_iterations(VarBertSpec{}), roofline)},
      {"tree-cnn", generate_tree_cnn(two_iterations(TreeCnnSpec{}), roofline)},
      {"unrolled-gan", generate_unrolled_gan(two_iterations(UnrolledGanSpec{}), roofline)},
      {"recycle", generate_recycle(two_iterations(RecycleSpec{}), roofline)}};
  for (const auto& [kind, trace] : traces) {
    std::set<std::string> unknown;
    for (const Op& op : trace.ops)
      if (!idiom_counts(op.type))
        unknown.insert(op.type);
    EXPECT_TRUE(unknown.empty()) << kind << " emits op types without an idiom row: "
                                 << fmt::format("{}", fmt::join(unknown, ", "));
    std::vector<OpId> all(trace.ops.size());
    std::iota(all.begin(), all.end(), OpId{0});
    EXPECT_EQ(feature_matrix(trace, all).unknown_types, 0u) << kind;
  }
}

TEST(DynnLabels, BlockVectorsAndTheFixedLengthLabel)
{
  Trace trace = test::hand_trace({1000000, 1000000, 1000000}, {{{0}, {1}}, {{1}, {2}}, {{2}, {3}}});
  const FeatureMatrix matrix = feature_matrix(trace, {0, 1, 2});
  const std::vector<BlockVector> blocks = block_vectors(matrix, {2, 3});
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0], (BlockVector{2, 2, 0, 0, 2, 2, 0, 0.5, 0.5, 2}));
  EXPECT_EQ(blocks[1], (BlockVector{1, 1, 0, 0, 1, 1, 0, 0.25, 0.25, 1}));
  const std::vector<double> label = label_vector(blocks, 3);
  ASSERT_EQ(label.size(), 30u);
  EXPECT_EQ(label[10], 1);
  EXPECT_EQ(label[20], 0);
  EXPECT_THROW((void)label_vector(blocks, 1), InputError);
  EXPECT_EQ(partition_from_label(label, 3), (Partition{2, 3}));
  EXPECT_FALSE(partition_from_label(label, 4).has_value()); // the counts cover 3 ops, not 4
  std::vector<double> near = label;
  near[0] = 2.4;    // rounds to 2
  near[7] += 0.001; // a dimension sum within 1 %
  EXPECT_TRUE(label_matches(near, label, 0.01));
  EXPECT_EQ(partition_from_label(near, 3), (Partition{2, 3}));
  near[1] = 2.6; // an idiom count off by one after rounding
  EXPECT_FALSE(label_matches(near, label, 0.01));
}

// A four-op chain over 1 MB tensors on a 1 GB/s link: with 2 MB per buffer no two ops fit one block; with 100 MB
// a single block is cheapest (only x moves, exposed either way; ties go to fewer blocks).
TEST(DynnLabels, IterationLabelsAreTheDpBlocks)
{
  const Trace trace =
      test::hand_trace({1000000, 1000000, 1000000, 1000000}, {{{0}, {1}}, {{1}, {2}}, {{2}, {3}}, {{3}, {4}}});
  const Machine machine = test::one_gpu_machine();
  const std::vector<IterationLabel> tight = iteration_labels(trace, machine, 2000000);
  ASSERT_EQ(tight.size(), 1u);
  EXPECT_EQ(tight[0].partition, (Partition{1, 2, 3, 4}));
  EXPECT_EQ(tight[0].blocks[3], (BlockVector{1, 1, 0, 0, 1, 1, 0, 0.25, 0.25, 1}));
  const std::vector<IterationLabel> roomy = iteration_labels(trace, machine, 100000000);
  EXPECT_EQ(roomy[0].partition, (Partition{4}));
  EXPECT_EQ(roomy[0].blocks[0], (BlockVector{4, 4, 0, 0, 4, 4, 0, 1, 1, 4}));
  EXPECT_THROW((void)iteration_labels(trace, machine, 1000000), Infeasible);
}

VarLstmSpec tiny_lstm()
{
  VarLstmSpec spec = test::tiny_var_lstm(2, 5, 4);
  spec.vocab = 10; // the samples below were worked out with 10 words
  return spec;
}

TEST(DynnPilotInputs, VarLstmSamples)
{
  const Trace trace = generate_var_lstm(tiny_lstm(), Roofline{10e12, 1e12, 5e-6, "test-gpu"});
  const PilotShape shape{8, 8};
  const std::vector<PilotSample> samples =
      pilot_samples(trace, test::one_gpu_machine(), 1ull << 30, NetworkType::lstm, shape);
  ASSERT_EQ(samples.size(), 4u);
  const std::map<int, int> ops = test::ops_per_iteration(trace);
  for (const PilotSample& sample : samples) {
    SCOPED_TRACE(sample.iteration);
    ASSERT_EQ(sample.input.size(), shape.input_size());
    ASSERT_EQ(sample.label.size(), shape.label_size());
    EXPECT_EQ(sample.op_count, static_cast<std::size_t>(ops.at(sample.iteration)));
    EXPECT_EQ(partition_from_label(sample.label, sample.op_count), sample.partition);
    // tokens (2 x L) and labels (2): [elements, dim 0, dim 1, rest]; the embedding's output (2 x L x 4).
    const double length = sample.input[2];
    EXPECT_GE(length, 2);
    EXPECT_LE(length, 5);
    const std::vector<double> sample_part(sample.input.begin(), sample.input.begin() + kSampleFeatures);
    EXPECT_EQ(sample_part, (std::vector<double>{2 * length, 2, length, 0, 2, 2, 0,          0, 0,      0,
                                                0,          0, 0,      0, 0, 0, 8 * length, 2, length, 4}));
    // The static architecture: embedding, select, lstm_gates, lstm_cell, lstm_hidden, linear; then zero rows.
    const std::vector<double> architecture(sample.input.begin() + kSampleFeatures, sample.input.end());
    const std::vector<double> expected{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0,
                                       0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0};
    EXPECT_EQ(std::vector<double>(architecture.begin(), architecture.begin() + 36), expected);
    EXPECT_EQ(std::vector<double>(architecture.begin() + 36, architecture.end()), std::vector<double>(12, 0.0));
  }
  EXPECT_EQ(network_type_from_string("transformer"), NetworkType::transformer);
  EXPECT_EQ(to_string(NetworkType::cnn), "cnn");
  EXPECT_FALSE(network_type_from_string("gnn").has_value());
}

} // namespace
} // namespace memsim::dynn
