// Layer profiles from memsim traces (traces/src/LAYER_PROFILE.md, "Profiles from memsim traces") against values
// worked out by hand on a 3-layer chain with a skip connection, at batch sizes 2 and 4.
#include "test_files.hpp"
#include "trace_builder.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/estimator.hpp"
#include "memsim/planners/harmony/profile_from_traces.hpp"
#include "memsim/planners/harmony/search.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace memsim::harmony {
namespace {

// At batch b (bytes in units of b are activations):
//   tensors x (input, 10b), y (labels, 1b), w0 100, w1 200, bn 7 (weight nobody updates: a buffer), w2 300,
//   t0 5b, a0 20b, a1 30b, a2 40b, g2 40b, g1 30b, g0s 20b (the skip's gradient), g0 20b, dw0..2, s0..2 (states).
//   layer 0: f0a [x,w0]->t0 (workspace 3), f0b [t0]->a0
//   layer 1: f1 [a0,w1,bn]->a1 (workspace 50)
//   layer 2: f2 [a1,a0,w2]->a2 (a0 skips layer 1), loss [a2,y]->g2
//   backward: b2 [g2,a1,a0,w2]->dw2,g1,g0s; b1 [g1,a0,w1]->dw1,g0; b0 [g0,g0s,t0,x,w0]->dw0
//   update: u0 [w0,dw0,s0], u1 [w1,dw1,s1], u2 [w2,dw2,s2], 1, 2, 3 ms.
// An op of base time c takes c*b + 1 ms: f0a 1, f0b 2, f1 3, f2 4, loss 1, b2 8, b1 6, b0 5.
Trace skip_chain(int b)
{
  const auto n = static_cast<std::uint64_t>(b);
  test::TraceBuilder build("skipchain", b);
  auto op = [&](const std::string& name, Phase phase, int layer, std::vector<TensorId> in, std::vector<TensorId> out,
                double time_ms, std::uint64_t workspace = 0) {
    Op& added = build.op(name, name.substr(0, name.find(':')), phase, std::move(in), std::move(out), time_ms * 1e-3);
    added.layer = layer;
    added.workspace_bytes = workspace;
  };
  const TensorId x = build.tensor("x", 10 * n, TensorKind::input);
  const TensorId y = build.tensor("y", n, TensorKind::input);
  const TensorId w0 = build.tensor("w0", 100, TensorKind::weight);
  const TensorId w1 = build.tensor("w1", 200, TensorKind::weight);
  const TensorId bn = build.tensor("bn", 7, TensorKind::weight);
  const TensorId w2 = build.tensor("w2", 300, TensorKind::weight);
  const TensorId t0 = build.tensor("t0", 5 * n, TensorKind::activation);
  const TensorId a0 = build.tensor("a0", 20 * n, TensorKind::activation);
  const TensorId a1 = build.tensor("a1", 30 * n, TensorKind::activation);
  const TensorId a2 = build.tensor("a2", 40 * n, TensorKind::activation);
  const TensorId g2 = build.tensor("g2", 40 * n, TensorKind::gradient);
  const TensorId g1 = build.tensor("g1", 30 * n, TensorKind::gradient);
  const TensorId g0s = build.tensor("g0s", 20 * n, TensorKind::gradient);
  const TensorId g0 = build.tensor("g0", 20 * n, TensorKind::gradient);
  const TensorId dw0 = build.tensor("dw0", 100, TensorKind::weight_grad);
  const TensorId dw1 = build.tensor("dw1", 200, TensorKind::weight_grad);
  const TensorId dw2 = build.tensor("dw2", 300, TensorKind::weight_grad);
  const TensorId s0 = build.tensor("s0", 100, TensorKind::optimizer_state);
  const TensorId s1 = build.tensor("s1", 200, TensorKind::optimizer_state);
  const TensorId s2 = build.tensor("s2", 300, TensorKind::optimizer_state);
  const auto ms = [b](double base) { return base * b + 1; };
  op("fa:conv", Phase::forward, 0, {x, w0}, {t0}, ms(1), 3);
  op("fb:relu", Phase::forward, 0, {t0}, {a0}, ms(2));
  op("f1:linear", Phase::forward, 1, {a0, w1, bn}, {a1}, ms(3), 50);
  op("f2:add", Phase::forward, 2, {a1, a0, w2}, {a2}, ms(4));
  op("loss:nll", Phase::loss, 2, {a2, y}, {g2}, ms(1));
  op("b2:add_backward", Phase::backward, 2, {g2, a1, a0, w2}, {dw2, g1, g0s}, ms(8));
  op("b1:linear_backward", Phase::backward, 1, {g1, a0, w1}, {dw1, g0}, ms(6));
  op("b0:conv_backward", Phase::backward, 0, {g0, g0s, t0, x, w0}, {dw0}, ms(5));
  op("u0:sgd", Phase::update, 0, {w0, dw0, s0}, {}, 1);
  op("u1:sgd", Phase::update, 1, {w1, dw1, s1}, {}, 2);
  op("u2:sgd", Phase::update, 2, {w2, dw2, s2}, {}, 3);
  validate_trace(build.trace, build.trace.name);
  return build.trace;
}

// Batch 4 first: the profiler orders the sizes itself.
std::vector<SourcedTrace> two_batches() { return {{"b4.json", skip_chain(4)}, {"b2.json", skip_chain(2)}}; }

TEST(HarmonyProfileFromTraces, WorkedOutChainWithSkipConnection)
{
  const LayerProfile profile = layer_profile_from_traces(two_batches());
  EXPECT_EQ(profile.model, "skipchain");
  EXPECT_EQ(profile.source, "memsim traces b2.json, b4.json (test-gpu, fp32)");
  ASSERT_EQ(profile.num_layers(), 3u);
  EXPECT_EQ(profile.sampled_forward, (std::vector<int>{2, 4}));
  EXPECT_EQ(profile.sampled_backward, (std::vector<int>{2, 4}));
  EXPECT_EQ(profile.layers[0].name, "0 (fa)");
  EXPECT_EQ(profile.layers[2].name, "2 (f2)");
  // Parameters are the weights an update op touches; bn is a buffer of layer 1, its first reader.
  EXPECT_EQ(profile.layers[0].weight_bytes, 100u);
  EXPECT_EQ(profile.layers[1].weight_bytes, 200u);
  EXPECT_EQ(profile.layers[1].buffer_bytes, 7u);
  EXPECT_EQ(profile.layers[2].weight_bytes, 300u);
  EXPECT_EQ(profile.layers[0].buffer_bytes + profile.layers[2].buffer_bytes, 0u);
  EXPECT_EQ(profile.layers[2].optimizer_state_bytes, 300u);
  EXPECT_DOUBLE_EQ(profile.layers[1].cpu_update_s, 0.002); // the recorded time without a machine
  // X: the data (x and the labels y, read by the loss) enters layer 0; y and a0 cross into layer 1; y, a0 and a1
  // into layer 2 (a0 skips layer 1 and still crosses the boundary 1|2).
  EXPECT_EQ(profile.layers[0].input_bytes_per_sample, 11u);
  EXPECT_EQ(profile.layers[1].input_bytes_per_sample, 21u);
  EXPECT_EQ(profile.layers[2].input_bytes_per_sample, 51u);
  const ProfiledMicrobatch& at2 = profile.microbatches.at(2);
  const ProfiledMicrobatch& at4 = profile.microbatches.at(4);
  EXPECT_EQ(at4.input_bytes, (std::vector<std::uint64_t>{44, 84, 204}));
  // Forward: layer 0 = fa + fb = 3b + 2 ms, layer 1 = 3b + 1, layer 2 = f2 + loss = 5b + 2.
  const std::vector<double> forward2{0.008, 0.007, 0.012};
  const std::vector<double> backward4{0.035, 0.038, 0.055}; // + b0 5b+1, b1 6b+1, b2 8b+1
  for (std::size_t l = 0; l < 3; ++l) {
    EXPECT_NEAR(at2.forward_time_s[l], forward2[l], 1e-12) << l;
    EXPECT_NEAR(at4.backward_time_s[l], backward4[l], 1e-12) << l;
  }
  // Forward peaks (b = 2, 4): layer 0: X + w0 + t0 + a0 = 36b + 100 (t0 freed after fb; a0 enters layer 1);
  // layer 1: X + w1 + bn + a1 + workspace 50 = 51b + 257; layer 2: X + w2 + a2 + g2 = 131b + 300.
  EXPECT_EQ(at2.forward_peak_bytes, (std::vector<std::int64_t>{172, 359, 562}));
  EXPECT_EQ(at4.forward_peak_bytes, (std::vector<std::int64_t>{244, 461, 824}));
  // Backward peaks: layer 0: X + w0 + incoming g0, g0s + t0 (kept for b0) + a0 + dw0 = 76b + 200; layer 1:
  // X + w1 + bn + g1 + a1 + dw1 + g0 = 101b + 407; layer 2: X + w2 + a2 freed after the loss, g2, then
  // dw2 + g1 + g0s = 141b + 600.
  EXPECT_EQ(at2.backward_peak_bytes, (std::vector<std::int64_t>{352, 609, 882}));
  EXPECT_EQ(at4.backward_peak_bytes, (std::vector<std::int64_t>{504, 811, 1164}));
  // u = 3 was not sampled: LayerProfile's rules interpolate times and peaks, and scale X.
  EXPECT_NEAR(profile.time_s(LayerPass::forward, 3, 0), 0.011, 1e-12);
  EXPECT_NEAR(profile.time_s(LayerPass::backward, 3, 2), 0.042, 1e-12);
  EXPECT_EQ(profile.peak_bytes(LayerPass::forward, 3, 1), 410);
  EXPECT_EQ(profile.peak_bytes(LayerPass::backward, 3, 2), 1023);
  EXPECT_EQ(profile.input_bytes(3, 2), 153u);
  EXPECT_THROW((void)profile.time_s(LayerPass::forward, 5, 0), InputError);
}

TEST(HarmonyProfileFromTraces, HostUpdateTimeFromOptions)
{
  LayerProfileOptions options;
  options.host_update_time = [](const Op& op) { return 10 * op.time_s; };
  const LayerProfile profile = layer_profile_from_traces(two_batches(), options);
  EXPECT_DOUBLE_EQ(profile.layers[2].cpu_update_s, 0.03);
}

TEST(HarmonyProfileFromTraces, MismatchedStructureNamesTheFile)
{
  std::vector<SourcedTrace> traces = two_batches();
  traces[0].trace.ops[2].type = "conv";
  try {
    (void)layer_profile_from_traces(traces);
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "b4.json");
    EXPECT_NE(error.message().find("not the same model as b2.json: op 2 ('f1:linear'"), std::string::npos)
        << error.what();
  }
  traces = two_batches();
  traces[1].trace.source.batch = 4;
  EXPECT_THROW((void)layer_profile_from_traces(traces), InputError); // the same batch twice
  traces = two_batches();
  traces[1].trace.ops[8].layer = 7; // an update op of a layer with no forward or backward op
  EXPECT_THROW((void)layer_profile_from_traces(traces), InputError);
  traces = two_batches();
  traces[1].trace.ops[2].iteration = 1;
  EXPECT_THROW((void)layer_profile_from_traces(traces), InputError);
}

