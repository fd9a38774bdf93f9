// Two cases every backend of the execution core must get right (the same fixtures run through memsim-cuda's
// program builder in tests/runtime and through `memsim simulate` in tests/cli), on both engines:
//  - a weight no op reads still exists from t = 0 (the initial-residency rule): 50 MB in a 10 MB budget is out
//    of memory before any step runs;
//  - three equal blocks, the outer two freed, then two blocks' worth: it fits by bytes, but under the pool
//    allocator no free block is large enough (fragmentation), with the numbers to show it.
#include "engine_comparison.hpp"

#include "memsim/planners/plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace memsim {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kFixtures = std::filesystem::path(MEMSIM_SOURCE_DIR) / "tests" / "runtime";

Machine one_gpu()
{
  Machine machine;
  machine.name = "one-gpu";
  machine.gpus.push_back(Gpu{"gpu0", "test-gpu", 16ull << 30, {{"fp32", 10e12}}, 900e9, 0});
  machine.host.memory = 1ull << 36;
  machine.links.push_back(Link{"pcie", "gpu0", "host", 16e9, 0, Duplex::split});
  return machine;
}

RunResult run(const char* name, EngineKind engine, AllocatorKind allocator)
{
  const Trace trace = load_trace(kFixtures / (std::string(name) + ".trace.json"));
  const Plan plan = load_plan(kFixtures / (std::string(name) + ".plan.json"));
  SimOptions options;
  options.allocator = allocator;
  return test::run_on_engine(engine, trace, one_gpu(), plan, options);
}

TEST(CoreCases, AWeightNoOpReadsStillTakesMemoryFromTheStart)
{
  for (EngineKind engine : {EngineKind::simgrid, EngineKind::fast}) {
    for (AllocatorKind allocator : {AllocatorKind::bytes, AllocatorKind::pool}) {
      const RunResult result = run("unused-weight", engine, allocator);
      ASSERT_TRUE(result.error) << to_string(engine);
      EXPECT_FALSE(result.metrics.feasible);
      EXPECT_EQ(result.error->kind, FailureKind::out_of_memory);
      EXPECT_EQ(result.error->step, -1);
      EXPECT_EQ(result.error->bytes_in_use, 51000000u); // x and the unread 50 MB weight
      EXPECT_THAT(result.error->message, HasSubstr("the tensors resident from the start need 51000000 bytes, budget "
                                                   "is 10000000 bytes"));
      EXPECT_TRUE(result.timeline.empty());
    }
  }
}

TEST(CoreCases, FreedOuterBlocksFitByBytesButFragmentThePool)
{
  for (EngineKind engine : {EngineKind::simgrid, EngineKind::fast}) {
    const RunResult bytes = run("fragment", engine, AllocatorKind::bytes);
    EXPECT_TRUE(bytes.metrics.feasible) << (bytes.error ? bytes.error->message : "");
    EXPECT_EQ(bytes.metrics.peak_device_bytes, 3145728u);

    const RunResult pool = run("fragment", engine, AllocatorKind::pool);
    ASSERT_TRUE(pool.error) << to_string(engine);
    EXPECT_EQ(pool.error->kind, FailureKind::fragmentation);
    EXPECT_EQ(pool.error->step, 5);
    EXPECT_EQ(pool.error->tensor, TensorId{3});
    EXPECT_EQ(pool.error->bytes_in_use, 1048576u);
    EXPECT_EQ(pool.error->bytes_requested, 2097152u);
    EXPECT_EQ(pool.error->largest_free_block, 1048576u);
    EXPECT_EQ(pool.error->message,
              "out of memory (fragmentation): step 5 (compute on gpu0/compute) allocates tensor 3 'd' (2097152 bytes) "
              "on gpu0 at t=0.003000000s with 1048576 bytes in use of the budget of 3145728 bytes, but the largest "
              "free block is 1048576 bytes");
  }
}

} // namespace
} // namespace memsim
