// memsim gen fuse's core: the identity at k = 1, every tensor x k, op times from the efficiency curve (by hand and
// through the cost model's derived ops), from a batch-k*b rescale, and the recorded trace the measured model picks.
#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/hwmodels/efficiency.hpp"
#include "memsim/hwmodels/fuse.hpp"
#include "memsim/hwmodels/machine.hpp"
#include "memsim/hwmodels/rescale.hpp"
#include "memsim/traces/trace.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

namespace memsim {
namespace {

const std::filesystem::path kData = std::filesystem::path(MEMSIM_TEST_DATA_DIR) / "data";

Op make_op(OpId id, std::string type, Phase phase, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
           double time_s, std::optional<double> flops, std::optional<double> bytes)
{
  Op op;
  op.id = id;
  op.name = "op" + std::to_string(id) + ":" + type;
  op.type = std::move(type);
  op.phase = phase;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.time_s = time_s;
  op.flops = flops;
  op.bytes_accessed = bytes;
  return op;
}

// Batch 8 on "src-gpu" (gpu0 of two-models.machine.yaml: GEMM curve max 0.5, half 1e10 flops): one tensor of
// every kind, a GEMM forward, its backward, an SGD update.
Trace batch8_trace()
{
  Trace trace;
  trace.name = "hand-b8";
  trace.source = {"hand", "src-gpu", "fp32", 8, ""};
  trace.tensors = {{0, "x", 8000, TensorKind::input, std::nullopt, {8, 250}, 0},
                   {1, "w", 4000, TensorKind::weight, std::nullopt, {10, 100}, std::nullopt},
                   {2, "a", 8000, TensorKind::activation, std::nullopt, {}, {}},
                   {3, "da", 8000, TensorKind::gradient, std::nullopt, {}, {}},
                   {4, "dw", 4000, TensorKind::weight_grad, std::nullopt, {}, {}},
                   {5, "m", 4000, TensorKind::optimizer_state, std::nullopt, {}, {}},
                   {6, "seed", 24, TensorKind::other, std::nullopt, {}, {}}};
  trace.ops = {make_op(0, "mm", Phase::forward, {0, 1}, {2, 6}, 0.004, 1e10, 20024),
               make_op(1, "mm", Phase::backward, {0, 2, 6}, {3, 4}, 0.006, 2e10, 28000),
               make_op(2, "add_", Phase::update, {1, 4, 5}, {}, 1e-5, std::nullopt, 12000)};
  trace.ops[0].workspace_bytes = 800;
  trace.ops[1].cpu_time_s = 0.5;
  validate_trace(trace, "hand");
  return trace;
}

const Gpu& src_gpu()
{
  static const Machine machine = load_machine(kData / "two-models.machine.yaml");
  return machine.gpus[0];
}

TEST(Fuse, OneModelIsTheTraceItself)
{
  const Trace trace = batch8_trace();
  for (FusionModel model : {FusionModel::efficiency, FusionModel::batch_proxy, FusionModel::measured})
    EXPECT_EQ(trace_to_json(fuse_trace(trace, 1, model, src_gpu(), "hand")).dump(), trace_to_json(trace).dump());
  EXPECT_EQ(fused_trace_name("hand-b8", 1), "hand-b8");
}

TEST(Fuse, EveryTensorAndAllWorkTimesK)
{
  const Trace trace = batch8_trace();
  for (FusionModel model : {FusionModel::efficiency, FusionModel::batch_proxy}) {
    const Trace fused = fuse_trace(trace, 3, model, src_gpu(), "hand");
    EXPECT_EQ(fused.name, "hand-b8-k3");
    EXPECT_EQ(fused.source.batch, 8); // per model, as in the recorded fused traces
    EXPECT_EQ(fused.source.models, 3);
    EXPECT_EQ(trace_samples_per_iteration(fused), 24); // every model trains the batch
    ASSERT_EQ(fused.tensors.size(), trace.tensors.size());
    for (std::size_t i = 0; i < trace.tensors.size(); ++i) {
      EXPECT_EQ(fused.tensors[i].bytes, 3 * trace.tensors[i].bytes) << trace.tensors[i].name;
      EXPECT_EQ(fused.tensors[i].kind, trace.tensors[i].kind);
    }
    EXPECT_EQ(fused.tensors[0].shape, (std::vector<std::int64_t>{3, 8, 250})); // a leading model axis
    EXPECT_EQ(fused.tensors[0].batch_axis, 1);
    EXPECT_EQ(fused.tensors[1].shape, (std::vector<std::int64_t>{3, 10, 100}));
    EXPECT_FALSE(fused.tensors[1].batch_axis);
    ASSERT_EQ(fused.ops.size(), trace.ops.size());
    EXPECT_DOUBLE_EQ(*fused.ops[0].flops, 3e10);
    EXPECT_DOUBLE_EQ(*fused.ops[0].bytes_accessed, 3 * 20024.0);
    EXPECT_EQ(fused.ops[0].workspace_bytes, 2400u);
    EXPECT_DOUBLE_EQ(*fused.ops[1].cpu_time_s, 1.5);
    EXPECT_EQ(fused.ops[1].inputs, trace.ops[1].inputs);
    EXPECT_EQ(fused.ops[2].phase, Phase::update);
  }
}

TEST(Fuse, TheModelCountSurvivesJsonAndMultipliesWhenFusedAgain)
{
  const Trace fused = fuse_trace(batch8_trace(), 3, FusionModel::efficiency, src_gpu(), "hand");
  const nlohmann::json document = trace_to_json(fused);
  EXPECT_EQ(document["source"]["models"], 3);
  EXPECT_FALSE(trace_to_json(batch8_trace())["source"].contains("models")); // one model: the v2 document unchanged
  const Trace back = trace_from_json(document, "fused.json");
  EXPECT_EQ(back.source.models, 3);
  EXPECT_EQ(trace_to_json(back).dump(), document.dump());
  EXPECT_EQ(fuse_trace(back, 2, FusionModel::efficiency, src_gpu(), "hand").source.models, 6);
  nlohmann::json bad = document;
  bad["source"]["models"] = 0;
  try {
    (void)trace_from_json(bad, "bad.json");
    ADD_FAILURE() << "models = 0 was accepted";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "bad.json: at /source/models");
  }
}

TEST(Fuse, EfficiencyTimesAreTheCurveAtKTimesTheWork)
{
  const Trace trace = batch8_trace();
  const Trace fused = fuse_trace(trace, 4, FusionModel::efficiency, src_gpu(), "hand");
  // time = time_s x (k work + half) / (work + half), half = 1e10 flops: a small GEMM gains from fusion.
  EXPECT_DOUBLE_EQ(fused.ops[0].time_s, 0.004 * (4e10 + 1e10) / (1e10 + 1e10)); // 10 ms < 4 x 4 ms
  EXPECT_LT(fused.ops[0].time_s, 4 * 0.004);
  EXPECT_DOUBLE_EQ(fused.ops[1].time_s, 0.006 * (8e10 + 1e10) / (2e10 + 1e10));
  // The update (memory class, half 10 MB on gpu0) on 12 kB gains almost the whole launch-like fixed cost.
  const double half_bytes = src_gpu().efficiency.curve(OpClass::memory)->half;
  EXPECT_DOUBLE_EQ(fused.ops[2].time_s, 1e-5 * (4 * 12000 + half_bytes) / (12000 + half_bytes));
  EXPECT_LT(fused.ops[2].time_s, 1.01e-5);
  // A huge GEMM is already at the curve's plateau: about k x its time.
  Trace huge = trace;
  huge.ops[0].flops = 1e15;
  huge.ops[0].time_s = 200.0;
  const Trace fused_huge = fuse_trace(huge, 4, FusionModel::efficiency, src_gpu(), "hand");
  EXPECT_NEAR(fused_huge.ops[0].time_s / (4 * 200.0), 1.0, 1e-4);
  EXPECT_LT(fused_huge.ops[0].time_s, 4 * 200.0);
}

TEST(Fuse, EfficiencyTimesAreTheCostModelsFusedDerivedOps)
{
  // The cost model times an op fused_from {op, k} without time_s from its source: the same numbers.
  Trace with_derived = batch8_trace();
  const std::size_t ops = with_derived.ops.size();
  for (std::size_t i = 0; i < ops; ++i) {
    Op derived = with_derived.ops[i];
    derived.id = static_cast<OpId>(ops + i);
    derived.has_time = false;
    derived.fused_from = FusedFrom{static_cast<OpId>(i), 4};
    derived.inputs.clear();
    derived.outputs.clear();
    with_derived.ops.push_back(derived);
  }
  Machine machine;
  machine.gpus.push_back(src_gpu());
  const CostModel derived_cost(with_derived, machine);
  const Trace fused = fuse_trace(batch8_trace(), 4, FusionModel::efficiency, src_gpu(), "hand");
  // And the fused trace written and read back is simulated at those times (its own time_s on the recording GPU).
  const Trace reloaded = trace_from_json(trace_to_json(fused), "fused");
  const CostModel fused_cost(reloaded, machine);
  for (std::size_t i = 0; i < ops; ++i) {
    EXPECT_DOUBLE_EQ(derived_cost.op_time(with_derived.ops[ops + i], 0), fused.ops[i].time_s + 5e-6) << i;
    EXPECT_DOUBLE_EQ(fused_cost.op_time(reloaded.ops[i], 0), fused.ops[i].time_s + 5e-6) << i;
  }
}

TEST(Fuse, DerivedOpsStayDerivedFromTheirFusedSource)
{
  Trace trace = batch8_trace();
  Op micro = trace.ops[0];
  micro.id = 3;
  micro.name = "fc:mm.part0";
  micro.inputs.clear();
  micro.outputs.clear();
  micro.has_time = false;
  micro.split_of = SplitOf{0, 0, 2, "batch"};
  trace.ops.push_back(micro);
  time_derived_ops(trace.ops);
  const Trace fused = fuse_trace(trace, 4, FusionModel::efficiency, src_gpu(), "hand");
  EXPECT_FALSE(fused.ops[3].has_time);
  EXPECT_EQ(fused.ops[3].split_of->op, 0);
  EXPECT_DOUBLE_EQ(fused.ops[3].time_s, fused.ops[0].time_s / 2); // the placeholder of the fused source
  Machine machine;
  machine.gpus.push_back(src_gpu());
  const CostModel cost(fused, machine); // half of the fused GEMM's 4e10 flops on the curve
  EXPECT_DOUBLE_EQ(cost.kernel_time(fused.ops[3], src_gpu()), fused.ops[0].time_s * (2e10 + 1e10) / (4e10 + 1e10));
}

TEST(Fuse, BatchProxyTimesAreTheRescaledTraceAndUpdatesKTimes)
{
  const Trace trace = batch8_trace();
  const Trace fused = fuse_trace(trace, 2, FusionModel::batch_proxy, src_gpu(), "hand");
  const Trace at16 = rescale_trace(trace, 16, src_gpu(), "hand");
  EXPECT_DOUBLE_EQ(fused.ops[0].time_s, at16.ops[0].time_s);
  EXPECT_DOUBLE_EQ(fused.ops[0].time_s, 0.004 * (2e10 + 1e10) / (1e10 + 1e10)); // the GEMM at twice the batch
  EXPECT_DOUBLE_EQ(fused.ops[1].time_s, at16.ops[1].time_s);
  EXPECT_DOUBLE_EQ(fused.ops[2].time_s, 2 * 1e-5); // launch + k (t1 - launch), launch added by the simulator
  // Unlike the rescale, weights, their gradients and optimizer state are k x.
  EXPECT_EQ(at16.tensors[1].bytes, 4000u);
  EXPECT_EQ(fused.tensors[1].bytes, 8000u);
  EXPECT_EQ(fused.tensors[5].bytes, 8000u);
}

TEST(Fuse, BatchProxyNeedsTheBatch)
{
  Trace trace = batch8_trace();
  trace.source.batch = 0;
  try {
    (void)fuse_trace(trace, 2, FusionModel::batch_proxy, src_gpu(), "t.trace.json");
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "t.trace.json: at /source/batch");
  }
  EXPECT_NO_THROW((void)fuse_trace(trace, 2, FusionModel::efficiency, src_gpu(), "t.trace.json"));
}

