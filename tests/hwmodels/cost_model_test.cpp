// The efficiency cost model: exact on hand-made ops, monotone in size, identity on the recording GPU.
#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/efficiency.hpp"
#include "memsim/hwmodels/machine.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace memsim {
namespace {

const std::filesystem::path kData = std::filesystem::path(MEMSIM_TEST_DATA_DIR) / "data";

Op sized_op(OpId id, const std::string& type, std::optional<double> flops, std::optional<double> bytes, double time_s)
{
  Op op;
  op.id = id;
  op.name = "op" + std::to_string(id);
  op.type = type;
  op.flops = flops;
  op.bytes_accessed = bytes;
  op.time_s = time_s;
  return op;
}

// Recorded on gpu0 ("src-gpu") of two-models.machine.yaml: a GEMM at exactly its curve's efficiency (1e10 flops in
// 4 ms on 10 TFLOP/s = 25 % = 0.5 x 1e10 / (1e10 + 1e10)), a convolution, an elementwise op, a view.
Trace hand_trace()
{
  Trace trace;
  trace.name = "hand";
  trace.source.device = "src-gpu";
  trace.source.dtype = "fp32";
  trace.ops = {sized_op(0, "mm", 1e10, 1e8, 0.004), sized_op(1, "convolution", 4e10, 1e9, 0.01),
               sized_op(2, "add", std::nullopt, 1e8, 2e-4), sized_op(3, "view", std::nullopt, 0.0, 1e-5),
               sized_op(4, "custom", std::nullopt, std::nullopt, 0.003)};
  return trace;
}

TEST(CostModel, ExactOnHandMadeOpsOnTheRecordingGpu)
{
  const Machine machine = load_machine(kData / "two-models.machine.yaml");
  const Trace trace = hand_trace();
  const CostModel cost(trace, machine);
  const double launch = 5e-6;
  // time(scale) = time_s x (scale x work + half) / (work + half)
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[0], 0, 1.0), 0.004 + launch);
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[0], 0, 3.0), 0.008 + launch);   // 0.004 x 4e10 / 2e10
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[0], 0, 0.25), 0.0025 + launch); // 0.004 x 1.25e10 / 2e10
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[1], 0, 0.5), 0.01 * 4e10 / 6e10 + launch);
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[2], 0, 2.0), 2e-4 * 2.1e8 / 1.1e8 + launch); // half 10MB = 1e7 bytes
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[3], 0, 8.0), 1e-5 + launch);                 // launch-bound: any size
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[4], 0, 0.5), 0.0015 + launch);               // unsized: proportional
}

TEST(CostModel, AnotherGpuKeepsTheMeasuredEfficiency)
{
  const Machine machine = load_machine(kData / "two-models.machine.yaml");
  Trace trace = hand_trace();
  const CostModel cost(trace, machine);
  ASSERT_TRUE(cost.recording_gpu());
  EXPECT_EQ(cost.recording_gpu()->model, "src-gpu");
  // The GEMM ran at its source curve's efficiency, so on gpu1 it runs at gpu1's curve: (w + 4e10) / (0.8 x 2e13).
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[0], 1), 5e10 / 1.6e13);
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[0], 1, 2.0), 6e10 / 1.6e13);
  // Twice as slow as its curve on the source: twice as slow as gpu1's curve.
  trace.ops[0].time_s = 0.008;
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[0], 1), 2 * 5e10 / 1.6e13);
  // The elementwise op: gpu1 keeps the default memory curve.
  const EfficiencyCurve memory = default_efficiency().memory;
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[2], 1),
                   2e-4 * ((1e8 + memory.half) / (memory.max * 2e12)) / (1.1e8 / (0.8 * 1e12)));
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[3], 1), 1e-5);
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[4], 1, 2.0), 0.006); // unsized: proportional, whatever the GPU
}

TEST(CostModel, DerivedOpsAreTheirSourceAtAnotherSize)
{
  const Machine machine = load_machine(kData / "two-models.machine.yaml");
  Trace trace = hand_trace();
  trace.ops.pop_back(); // derived ops take ids 4, 5, 6
  Op part = sized_op(4, "mm", std::nullopt, std::nullopt, 0);
  part.has_time = false;
  part.split_of = SplitOf{.op = 0, .index = 1, .parts = 4, .dim = "batch"};
  Op fused = sized_op(5, "mm", std::nullopt, std::nullopt, 0);
  fused.has_time = false;
  fused.fused_from = FusedFrom{.op = 0, .models = 3};
  Op measured_part = part; // a derived op with its own time keeps it
  measured_part.id = 6;
  measured_part.has_time = true;
  measured_part.time_s = 0.0017;
  trace.ops.insert(trace.ops.end(), {part, fused, measured_part});
  time_derived_ops(trace.ops);
  const CostModel cost(trace, machine);
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[4], 0), 0.0025 + 5e-6); // 1/4 of the work, less efficient: > 1 ms
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[5], 0), 0.008 + 5e-6);  // 3 models in 2x the time
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[6], 0), 0.0017 + 5e-6);
  EXPECT_DOUBLE_EQ(cost.op_time(trace.ops[4], 1), 4.25e10 / 1.6e13); // on gpu1's curve at 1/4 of the work
}

