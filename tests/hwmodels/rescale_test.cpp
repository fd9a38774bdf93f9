// memsim trace rescale's core: exact bytes, weights untouched, flops and times through the cost model.
#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/hwmodels/rescale.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace memsim {
namespace {

const std::filesystem::path kData = std::filesystem::path(MEMSIM_TEST_DATA_DIR) / "data";

// Batch 8 on "src-gpu": a GEMM reading the input and a weight, writing an activation with a shape; an update.
Trace batch8_trace()
{
  Trace trace;
  trace.name = "b8";
  trace.source = {"hand", "src-gpu", "fp32", 8, ""};
  trace.tensors = {{0, "x", 8000, TensorKind::input, std::nullopt, {}, {}},
                   {1, "w", 4000, TensorKind::weight, std::nullopt, {}, {}},
                   {2, "a", 8000, TensorKind::activation, std::nullopt, {8, 250}, 0},
                   {3, "m", 4000, TensorKind::optimizer_state, std::nullopt, {}, {}},
                   {4, "pos", 24, TensorKind::input, std::nullopt, {2, 3}, std::nullopt}};
  Op gemm;
  gemm.id = 0;
  gemm.name = "fc:mm";
  gemm.type = "mm";
  gemm.inputs = {0, 1, 4};
  gemm.outputs = {2};
  gemm.workspace_bytes = 800;
  gemm.time_s = 0.004;
  gemm.flops = 1e10;
  gemm.bytes_accessed = 20024;
  Op update;
  update.id = 1;
  update.name = "sgd";
  update.type = "add_";
  update.phase = Phase::update;
  update.inputs = {1, 3};
  update.time_s = 1e-5;
  update.bytes_accessed = 8000;
  trace.ops = {gemm, update};
  return trace;
}

TEST(Rescale, BytesExactWeightsUntouchedTimesFromTheCostModel)
{
  const Machine machine = load_machine(kData / "two-models.machine.yaml");
  const Trace trace = batch8_trace();
  const Trace quarter = rescale_trace(trace, 2, machine.gpus[0], "b8");
  EXPECT_EQ(quarter.source.batch, 2);
  EXPECT_EQ(quarter.source.device, "src-gpu");
  EXPECT_EQ(quarter.tensors[0].bytes, 2000u); // input, by kind
  EXPECT_EQ(quarter.tensors[2].bytes, 2000u); // along its batch axis
  EXPECT_EQ(quarter.tensors[2].shape, (std::vector<std::int64_t>{2, 250}));
  EXPECT_EQ(quarter.tensors[1].bytes, 4000u); // weight
  EXPECT_EQ(quarter.tensors[3].bytes, 4000u); // optimizer state
  EXPECT_EQ(quarter.tensors[4].bytes, 24u);   // an input whose shape names no batch axis
  EXPECT_DOUBLE_EQ(*quarter.ops[0].flops, 2.5e9);
  EXPECT_DOUBLE_EQ(*quarter.ops[0].bytes_accessed, 20024.0 * (2000 + 4000 + 24 + 2000) / (8000 + 4000 + 24 + 8000));
  EXPECT_EQ(quarter.ops[0].workspace_bytes, 200u);
  EXPECT_DOUBLE_EQ(quarter.ops[0].time_s, 0.004 * (2.5e9 + 1e10) / 2e10); // gpu0's GEMM curve, half 1e10
  EXPECT_DOUBLE_EQ(*quarter.ops[1].bytes_accessed, 8000.0);               // touches no batch tensor
  EXPECT_DOUBLE_EQ(quarter.ops[1].time_s, 1e-5);
  // Rounding: batch 5 of 8 scales 8000 bytes to 5000 and the batch axis to 5.
  const Trace five = rescale_trace(trace, 5, machine.gpus[0], "b8");
  EXPECT_EQ(five.tensors[0].bytes, 5000u);
  EXPECT_EQ(five.tensors[2].shape[0], 5);
  EXPECT_EQ(five.tensors[2].bytes, 5000u);
  // The same batch on the same GPU gives the trace back.
  const Trace same = rescale_trace(trace, 8, machine.gpus[0], "b8");
  for (std::size_t i = 0; i < trace.ops.size(); ++i)
    EXPECT_DOUBLE_EQ(same.ops[i].time_s, trace.ops[i].time_s);
  for (std::size_t i = 0; i < trace.tensors.size(); ++i)
    EXPECT_EQ(same.tensors[i].bytes, trace.tensors[i].bytes);
}

TEST(Rescale, AnotherGpuUsesTheCostModelThere)
{
  Trace trace = batch8_trace();
  trace.source.device = load_machine_or_preset("h100-80gb-sxm5", default_presets_dir()).gpus[0].model;
  const Machine a100 = load_machine_or_preset("a100-40gb-pcie4", default_presets_dir());
  const Trace doubled = rescale_trace(trace, 16, a100.gpus[0], "b8");
  EXPECT_EQ(doubled.source.device, a100.gpus[0].model);
  const CostModel cost(trace, a100);
  EXPECT_DOUBLE_EQ(doubled.ops[0].time_s, cost.kernel_time(trace.ops[0], a100.gpus[0], 2.0));
  EXPECT_DOUBLE_EQ(doubled.ops[1].time_s, cost.kernel_time(trace.ops[1], a100.gpus[0], 1.0));
  EXPECT_NE(doubled.ops[1].time_s, trace.ops[1].time_s); // an unscaled op still moves to the A100's bandwidth
}

TEST(Rescale, RefusesATraceWithoutItsBatchAndANonPositiveBatch)
{
  Trace trace = batch8_trace();
  EXPECT_THROW((void)rescale_trace(trace, 0, std::nullopt, "b8"), InputError);
  trace.source.batch = 0;
  try {
    (void)rescale_trace(trace, 4, std::nullopt, "b8");
    FAIL() << "rescaled a trace without source.batch";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("b8: at /source/batch"), std::string::npos) << error.what();
  }
}

} // namespace
} // namespace memsim
