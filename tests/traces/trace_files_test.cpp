// Trace files (gzip), `trace info`'s summary, the shipped recordings, and the roofline rescale of recorded ops.
#include "memsim/common/error.hpp"
#include "memsim/hwmodels/cost_model.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/compressed_file.hpp"
#include "memsim/traces/summary.hpp"
#include "memsim/traces/views.hpp"

#include "test_files.hpp"
#include "test_traces.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace memsim {
namespace {

Trace two_op_trace()
{
  Trace trace;
  trace.name = "hand";
  trace.source = {"hand", "GPU-A", "fp32", 8, "2026-11-23"};
  trace.tensors = {{0, "w", 1000, TensorKind::weight, std::nullopt, {}, {}},
                   {1, "a", 4000, TensorKind::activation, std::nullopt, {}, {}},
                   {2, "g", 500, TensorKind::gradient, std::nullopt, {}, {}}};
  Op forward;
  forward.id = 0;
  forward.name = "matmul";
  forward.phase = Phase::forward;
  forward.inputs = {0};
  forward.outputs = {1};
  forward.workspace_bytes = 100;
  forward.time_s = 0.002;
  forward.flops = 1e12;         // 0.1 s at 10 TFLOP/s
  forward.bytes_accessed = 1e9; // 1 ms at 1 TB/s: compute-bound
  Op backward;
  backward.id = 1;
  backward.name = "relu_backward";
  backward.phase = Phase::backward;
  backward.layer = 0;
  backward.inputs = {1};
  backward.outputs = {2};
  backward.time_s = 0.003;
  backward.bytes_accessed = 5e9; // 5 ms at 1 TB/s: memory-bound
  trace.ops = {forward, backward};
  return trace;
}

Machine one_gpu(const std::string& model)
{
  Machine machine;
  machine.name = "m";
  Gpu gpu;
  gpu.name = "gpu0";
  gpu.model = model;
  gpu.memory = 1ull << 30;
  gpu.peak_flops = {{"fp32", 10e12}};
  gpu.hbm_bandwidth = 1e12;
  gpu.kernel_launch_s = 5e-6;
  machine.gpus.push_back(gpu);
  return machine;
}

TEST(TraceFiles, GzipRoundTripIsByteIdenticalToThePlainDocument)
{
  test::ScratchDir dir;
  const Trace trace = two_op_trace();
  save_trace(trace, dir / "t.trace.json");
  save_trace(trace, dir / "t.trace.json.gz");
  const std::string plain = test::read_file(dir / "t.trace.json");
  const std::string packed = test::read_file(dir / "t.trace.json.gz");
  EXPECT_EQ(static_cast<unsigned char>(packed[0]), 0x1f);
  EXPECT_EQ(read_possibly_gzipped(dir / "t.trace.json.gz"), plain);
  save_trace(trace, dir / "again.trace.json.gz");
  EXPECT_EQ(test::read_file(dir / "again.trace.json.gz"), packed); // deterministic: no timestamp
  const Trace loaded = load_trace(dir / "t.trace.json.gz");
  EXPECT_EQ(loaded.ops.size(), 2u);
  EXPECT_EQ(*loaded.ops[1].bytes_accessed, 5e9);
}

TEST(TraceFiles, TruncatedGzipIsALocatedInputError)
{
  test::ScratchDir dir;
  save_trace(two_op_trace(), dir / "t.trace.json.gz");
  const std::string packed = test::read_file(dir / "t.trace.json.gz");
  test::write_file(dir / "cut.trace.json.gz", packed.substr(0, packed.size() / 2));
  try {
    load_trace(dir / "cut.trace.json.gz");
    FAIL() << "a truncated gzip trace loaded";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("cut.trace.json.gz"), std::string::npos) << error.what();
  }
}

TEST(TraceSummary, CountsBytesTimesAndPeak)
{
  const Trace trace = two_op_trace();
  const TraceSummary summary = summarize_trace(trace, default_memory_profile(trace));
  EXPECT_EQ(summary.ops, 2u);
  EXPECT_EQ(summary.tensors, 3u);
  EXPECT_DOUBLE_EQ(summary.total_time_s, 0.005);
  EXPECT_EQ(summary.resident_bytes, 1000u);
  // matmul: 1000 + 4000 + 100 workspace; relu_backward: 1000 + 4000 + 500.
  EXPECT_EQ(summary.default_peak_bytes, 5500u);
  EXPECT_EQ(summary.default_peak_op, 1);
  EXPECT_EQ(summary.activation_bytes, 4000u);
  EXPECT_EQ(summary.saved_activation_bytes, 4000u);
  EXPECT_EQ(summary.bytes_by_kind[static_cast<std::size_t>(TensorKind::gradient)], 500u);
  const auto json = summary_to_json(summary);
  EXPECT_EQ(json["default_peak_bytes"], 5500u);
  EXPECT_EQ(json["tensors_by_kind"]["weight"]["bytes"], 1000u);
  EXPECT_DOUBLE_EQ(json["total_time_s"].get<double>(), 0.005);
  EXPECT_TRUE(json.contains("chain_view"));
}