TEST(Fuse, TheRecordingGpuMustBeTheTracesDevice)
{
  static const Machine machine = load_machine(kData / "two-models.machine.yaml");
  EXPECT_THROW((void)fuse_trace(batch8_trace(), 2, FusionModel::efficiency, machine.gpus[1], "hand"), InputError);
}

class TempDir {
public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("memsim-fuse-test-" + std::to_string(getpid())))
  {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

// A stand-in for a recording: distinct op count (vmap adds ops) so the test sees which file came back.
Trace recording(const std::string& name, std::int64_t batch, const std::string& device, int extra_ops)
{
  Trace trace = batch8_trace();
  trace.name = name;
  trace.source.batch = batch;
  trace.source.device = device;
  for (int i = 0; i < extra_ops; ++i)
    trace.ops.push_back(make_op(static_cast<OpId>(trace.ops.size()), "clone", Phase::forward, {0}, {}, 1e-6,
                                std::nullopt, 100));
  return trace;
}

TEST(Fuse, MeasuredPicksTheRecordingOfKModelsAtTheBatch)
{
  const TempDir dir;
  save_trace(recording("hand-b8-k3", 8, "src-gpu", 3), dir.path() / "hand-b8-k3-src.trace.json");
  save_trace(recording("hand-b8-k2", 8, "src-gpu", 2), dir.path() / "hand-b8-k2-src.trace.json.gz");
  save_trace(recording("hand-b8-k3", 8, "other-gpu", 7), dir.path() / "hand-b8-k3-other.trace.json");
  save_trace(recording("hand-b16-k3", 16, "src-gpu", 5), dir.path() / "hand-b16-k3-src.trace.json");
  const Trace trace = batch8_trace();
  const Trace three = measured_fused_trace(trace, 3, dir.path(), "hand");
  EXPECT_EQ(three.name, "hand-b8-k3");
  EXPECT_EQ(three.ops.size(), trace.ops.size() + 3); // the src-gpu recording: the trace's device
  EXPECT_EQ(three.source.models, 3);                 // the stand-in says 1, as recordings before 2026-11-26 do
  const Trace two = measured_fused_trace(trace, 2, dir.path(), "hand");
  EXPECT_EQ(two.ops.size(), trace.ops.size() + 2);
  Trace pair = trace; // a trace of two fused models fused twice: four models
  pair.source.models = 2;
  EXPECT_EQ(measured_fused_trace(pair, 2, dir.path(), "hand").source.models, 4);
  // A trace already named for k models (or without -b<batch>) finds the same family.
  Trace renamed = trace;
  renamed.name = "hand";
  EXPECT_EQ(measured_fused_trace(renamed, 2, dir.path(), "hand").name, "hand-k2");
  try {
    (void)measured_fused_trace(trace, 5, dir.path(), "hand");
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), dir.path().string());
    EXPECT_NE(error.message().find("hand-b8-k5-<tag>.trace.json"), std::string::npos) << error.message();
  }
  // The right file name but a recording of another batch is not it.
  save_trace(recording("hand-b8-k4", 16, "src-gpu", 4), dir.path() / "hand-b8-k4-src.trace.json");
  try {
    (void)measured_fused_trace(trace, 4, dir.path(), "hand");
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_NE(error.message().find("files with that prefix: hand-b8-k4-src.trace.json"), std::string::npos)
        << error.message();
  }
  EXPECT_THROW((void)measured_fused_trace(trace, 3, dir.path() / "missing", "hand"), InputError);
}

} // namespace
} // namespace memsim
