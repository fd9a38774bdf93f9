#include "memsim/sim/trace_analysis.hpp"
#include "test_traces.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

using ::testing::ElementsAre;

constexpr std::uint64_t kA = 1'000'000;

// make_chain(3): tensors x 0, w0 1, a0 2, w1 3, a1 4, w2 5, a2 6, g2 7, dw2 8, g1 9, dw1 10, g0 11, dw0 12;
// ops f0 0, f1 1, f2 2, loss 3, b2 4 (g2 a1 w2 -> dw2 g1), b1 5 (g1 a0 w1 -> dw1 g0), b0 6 (g0 x w0 -> dw0).
TEST(TraceAnalysis, ProducersReadersAndReleases)
{
  const Trace trace = test::make_chain(3, kA);
  const TraceAnalysis analysis(trace);
  EXPECT_EQ(analysis.producer(2), 0);
  EXPECT_FALSE(analysis.producer(0)); // the input is resident
  EXPECT_THAT(analysis.readers(2), ElementsAre(1, 5));
  EXPECT_EQ(analysis.first_read(2), 1);
  EXPECT_EQ(analysis.last_read(2), 5);
  EXPECT_THAT(analysis.readers(0), ElementsAre(0, 6));
  EXPECT_FALSE(analysis.first_read(8)); // dw2: nothing reads it (no update op)
  EXPECT_TRUE(analysis.kept_to_end(8));
  EXPECT_FALSE(analysis.kept_to_end(0)); // resident, not produced
  EXPECT_TRUE(analysis.released_after(0).empty());
  EXPECT_THAT(analysis.released_after(3), ElementsAre(6));
  EXPECT_THAT(analysis.released_after(4), ElementsAre(4, 7));
  EXPECT_THAT(analysis.released_after(5), ElementsAre(2, 9));
  EXPECT_THAT(analysis.released_after(6), ElementsAre(11));
  EXPECT_EQ(analysis.resident_tensors(), (std::vector<TensorId>{0, 1, 3, 5}));
  EXPECT_EQ(analysis.resident_bytes(), kA + 3000);
}

// The flat lists give each op's inputs and outputs as the trace lists them, repeats and empty lists included.
TEST(TraceAnalysis, FlatInputsOutputsAndPhases)
{
  Trace trace = test::make_chain(3, kA);
  trace.ops[4].inputs.push_back(7); // b2 reads g2 twice
  trace.ops[6].outputs.clear();     // b0 makes nothing
  const TraceAnalysis analysis(trace);
  auto ids = [](std::span<const TensorId> span) { return std::vector<TensorId>(span.begin(), span.end()); };
  EXPECT_EQ(ids(analysis.inputs(0)), (std::vector<TensorId>{0, 1}));
  EXPECT_EQ(ids(analysis.outputs(0)), (std::vector<TensorId>{2}));
  EXPECT_EQ(ids(analysis.inputs(4)), (std::vector<TensorId>{7, 4, 5, 7}));
  EXPECT_EQ(ids(analysis.outputs(4)), (std::vector<TensorId>{8, 9}));
  EXPECT_TRUE(analysis.outputs(6).empty());
  for (const Op& op : trace.ops) {
    EXPECT_EQ(ids(analysis.inputs(op.id)), op.inputs);
    EXPECT_EQ(ids(analysis.outputs(op.id)), op.outputs);
    EXPECT_EQ(analysis.phase(op.id), op.phase);
  }
}

TEST(TraceAnalysis, FreeAfterUnreadOutputsAndWeightGradients)
{
  Trace trace = test::make_chain(3, kA);
  trace.tensors.push_back(Tensor{13, "stats", 500, TensorKind::activation, {}, {}, {}});
  trace.ops[0].outputs.push_back(13); // produced by f0, never read: released right after f0
  trace.tensors[2].free_after = 1;    // earlier than a0's last read (b1): the last read wins
  trace.tensors[6].free_after = 5;    // later than a2's last read (loss): the framework kept it until b1
  trace.tensors[8].free_after = 6;    // a weight gradient the framework released
  const TraceAnalysis analysis(trace);
  EXPECT_EQ(analysis.lifetime(13).released_after, 0);
  EXPECT_EQ(analysis.lifetime(2).released_after, 5);
  EXPECT_EQ(analysis.lifetime(6).released_after, 5);
  EXPECT_EQ(analysis.lifetime(8).released_after, 6);
  EXPECT_FALSE(analysis.kept_to_end(8));
  EXPECT_TRUE(analysis.kept_to_end(10)); // dw1 stays
  EXPECT_THAT(analysis.released_after(0), ElementsAre(13));
  EXPECT_TRUE(analysis.released_after(3).empty());
  EXPECT_THAT(analysis.released_after(5), ElementsAre(2, 6, 9));
  EXPECT_THAT(analysis.released_after(6), ElementsAre(8, 11));
}

TEST(TraceAnalysis, DefaultProfileByHand)
{
  const Trace trace = test::make_chain(3, kA);
  const MemoryProfile profile = default_memory_profile(trace);
  // Resident x + 3 weights; at b2 (a2 was freed after the loss): a0 a1 g2 + dw2 + g1 = 4A + 1000 more.
  EXPECT_EQ(profile.resident_bytes, kA + 3000);
  EXPECT_EQ(profile.peak_bytes, 5 * kA + 4000);
  EXPECT_EQ(profile.peak_op, 4);
  EXPECT_EQ(profile.in_use_during,
            (std::vector<std::uint64_t>{2 * kA + 3000, 3 * kA + 3000, 4 * kA + 3000, 5 * kA + 3000, 5 * kA + 4000,
                                        4 * kA + 5000, 2 * kA + 6000}));
}

TEST(TraceAnalysis, WorkspaceCountsWhileTheOpRuns)
{
  Trace trace = test::make_chain(3, kA);
  trace.ops[0].workspace_bytes = 10 * kA;
  const MemoryProfile profile = analyze(trace)->default_profile();
  EXPECT_EQ(profile.peak_op, 0);
  EXPECT_EQ(profile.peak_bytes, 12 * kA + 3000);
  EXPECT_EQ(profile.in_use_during[1], 3 * kA + 3000); // released after f0
}

} // namespace
} // namespace memsim