TEST(TraceSummary, SaysWhyThereIsNoChainView)
{
  Trace branching = test::make_chain(3, 1000, 0.001);
  const TraceSummary chain = summarize_trace(branching, default_memory_profile(branching));
  EXPECT_TRUE(chain.chain_view);
  EXPECT_EQ(chain.chain_layers, 3u);
  // A forward op of layer 2 reading layer 0's output skips a layer: not a chain.
  for (Op& op : branching.ops)
    if (op.phase == Phase::forward && op.layer == 2)
      op.inputs.push_back(branching.ops[0].outputs[0]);
  const TraceSummary skip = summarize_trace(branching, default_memory_profile(branching));
  EXPECT_FALSE(skip.chain_view);
  EXPECT_NE(skip.chain_view_reason.find("not a chain"), std::string::npos) << skip.chain_view_reason;
  EXPECT_EQ(summary_to_json(skip)["chain_view_reason"], skip.chain_view_reason);
}

// Rescaling: on the GPU the trace was recorded on, measured times (+ launch); on another GPU, when the recording
// GPU is unknown (GPU-A is no preset), the target's class curve: an ideal one (max 1, no half) is the roofline.
TEST(Rescale, IdealCurveOfAnUnknownRecordingGpuIsTheRoofline)
{
  const Trace trace = two_op_trace();
  const Machine same = one_gpu("GPU-A");
  const CostModel here(trace, same);
  EXPECT_DOUBLE_EQ(here.op_time(trace.ops[0], 0), 0.002 + 5e-6);
  EXPECT_DOUBLE_EQ(here.op_time(trace.ops[1], 0), 0.003 + 5e-6);
  Machine other = one_gpu("GPU-B");
  other.gpus[0].efficiency.gemm = other.gpus[0].efficiency.memory = {.max = 1, .half = 0};
  const CostModel there(trace, other);
  EXPECT_DOUBLE_EQ(there.op_time(trace.ops[0], 0), 0.1 + 5e-6);   // flops-bound
  EXPECT_DOUBLE_EQ(there.op_time(trace.ops[1], 0), 0.005 + 5e-6); // HBM-bound
  EXPECT_DOUBLE_EQ(there.ideal_time(), 0.105 + 10e-6);
  Trace unknown = trace;
  unknown.ops[1].bytes_accessed.reset(); // nothing to rescale with: the measured time stays
  const CostModel fallback(unknown, other);
  EXPECT_DOUBLE_EQ(fallback.op_time(unknown.ops[1], 0), 0.003 + 5e-6);
  Trace half = trace;
  half.source.dtype = "fp16"; // no fp16 peak on this GPU: the fp32 peak is used
  EXPECT_DOUBLE_EQ(CostModel(half, other).op_time(half.ops[0], 0), 0.1 + 5e-6);
}

// The shipped recordings (traces/data, H100, gzip): they load, carry provenance, and exceed 24 GiB under keep-all.
TEST(ShippedTraces, RecordedModelsLoadWithProvenance)
{
  const std::filesystem::path data = std::filesystem::path(MEMSIM_SOURCE_DIR) / "traces" / "data";
  for (const char* name : {"resnet50-b384-h100", "resnet101-b256-h100", "vgg16-b384-h100", "inception_v3-b320-h100",
                           "densenet121-b256-h100", "bert-b48-h100", "gpt-b20-h100"}) {
    SCOPED_TRACE(name);
    const Trace trace = load_trace(data / (std::string(name) + ".trace.json.gz"));
    EXPECT_EQ(trace.source.device, "H100-80GB-SXM");
    EXPECT_EQ(trace.source.date, "2026-11-23");
    EXPECT_NE(trace.source.tool.find("memsim_export.py"), std::string::npos);
    const TraceSummary summary = summarize_trace(trace, default_memory_profile(trace));
    EXPECT_GT(summary.default_peak_bytes, 24ull << 30);
    EXPECT_GT(summary.ops_by_phase[static_cast<std::size_t>(Phase::backward)], 0u);
    EXPECT_GT(summary.ops_by_phase[static_cast<std::size_t>(Phase::update)], 0u);
    EXPECT_GT(summary.total_time_s, 0.1);
    EXPECT_LT(summary.total_time_s, 1.0);
  }
}

} // namespace
} // namespace memsim
