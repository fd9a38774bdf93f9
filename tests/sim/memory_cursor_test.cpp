#include "memsim/sim/flat_trace.hpp"
#include "memsim/sim/memory_cursor.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "test_traces.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace memsim {
namespace {

constexpr std::uint64_t kA = 1'000'000;

// make_chain(3) ids: x 0, w0 1, a0 2, w1 3, a1 4, w2 5, a2 6, g2 7, dw2 8, g1 9, dw1 10, g0 11, dw0 12;
// ops f0 0, f1 1, f2 2, loss 3, b2 4, b1 5, b0 6.
TEST(MemoryCursor, CheckpointedSequenceWithRecompute)
{
  Trace trace = test::make_chain(3, kA);
  trace.ops[0].workspace_bytes = 2 * kA;
  const TraceAnalysis analysis(trace);
  MemoryCursor memory(analysis.flat(), analysis.resident_tensors());
  EXPECT_EQ(memory.start_bytes(), kA + 3000);
  EXPECT_EQ(memory.run(0), 4 * kA + 3000); // a0 + f0's workspace
  EXPECT_EQ(memory.in_use(), 2 * kA + 3000);
  EXPECT_EQ(memory.run(1), 3 * kA + 3000);
  memory.free(2); // keep only a1: a0 is recomputed for b1
  memory.run(2);
  EXPECT_EQ(memory.run(3), 4 * kA + 3000);
  memory.free(6);
  EXPECT_EQ(memory.run(4), 4 * kA + 4000); // a1 g2 g1 dw2
  memory.free(4);
  memory.free(7);
  EXPECT_EQ(memory.in_use(), 2 * kA + 4000);
  EXPECT_EQ(memory.run(0), 5 * kA + 4000); // the recompute of f0, with its workspace: the peak
  EXPECT_EQ(memory.run(5), 4 * kA + 5000);
  memory.free(2);
  memory.free(9);
  EXPECT_EQ(memory.run(6), 2 * kA + 6000);
  memory.free(11);
  EXPECT_EQ(memory.in_use(), kA + 6000); // resident + the three weight gradients
  EXPECT_EQ(memory.peak(), 5 * kA + 4000);
  EXPECT_EQ(memory.peak_op(), 0);
}

TEST(MemoryCursor, DoubleAllocationAndFreeOfAbsentTensorAreBugs)
{
  const Trace trace = test::make_chain(3, kA);
  const TraceAnalysis analysis(trace);
  MemoryCursor memory(analysis.flat(), {});
  memory.run(0);
  EXPECT_THROW(memory.run(0), std::logic_error);  // a0 is still on the device
  EXPECT_THROW(memory.free(4), std::logic_error); // a1 was never produced
  memory.free(2);
  EXPECT_FALSE(memory.on_device(2));
  EXPECT_EQ(memory.in_use(), 0u);
}

TEST(MemoryCursor, PrefetchPeakHasNoOp)
{
  const Trace trace = test::make_chain(3, kA);
  const TraceAnalysis analysis(trace);
  MemoryCursor memory(analysis.flat(), {});
  EXPECT_EQ(memory.peak(), 0u);
  EXPECT_FALSE(memory.peak_op());
  memory.run(0);
  EXPECT_EQ(memory.peak_op(), 0);
  memory.bring(6); // a2 comes back from the host: 2A, above a0 alone
  EXPECT_EQ(memory.peak(), 2 * kA);
  EXPECT_FALSE(memory.peak_op());
}

TEST(MemoryCursor, TensorsCountedElsewhereWeighNothing)
{
  const Trace trace = test::make_chain(3, kA);
  const std::vector<TensorId> live_before{6, 7}; // a2 (read by nothing later) and g2
  const std::vector<TensorId> weight_grads{8, 10, 12};
  const TraceAnalysis analysis(trace);
  MemoryCursor memory(analysis.flat(), live_before, weight_grads);
  EXPECT_EQ(memory.start_bytes(), 2 * kA);
  EXPECT_EQ(memory.run(4), 3 * kA); // g1; dw2 is counted elsewhere
  EXPECT_TRUE(memory.on_device(8));
  memory.free(8);
  EXPECT_EQ(memory.in_use(), 3 * kA);
}

// A FlatTrace needs no schedule of its trace: here two ops write the same tensors (as tsplit's micro-ops write parts
// of one gradient), which the default schedule would allocate twice; the caller frees them in between.
TEST(MemoryCursor, AccountsATraceWithoutADefaultSchedule)
{
  Trace trace = test::make_chain(3, kA);
  Op again = trace.ops[4]; // b2 once more: g1 9 and dw2 8
  again.id = 7;
  again.workspace_bytes = 3 * kA;
  trace.ops.push_back(again);
  const FlatTrace ops(trace);
  EXPECT_EQ(ops.workspace_bytes(7), 3 * kA);
  EXPECT_EQ(ops.phase(7), Phase::backward);
  MemoryCursor memory(ops, std::vector<TensorId>{4, 7}); // a1 and g2
  EXPECT_EQ(memory.run(4), 3 * kA + 1000);
  memory.free(8);
  memory.free(9);
  EXPECT_EQ(memory.run(7), 6 * kA + 1000); // its outputs again, with its workspace
  EXPECT_THROW(memory.run(7), std::logic_error);
  EXPECT_EQ(memory.peak(), 6 * kA + 1000);
  EXPECT_EQ(memory.peak_op(), 7);
}

} // namespace
} // namespace memsim
