// The sequence helpers' generation_ends (planners/src/sequence.hpp) on the 3-layer test chain, worked out by hand,
// with and without a recompute that starts a second generation of a0.
#include "test_traces.hpp"
#include "unpacked_lists.hpp"

#include "../../planners/src/sequence.hpp"

#include "memsim/sim/trace_analysis.hpp"

#include <gtest/gtest.h>

namespace memsim {
namespace {

using test::unpacked;

// make_chain(3): tensors x 0, w0 1, a0 2, w1 3, a1 4, w2 5, a2 6, g2 7, dw2 8, g1 9, dw1 10, g0 11, dw0 12;
// ops f0 0, f1 1, f2 2, loss 3, b2 4 (g2 a1 w2 -> dw2 g1), b1 5 (g1 a0 w1 -> dw1 g0), b0 6 (g0 x w0 -> dw0).
TEST(GenerationEnds, ByHandOnTheChain)
{
  const Trace trace = test::make_chain(3, 1000);
  const TraceAnalysis analysis(trace);
  std::vector<planning::SequenceEntry> sequence;
  for (const Op& op : trace.ops)
    sequence.push_back({op.id, false});
  // a2 after the loss, a1 and g2 after b2, a0 and g1 after b1, g0 after b0; weight gradients stay.
  EXPECT_EQ(unpacked(planning::generation_ends(analysis, sequence)),
            (std::vector<std::vector<TensorId>>{{}, {}, {}, {6}, {4, 7}, {2, 9}, {11}}));
  // f0 recomputed before b1: a0's first generation ends at its last read before that (f1), the second at b1.
  sequence.insert(sequence.begin() + 5, planning::SequenceEntry{0, true});
  EXPECT_EQ(unpacked(planning::generation_ends(analysis, sequence)),
            (std::vector<std::vector<TensorId>>{{}, {2}, {}, {6}, {4, 7}, {}, {2, 9}, {11}}));
}

} // namespace
} // namespace memsim
