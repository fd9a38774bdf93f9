// Timeline assembly: CUDA-event times of a program -> the simulator's RunResult and document.
#include "memsim/runtime/measured_timeline.hpp"

#include "memsim/common/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

using namespace memsim;
using namespace memsim::runtime;
using ::testing::HasSubstr;

namespace {

const std::filesystem::path kData = MEMSIM_TEST_DATA_DIR;

Program chain_program(const char* plan_file)
{
  Trace trace = load_trace(kData / "chain.trace.json");
  Plan plan = load_plan(kData / plan_file);
  return build_program(plan, trace, PoolConfig{plan.budget_bytes, 2 * plan.budget_bytes, 256});
}

// Times (ms) of the chain plan's ten steps, as if measured.
IterationTiming chain_timing()
{
  const double ms = 1e-3;
  return {{0, 1 * ms},          {1 * ms, 1.5 * ms},   {1 * ms, 2 * ms},     {2 * ms, 2 * ms},     {2 * ms, 2.5 * ms},
          {2.5 * ms, 4.5 * ms}, {4.5 * ms, 4.5 * ms}, {4.5 * ms, 4.5 * ms}, {4.5 * ms, 6.5 * ms}, {6.5 * ms, 6.5 * ms}};
}

} // namespace

TEST(MeasuredTimeline, StepRecordsCarryStreamKindBytesAndTimes)
{
  Program program = chain_program("chain.plan.json");
  RunResult result = assemble_run_result(program, chain_timing());
  ASSERT_EQ(result.timeline.size(), 10u);
  const StepRecord& offload = result.timeline[1];
  EXPECT_EQ(offload.step, 1);
  EXPECT_EQ(offload.kind, StepKind::offload);
  EXPECT_EQ(offload.stream, "d2h");
  EXPECT_EQ(offload.bytes, 2000000u);
  EXPECT_EQ(offload.label, "a1");
  EXPECT_DOUBLE_EQ(offload.start_s, 1e-3);
  EXPECT_DOUBLE_EQ(offload.end_s, 1.5e-3);
  EXPECT_EQ(result.timeline[5].label, "l2.bwd");
  EXPECT_EQ(result.timeline[5].bytes, 2001000u); // outputs g_a1 + wg2
  EXPECT_FALSE(result.error);
}

TEST(MeasuredTimeline, MemorySamplesFollowMeasuredAllocationAndReleaseTimes)
{
  Program program = chain_program("chain.plan.json");
  RunResult result = assemble_run_result(program, chain_timing());
  std::vector<std::pair<double, std::uint64_t>> samples;
  for (const MemorySample& sample : result.memory)
    samples.emplace_back(sample.time_s * 1e3, sample.bytes);
  // t=0: x w1 w2 + a1; 1 ms: + a2 + workspace; 2 ms: - workspace - a1 + a1 (prefetch); 2.5 ms: + g_a1
  // + wg2; 4.5 ms: - a2 - a1 + wg1; 6.5 ms: - g_a1.
  std::vector<std::pair<double, std::uint64_t>> expected{{0, 3002000},   {1, 5502000},   {2, 5002000},
                                                         {2.5, 7003000}, {4.5, 3004000}, {6.5, 1004000}};
  ASSERT_EQ(samples.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(samples[i].first, expected[i].first, 1e-9) << i;
    EXPECT_EQ(samples[i].second, expected[i].second) << i;
  }
}

TEST(MeasuredTimeline, MetricsComeFromTheSharedTimelineCode)
{
  Program program = chain_program("chain.plan.json");
  RunResult result = assemble_run_result(program, chain_timing());
  const Metrics& metrics = result.metrics;
  EXPECT_TRUE(metrics.feasible);
  EXPECT_NEAR(metrics.iteration_time_s, 6.5e-3, 1e-12);
  EXPECT_NEAR(metrics.compute_busy_s, 6e-3, 1e-12); // 1 + 1 + 2 + 2 ms
  EXPECT_NEAR(metrics.stall_time_s, 0.5e-3, 1e-12); // compute stream idle 2.0 -> 2.5 ms
  EXPECT_EQ(metrics.peak_device_bytes, 7003000u);
  EXPECT_EQ(metrics.h2d_bytes, 2000000u);
  EXPECT_EQ(metrics.d2h_bytes, 2000000u);
  EXPECT_EQ(metrics.steps_executed, 10u);
}