TEST(HarmonyProfileFromTraces, NonProportionalInputIsAnError)
{
  std::vector<SourcedTrace> traces = two_batches();
  traces[0].trace.tensors[7].bytes = 20 * 2; // a0 at batch 4 sized as at batch 2
  try {
    (void)layer_profile_from_traces(traces);
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "b4.json");
    EXPECT_NE(error.message().find("X(u=4, layer 1 (f1))"), std::string::npos) << error.what();
  }
}

TEST(HarmonyProfileFromTraces, SaveLoadRoundTripIsByteIdentical)
{
  test::ScratchDir dir;
  const LayerProfile profile = layer_profile_from_traces(two_batches());
  save_layer_profile(profile, dir / "a.json");
  save_layer_profile(layer_profile_from_traces(two_batches()), dir / "b.json");
  EXPECT_EQ(test::read_file(dir / "a.json"), test::read_file(dir / "b.json")); // deterministic
  const LayerProfile loaded = load_layer_profile(dir / "a.json");
  save_layer_profile(loaded, dir / "c.json");
  EXPECT_EQ(test::read_file(dir / "a.json"), test::read_file(dir / "c.json"));
  EXPECT_EQ(loaded.microbatches.at(4).backward_peak_bytes, profile.microbatches.at(4).backward_peak_bytes);
  EXPECT_EQ(loaded.layers[1].buffer_bytes, 7u);
}

TEST(HarmonyProfileFromTraces, EstimatorAndSearchRunOnADerivedProfile)
{
  const LayerProfile profile = layer_profile_from_traces(two_batches());
  // One GPU, minibatch 4 in microbatches of 2: P_F = {0-1}, P_B = {0-1}, {2}.
  const harmony::Configuration config{2, 2, {{0, 1}}, {{0, 1}, {2, 2}}};
  const harmony::Estimate estimate = harmony::estimate(profile, 1, 4, harmony::Mode::pp, config, {});
  EXPECT_TRUE(std::isfinite(estimate.iteration_s));
  // At least the compute of two microbatches: forward of 0-1 and backward of everything at u = 2.
  const double compute =
      2 * (profile.pack_time_s(LayerPass::forward, 2, 0, 1) + profile.pack_time_s(LayerPass::backward, 2, 0, 2));
  EXPECT_GE(estimate.iteration_s, compute);
  const auto result = harmony::search(profile, 2, 8, harmony::Mode::pp);
  ASSERT_TRUE(result.has_value());
  EXPECT_GT(result->estimate.iteration_s, 0);
}

} // namespace
} // namespace memsim::harmony