TEST(CostModel, MonotoneInSizeAndEfficiencyGrowsWithSize)
{
  const Machine machine = load_machine(kData / "two-models.machine.yaml");
  const Trace trace = hand_trace();
  const CostModel cost(trace, machine);
  for (std::size_t gpu = 0; gpu < 2; ++gpu)
    for (OpId id = 0; id < 3; ++id) {
      double previous_time = 0;
      double previous_time_per_scale = 1e300;
      for (double scale = 1.0 / 64; scale <= 64; scale *= 1.5) {
        const double seconds = cost.kernel_time(trace.op(id), machine.gpus[gpu], scale);
        EXPECT_GT(seconds, previous_time) << "op " << id << " gpu " << gpu << " scale " << scale;
        EXPECT_LT(seconds / scale, previous_time_per_scale) << "op " << id << " gpu " << gpu << " scale " << scale;
        previous_time = seconds;
        previous_time_per_scale = seconds / scale;
      }
    }
}

TEST(CostModel, IdentityAtScaleOneOnTheRecordingGpuForAShippedTrace)
{
  const Trace trace =
      load_trace(std::filesystem::path(MEMSIM_SOURCE_DIR) / "traces/data/resnet50-b384-h100.trace.json.gz");
  const Machine h100 = load_machine_or_preset("h100-80gb-sxm5", default_presets_dir());
  const CostModel cost(trace, h100);
  for (const Op& op : trace.ops)
    ASSERT_DOUBLE_EQ(cost.op_time(op, 0, 1.0), op.time_s + h100.gpus[0].kernel_launch_s) << op.name;
  // On an A100 the recording GPU is found among the presets and its measured efficiency kept.
  const Machine a100 = load_machine_or_preset("a100-40gb-pcie4", default_presets_dir());
  const CostModel there(trace, a100);
  ASSERT_TRUE(there.recording_gpu());
  EXPECT_EQ(there.recording_gpu()->model, h100.gpus[0].model);
  const Op& conv = trace.ops[0];
  ASSERT_EQ(classify_op(conv), OpClass::convolution);
  const double ratio = there.kernel_time(conv, a100.gpus[0]) / conv.time_s;
  EXPECT_DOUBLE_EQ(ratio, (*conv.flops + a100.gpus[0].efficiency.convolution.half) /
                              (a100.gpus[0].efficiency.convolution.max * a100.gpus[0].peak_flops.at("fp32")) /
                              ((*conv.flops + h100.gpus[0].efficiency.convolution.half) /
                               (h100.gpus[0].efficiency.convolution.max * h100.gpus[0].peak_flops.at("fp32"))));
}

TEST(OpClass, FromFlopsBytesAndName)
{
  EXPECT_EQ(classify_op(sized_op(0, "addmm", 1e9, 1e6, 1)), OpClass::gemm);
  EXPECT_EQ(classify_op(sized_op(0, "convolution_backward", 1e9, 1e6, 1)), OpClass::convolution);
  Op named = sized_op(0, "", 1e9, std::nullopt, 1);
  named.name = "features.0:cudnn_convolution";
  EXPECT_EQ(classify_op(named), OpClass::convolution);
  EXPECT_EQ(classify_op(sized_op(0, "conv_depthwise_view", std::nullopt, 1e6, 1)), OpClass::memory);
  EXPECT_EQ(classify_op(sized_op(0, "relu", 0.0, 1e6, 1)), OpClass::memory);
  EXPECT_EQ(classify_op(sized_op(0, "view", std::nullopt, 0.0, 1)), OpClass::launch);
  EXPECT_EQ(classify_op(sized_op(0, "view", std::nullopt, std::nullopt, 1)), OpClass::unsized);
  EXPECT_EQ(to_string(OpClass::convolution), "convolution");
}