TEST(MeasuredTimeline, OutOfMemoryBecomesTheErrorAtTheMeasuredTimeItWouldHaveStarted)
{
  Program program = chain_program("oom.plan.json");
  IterationTiming timing = chain_timing();
  timing.resize(program.steps.size()); // steps 0..4 ran
  RunResult result = assemble_run_result(program, timing);
  ASSERT_TRUE(result.error);
  EXPECT_FALSE(result.metrics.feasible);
  EXPECT_EQ(result.error->step, 5);
  EXPECT_EQ(result.error->tensor, TensorId{5});
  EXPECT_NEAR(result.error->time_s, 2.5e-3, 1e-12); // after prefetch step 4 (2.5 ms) and step 2 (2 ms)
  EXPECT_EQ(result.error->bytes_in_use, 5002000u);
  EXPECT_EQ(result.error->bytes_requested, 2000000u);
  EXPECT_EQ(result.error->kind, FailureKind::out_of_memory);
  EXPECT_THAT(result.error->message, HasSubstr("out of memory: step 5 (compute on gpu0/compute)"));
  EXPECT_THAT(result.error->message, HasSubstr("on gpu0 at t=0.002500000s with 5002000 bytes in use"));
  EXPECT_EQ(result.timeline.size(), 5u);
}

TEST(MeasuredTimeline, MedianIterationAndSummary)
{
  Program program = chain_program("chain.plan.json");
  std::vector<IterationTiming> iterations;
  for (double scale : {1.2, 1.0, 1.1}) {
    IterationTiming timing = chain_timing();
    for (StepTiming& step : timing) {
      step.start_s *= scale;
      step.end_s *= scale;
    }
    iterations.push_back(timing);
  }
  EXPECT_EQ(median_iteration(iterations), 2u); // 7.15 ms between 6.5 and 7.8
  RunInfo info;
  info.gpu_name = "Test GPU";
  info.kernels = "spin";
  nlohmann::json summary = measurement_summary(program, iterations, info);
  EXPECT_EQ(summary["chosen_iteration"], 2);
  EXPECT_NEAR(summary["iteration_time_s"]["median"].get<double>(), 7.15e-3, 1e-12);
  EXPECT_NEAR(summary["iteration_time_s"]["max"].get<double>(), 7.8e-3, 1e-12);
  // Step 5 (l2.bwd, 2 ms in the trace) measured 2.0, 2.2 and 2.4 ms: median error 0.2 ms.
  EXPECT_NEAR(summary["steps"][5]["requested_s"].get<double>(), 2e-3, 1e-15);
  EXPECT_NEAR(summary["steps"][5]["duration_s"]["median"].get<double>(), 2.2e-3, 1e-12);
  EXPECT_EQ(summary["kernel_time_error"]["kernels"], 4);
  EXPECT_NEAR(summary["kernel_time_error"]["median_relative"].get<double>(), 0.1, 1e-9);
}

TEST(MeasuredTimeline, TheDocumentIsTheSimulatorsTimelinePlusMeasured)
{
  Program program = chain_program("chain.plan.json");
  RunInfo info;
  info.gpu_name = "Test GPU";
  info.kernels = "spin";
  nlohmann::json document = measured_timeline_document(program, {chain_timing()}, info);
  ASSERT_TRUE(document.contains("measured"));
  EXPECT_EQ(document["measured"]["gpu"], "Test GPU");
  nlohmann::json simulated_shape = timeline_to_json(assemble_run_result(program, chain_timing()));
  for (auto& [key, value] : simulated_shape.items())
    EXPECT_EQ(document.at(key), value) << key;
  // The simulator's reader takes it back.
  RunResult back = timeline_from_json(document, "measured.json");
  EXPECT_EQ(back.timeline.size(), 10u);
  EXPECT_NEAR(back.metrics.iteration_time_s, 6.5e-3, 1e-12);
}

TEST(MeasuredTimeline, RawTimingsRoundTripAndRejectOtherDocuments)
{
  RawTimings raw;
  raw.pool = PoolConfig{8000000, 11048576, 256};
  raw.info.gpu_name = "Test GPU";
  raw.info.kernels = "gemm";
  raw.info.warmup = 2;
  raw.info.spin_overhead_s = 2.5e-6;
  raw.iterations = {chain_timing(), chain_timing()};
  RawTimings back = raw_timings_from_json(raw_timings_to_json(raw), "raw.json");
  EXPECT_EQ(back.pool.arena_bytes, 11048576u);
  EXPECT_EQ(back.info.kernels, "gemm");
  EXPECT_EQ(back.info.warmup, 2u);
  ASSERT_EQ(back.iterations.size(), 2u);
  ASSERT_EQ(back.iterations[1].size(), 10u);
  EXPECT_DOUBLE_EQ(back.iterations[1][5].end_s, 4.5e-3);

  nlohmann::json wrong = raw_timings_to_json(raw);
  wrong["format"] = "memsim-timeline";
  try {
    raw_timings_from_json(wrong, "raw.json");
    FAIL() << "accepted";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "raw.json: at /format");
  }
  nlohmann::json ragged = raw_timings_to_json(raw);
  ragged["iterations"][1]["end_s"].erase(0);
  EXPECT_THROW(raw_timings_from_json(ragged, "raw.json"), InputError);
}
