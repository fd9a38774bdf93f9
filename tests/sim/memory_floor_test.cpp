#include "memsim/sim/memory_floor.hpp"
#include "test_traces.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

constexpr std::uint64_t kA = 1'000'000;

// make_chain(3): tensors x 0, w0 1, a0 2, w1 3, a1 4, w2 5, a2 6, g2 7, dw2 8, g1 9, dw1 10, g0 11, dw0 12;
// ops f0 0, f1 1, f2 2, loss 3, b2 4 (g2 a1 w2 -> dw2 g1), b1 5 (g1 a0 w1 -> dw1 g0), b0 6 (g0 x w0 -> dw0).
// Preexisting: the input and weights (no op produces them). Working: what an op holds besides them while it runs.
TEST(MemoryFloor, PreexistingAndWorkingBytes)
{
  Trace trace = test::make_chain(3, kA);
  trace.ops[4].workspace_bytes = 7;
  trace.ops[4].inputs.push_back(7); // g2 read twice counts once
  const TraceAnalysis analysis(trace);
  EXPECT_TRUE(analysis.preexisting(0));
  EXPECT_TRUE(analysis.preexisting(5));
  EXPECT_FALSE(analysis.preexisting(2));
  EXPECT_EQ(preexisting_bytes(analysis), kA + 3000);
  EXPECT_EQ(working_bytes(analysis, 0), kA);                // f0: x w0 -> a0
  EXPECT_EQ(working_bytes(analysis, 4), 3 * kA + 1000 + 7); // b2: g2 a1 (w2) -> dw2 g1, and its workspace
  EXPECT_EQ(working_bytes(analysis, 6), kA + 1000);         // b0: g0 (x w0) -> dw0
  // A weight that no op reads still takes memory (the initial-residency rule).
  trace.tensors.push_back(Tensor{13, "unused", 500, TensorKind::weight, {}, {}, {}});
  const TraceAnalysis unused(trace);
  EXPECT_TRUE(unused.preexisting(13));
  EXPECT_EQ(preexisting_bytes(unused), kA + 3500);
  EXPECT_EQ(working_bytes(unused, 4), 3 * kA + 1000 + 7);
}

// A trace built in code may produce a tensor of an initially resident kind (validation refuses it in a file): it is
// then not preexisting, as for the engines' initial placement, and the default schedule allocates it when produced.
TEST(MemoryFloor, AProducedWeightIsNotPreexisting)
{
  Trace trace = test::make_chain(3, kA);
  trace.tensors.push_back(Tensor{13, "made", 500, TensorKind::weight, {}, {}, {}});
  trace.ops[1].outputs.push_back(13); // f1 makes it
  const TraceAnalysis analysis(trace);
  EXPECT_FALSE(analysis.preexisting(13));
  EXPECT_EQ(analysis.resident_tensors(), (std::vector<TensorId>{0, 1, 3, 5}));
  EXPECT_EQ(analysis.resident_bytes(), kA + 3000);
  EXPECT_EQ(preexisting_bytes(analysis), kA + 3000);
  EXPECT_EQ(working_bytes(analysis, 1), 2 * kA + 500); // f1: a0 (w1) -> a1 and the made weight
}

} // namespace
} // namespace memsim
