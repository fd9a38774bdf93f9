// Harmony's runtime estimator against event timelines worked out by hand on a 3-layer profile, both modes.
#include "harmony_test_profile.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/estimator.hpp"

#include <gtest/gtest.h>

#include <string>

namespace memsim::harmony {
namespace {

LayerProfile tiny_profile() { return test::tiny_harmony_profile({0.25, 0.5, 0.25}); }

// Unit bandwidths per GPU with N = 2: swaps 1 B/s, p2p 1 B/s, host messages 1 B/s (twice the bytes); time_del 0.5 s.
EstimatorSettings unit_settings() { return {2.0, 1.0, 2.0, 0.5}; }

// P_F = {0}, P_B = {0}, {1-2}: tasks FWD[0], BWD[1-2] (loss), UPD[1-2], BWD[0], UPD[0].
Configuration tiny_configuration() { return {1, 1, {{0, 0}}, {{0, 0}, {1, 2}}}; }

const EstimatedEvent& find(const Estimate& estimate, int task, int microbatch, const std::string& kind)
{
  for (const EstimatedEvent& event : estimate.events)
    if (event.task == task && event.microbatch == microbatch && event.kind == kind)
      return event;
  throw std::runtime_error("no event " + kind);
}

void expect_span(const Estimate& estimate, int task, int microbatch, const std::string& kind, double begin, double end)
{
  const EstimatedEvent& event = find(estimate, task, microbatch, kind);
  EXPECT_DOUBLE_EQ(event.begin_s, begin) << kind << " of task " << task << " microbatch " << microbatch;
  EXPECT_DOUBLE_EQ(event.end_s, end) << kind << " of task " << task << " microbatch " << microbatch;
}

// pp, N = 2, D = 2: FWD[0] and BWD[0] on GPU 0, the loss task on GPU 1; Y and dX go GPU to GPU (rendezvous: both
// ends start when both are ready), the stash of layer 0 goes out to the host and back.
TEST(HarmonyEstimator, WrapAroundPipelineTimeline)
{
  const Estimate estimate = harmony::estimate(tiny_profile(), 2, 2, Mode::pp, tiny_configuration(), unit_settings());
  expect_span(estimate, 0, 0, "WB", 0, 2); // 2 B at 1 B/s
  expect_span(estimate, 0, 0, "X", 2, 3);  // data, after the weights
  expect_span(estimate, 0, 0, "sX", 3, 4); // stash of layer 0's input, before the forward goes on
  expect_span(estimate, 0, 0, "FWD", 4, 5);
  expect_span(estimate, 0, 0, "Y", 5, 7); // 2 B over p2p
  expect_span(estimate, 1, 0, "X", 5, 7); // its peer on GPU 1
  expect_span(estimate, 0, 1, "X", 5, 6); // next microbatch's data waits for the previous forward
  expect_span(estimate, 0, 1, "sX", 6, 7);
  expect_span(estimate, 0, 1, "FWD", 7, 8);
  expect_span(estimate, 0, 0, "DEL", 8, 8.5);
  expect_span(estimate, 1, 0, "REC", 7, 10); // loss task: forward of layers 1-2 (3 s), then backward 7 - 3 = 4 s
  expect_span(estimate, 1, 0, "BWD", 10, 14);
  expect_span(estimate, 0, 1, "Y", 14, 16); // the loss task takes microbatch 1 after its backward of 0
  expect_span(estimate, 1, 1, "X", 14, 16);
  expect_span(estimate, 3, 0, "WB", 8.5, 10.5); // BWD[0] after FWD[0]'s DEL
  expect_span(estimate, 3, 0, "sX", 10.5, 11.5);
  expect_span(estimate, 3, 0, "REC", 11.5, 12.5);
  expect_span(estimate, 1, 0, "dX", 14, 16);
  expect_span(estimate, 3, 0, "dY", 14, 16);
  expect_span(estimate, 3, 0, "BWD", 16, 18);
  expect_span(estimate, 1, 1, "REC", 16, 19);
  expect_span(estimate, 1, 1, "BWD", 19, 23);
  expect_span(estimate, 3, 1, "sX", 18, 19);
  expect_span(estimate, 3, 1, "REC", 19, 20);
  expect_span(estimate, 1, 1, "dX", 23, 25);
  expect_span(estimate, 3, 1, "dY", 23, 25);
  expect_span(estimate, 3, 1, "BWD", 25, 27);
  expect_span(estimate, 3, 0, "dWB", 27, 29);
  expect_span(estimate, 3, 0, "DEL", 29, 29.5);
  expect_span(estimate, 4, 0, "Update", 29, 29.25);
  expect_span(estimate, 1, 0, "dWB", 23, 24);
  expect_span(estimate, 2, 0, "Update", 24, 24.75);
  expect_span(estimate, 0, 0, "MSGsX", 4, 4); // the stash stays on its rank: no host copy
  EXPECT_EQ(find(estimate, 1, 0, "BWD").rank, 1);
  ASSERT_EQ(estimate.rank_end_s.size(), 2u);
  EXPECT_DOUBLE_EQ(estimate.rank_end_s[0], 29.5);
  EXPECT_DOUBLE_EQ(estimate.rank_end_s[1], 25);
  EXPECT_DOUBLE_EQ(estimate.iteration_s, 29.5);
  // Compute on GPU 0: FWD 1+1, REC 1+1, BWD 2+2; GPU 1: REC 3+3, BWD 4+4.
  EXPECT_DOUBLE_EQ(estimate.rank_compute_s[0], 8);
  EXPECT_DOUBLE_EQ(estimate.rank_compute_s[1], 14);
  // Memory (CofTask): FWD[0] = X 1 + pack 10 + Y 2 + stash 1 = 14; BWD[0] = 2 X 1 + dY 2 + pack 20 = 24; the loss
  // task = 2 X 2 + pack (20 + 20 - X 1) + dX 2 = 45.
  EXPECT_EQ(estimate.rank_memory_bytes, (std::vector<double>{24, 45}));
}

// dp, N = 2, D = 4: rank 0 runs every task on its 2 samples; boundaries go out to the host and back, gradients are
// all-reduced (2(N-1)/N |W| / bw_p2p) before they leave. Only rank 0 is simulated.
TEST(HarmonyEstimator, DataParallelTimeline)
{
  const Estimate estimate = harmony::estimate(tiny_profile(), 2, 4, Mode::dp, tiny_configuration(), unit_settings());
  expect_span(estimate, 0, 0, "WB", 0, 2);
  expect_span(estimate, 0, 0, "X", 2, 3);
  expect_span(estimate, 0, 0, "sX", 3, 4);
  expect_span(estimate, 0, 0, "FWD", 4, 5);
  expect_span(estimate, 0, 0, "Y", 5, 7); // swapped out
  expect_span(estimate, 0, 1, "X", 7, 8); // next input after the previous output left
  expect_span(estimate, 0, 1, "sX", 8, 9);
  expect_span(estimate, 0, 1, "FWD", 9, 10);
  expect_span(estimate, 0, 1, "Y", 10, 12);
  expect_span(estimate, 0, 0, "DEL", 12, 12.5);
  expect_span(estimate, 1, 0, "WB", 12.5, 13.5);
  expect_span(estimate, 1, 0, "X", 13.5, 15.5);
  expect_span(estimate, 1, 0, "REC", 15.5, 18.5);
  expect_span(estimate, 1, 0, "BWD", 18.5, 22.5);
  expect_span(estimate, 1, 0, "dX", 22.5, 24.5);
  expect_span(estimate, 1, 1, "X", 24.5, 26.5);
  expect_span(estimate, 1, 1, "BWD", 29.5, 33.5);
  expect_span(estimate, 1, 1, "dX", 33.5, 35.5);
  expect_span(estimate, 1, 0, "ARD", 35.5, 36.5); // 2(2-1)/2 * 1 B / 1 B/s
  expect_span(estimate, 1, 0, "dWB", 36.5, 37.5);
  expect_span(estimate, 1, 0, "DEL", 37.5, 38);
  expect_span(estimate, 2, 0, "Update", 37.5, 38.25);
  expect_span(estimate, 3, 0, "WB", 38, 40);
  expect_span(estimate, 3, 0, "sX", 40, 41);
  expect_span(estimate, 3, 0, "REC", 41, 42);
  expect_span(estimate, 3, 0, "dY", 42, 44); // swapped in after this microbatch's recompute
  expect_span(estimate, 3, 0, "BWD", 44, 46);
  expect_span(estimate, 3, 1, "sX", 46, 47); // no dX (layer 0): waits for the previous backward
  expect_span(estimate, 3, 1, "REC", 47, 48);
  expect_span(estimate, 3, 1, "dY", 48, 50);
  expect_span(estimate, 3, 1, "BWD", 50, 52);
  expect_span(estimate, 3, 0, "ARD", 52, 54);
  expect_span(estimate, 3, 0, "dWB", 54, 56);
  expect_span(estimate, 3, 0, "DEL", 56, 56.5);
  expect_span(estimate, 4, 0, "Update", 56, 56.25);
  ASSERT_EQ(estimate.rank_end_s.size(), 1u);
  EXPECT_DOUBLE_EQ(estimate.iteration_s, 56.5);
  EXPECT_EQ(estimate.rank_memory_bytes, (std::vector<double>{45}));
}

TEST(HarmonyEstimator, DeterministicAndRejectsBadConfigurations)
{
  const LayerProfile profile = tiny_profile();
  const Estimate first = harmony::estimate(profile, 2, 2, Mode::pp, tiny_configuration(), unit_settings());
  const Estimate second = harmony::estimate(profile, 2, 2, Mode::pp, tiny_configuration(), unit_settings());
  ASSERT_EQ(first.events.size(), second.events.size());
  for (std::size_t i = 0; i < first.events.size(); ++i)
    EXPECT_EQ(first.events[i].end_s, second.events[i].end_s);
  Configuration gap = tiny_configuration();
  gap.packs_backward = {{0, 0}, {2, 2}};
  EXPECT_THROW((void)harmony::estimate(profile, 2, 2, Mode::pp, gap, unit_settings()), InputError);
  Configuration large = tiny_configuration();
  large.u_forward = large.u_backward = 2; // not sampled, outside [1, 1]
  EXPECT_THROW((void)harmony::estimate(profile, 2, 2, Mode::pp, large, unit_settings()), InputError);
  EXPECT_THROW((void)harmony::estimate(profile, 2, 1, Mode::dp, tiny_configuration(), unit_settings()), InputError)
      << "rank 1 would get no sample";
  EXPECT_EQ(format_packs(parse_packs("0-9,10,11-12", "--packs")), "0-9,10-10,11-12");
  EXPECT_THROW((void)parse_packs("0-9,x", "--packs"), InputError);
}

// One GPU, or a whole model in one backward pack: Harmony treats pp on one GPU as a single rank.
TEST(HarmonyEstimator, SingleGpuPipelineEqualsDataParallelOnOneGpu)
{
  const LayerProfile profile = tiny_profile();
  const Estimate pp = harmony::estimate(profile, 1, 2, Mode::pp, tiny_configuration(), unit_settings());
  const Estimate dp = harmony::estimate(profile, 1, 2, Mode::dp, tiny_configuration(), unit_settings());
  EXPECT_DOUBLE_EQ(pp.iteration_s, dp.iteration_s);
  const Estimate whole = harmony::estimate(profile, 2, 2, Mode::pp, {1, 1, {}, {{0, 2}}}, unit_settings());
  EXPECT_GT(whole.iteration_s, 0);
}

} // namespace
} // namespace memsim::harmony