TEST(EfficiencyFit, RecoversTheCurveOfSyntheticMeasurements)
{
  const EfficiencyCurve truth{.max = 0.6, .half = 3e9};
  const double peak = 1e13;
  std::vector<std::pair<double, double>> exact;
  for (double work = 1e8; work <= 1e12; work *= 3)
    exact.emplace_back(work, truth.seconds(work, peak));
  const EfficiencyCurve fitted = fit_efficiency_curve(exact, peak);
  EXPECT_NEAR(fitted.max, truth.max, 1e-9 * truth.max);
  EXPECT_NEAR(fitted.half, truth.half, 1e-6 * truth.half);
  // +-5 % alternating noise: the constants stay within 10 %.
  std::vector<std::pair<double, double>> noisy = exact;
  for (std::size_t i = 0; i < noisy.size(); ++i)
    noisy[i].second *= i % 2 ? 1.05 : 0.95;
  const EfficiencyCurve rough = fit_efficiency_curve(noisy, peak);
  EXPECT_NEAR(rough.max, truth.max, 0.1 * truth.max);
  EXPECT_NEAR(rough.half, truth.half, 0.1 * truth.half);
}

TEST(EfficiencyFit, RefusesTooFewOrShrinkingMeasurements)
{
  EXPECT_THROW((void)fit_efficiency_curve({{1e9, 1e-3}, {1e9, 2e-3}}, 1e13), std::invalid_argument);
  EXPECT_THROW((void)fit_efficiency_curve({{1e9, 2e-3}, {1e10, 1e-3}}, 1e13), std::invalid_argument);
  EXPECT_THROW((void)fit_efficiency_curve({{1e9, 1e-3}, {1e10, 2e-3}}, 0), std::invalid_argument);
}

std::string efficiency_error(const std::string& block)
{
  const auto path = std::filesystem::temp_directory_path() / "memsim-efficiency-test.machine.yaml";
  std::ofstream(path) << "format: memsim-machine\nversion: 1\ngpus:\n"
                         "  - {name: gpu0, memory: 1GiB, peak_flops: {fp32: 1e12}, hbm_bandwidth: 1TB/s,\n"
                         "     efficiency: "
                      << block
                      << "}\nhost: {memory: 1GiB}\nlinks: [{name: l, endpoints: [gpu0, host], bandwidth: 1GB/s}]\n";
  try {
    (void)load_machine(path);
  } catch (const InputError& error) {
    const std::string message = error.what();
    return message.substr(message.find(".yaml:") + 6);
  }
  return "loaded";
}

TEST(LoadMachine, EfficiencyBlockDefaultsAndLocatedErrors)
{
  const Machine machine = load_machine(kData / "two-models.machine.yaml");
  EXPECT_DOUBLE_EQ(machine.gpus[0].efficiency.memory.half, 1e7);
  EXPECT_DOUBLE_EQ(machine.gpus[0].efficiency.convolution.max, 0.8);
  EXPECT_DOUBLE_EQ(machine.gpus[1].efficiency.gemm.half, 4e10);
  EXPECT_DOUBLE_EQ(machine.gpus[1].efficiency.convolution.half, default_efficiency().convolution.half);
  EXPECT_EQ(efficiency_error("{gemm: {max: 0.5}}"), "loaded");
  EXPECT_EQ(efficiency_error("{gemm: {max: 0}}"),
            "5:31: gpus[0].efficiency.gemm.max: max efficiency 0 must be in (0, 20]");
  EXPECT_EQ(efficiency_error("{memory: {max: 25}}"),
            "5:33: gpus[0].efficiency.memory.max: max efficiency 25 must be in (0, 20]");
  EXPECT_EQ(efficiency_error("{memory: {max: 0.5, half_bytes: 1GB/s}}"),
            "5:50: gpus[0].efficiency.memory.half_bytes: '1GB/s' is not a size: unknown unit 'GB/s' (accepted: B, KB, "
            "MB, GB, TB, KiB, MiB, GiB, TiB; e.g. 16GiB)");
  EXPECT_EQ(efficiency_error("{convolution: {half_flops: -1}}"),
            "5:45: gpus[0].efficiency.convolution.half_flops: '-1' is not a number: it must be finite and not "
            "negative");
  EXPECT_EQ(efficiency_error("{gemm: {half_bytes: 1MB}}"),
            "5:26: gpus[0].efficiency.gemm: unknown key 'half_bytes' (valid keys: max, half_flops)");
  EXPECT_EQ(efficiency_error("{tensor: {max: 1}}"),
            "5:19: gpus[0].efficiency: unknown key 'tensor' (valid keys: gemm, convolution, memory)");
}

} // namespace
} // namespace memsim
