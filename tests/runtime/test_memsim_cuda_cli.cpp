// memsim-cuda as a program: bad input (exit 2, located), --dry-run, and the no-device message (exit 3).
// These run everywhere the binary is built; with a GPU the no-device case checks a real run instead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>

using ::testing::HasSubstr;
using ::testing::Not;

namespace {

const std::string kData = MEMSIM_TEST_DATA_DIR;

struct Outcome {
  int exit_code = -1;
  std::string output; // stdout + stderr
};

Outcome run(const std::string& arguments)
{
  const std::string command = std::string(MEMSIM_CUDA_EXE) + " " + arguments + " 2>&1";
  Outcome outcome;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe)
    return outcome;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe))
    outcome.output += buffer.data();
  const int status = pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

std::string fixtures(const char* plan) { return "--trace " + kData + "/chain.trace.json --plan " + kData + "/" + plan; }

} // namespace

TEST(MemsimCudaCli, BadPlanExitsTwoWithTheLocation)
{
  Outcome outcome = run("run " + fixtures("send.plan.json") + " --timeline /dev/null");
  EXPECT_EQ(outcome.exit_code, 2) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("memsim-cuda: " + kData +
                                        "/send.plan.json: at /steps/1/kind: memsim-cuda runs "
                                        "single-GPU plans; step 1 is a send"));
}

TEST(MemsimCudaCli, UnknownKernelsAndMissingOptionsExitTwo)
{
  Outcome kernels = run("run " + fixtures("chain.plan.json") + " --kernels warp");
  EXPECT_EQ(kernels.exit_code, 2);
  EXPECT_THAT(kernels.output, HasSubstr("--kernels: unknown kernels 'warp' (valid: spin, gemm)"));
  Outcome missing = run("run --trace " + kData + "/chain.trace.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("--plan is required"));
}

TEST(MemsimCudaCli, DryRunPrintsStreamsWaitsAndTheOutOfMemoryWithoutAGpu)
{
  Outcome chain = run("run --dry-run " + fixtures("chain.plan.json"));
  EXPECT_EQ(chain.exit_code, 0) << chain.output;
  EXPECT_THAT(chain.output, HasSubstr("stream 0 (device 0, 'compute'): 7 steps, 1 event waits"));
  EXPECT_THAT(chain.output, HasSubstr("steps: 10 of 10 enqueued; event waits: 4 from deps, 0 for memory ordering"));
  EXPECT_THAT(chain.output, HasSubstr("list-order peak 7003000 bytes"));
  Outcome oom = run("run --dry-run " + fixtures("oom.plan.json"));
  EXPECT_EQ(oom.exit_code, 0);
  EXPECT_THAT(oom.output, HasSubstr("infeasible (out_of_memory): out of memory: step 5 (compute on gpu0/compute)"));
}

// A v2 plan (split/merge views, a weight placed on the host and prefetched, host compute, two iterations): the
// split peaks at 9 MB, w and the host step's output are pinned buffers, the host step is a busy loop of its cpu_time_s.
TEST(MemsimCudaCli, DryRunOfAV2Plan)
{
  const std::string files = "--trace " + kData + "/v2.trace.json --plan " + kData + "/v2.plan.json";
  Outcome outcome = run("run --dry-run " + files);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_THAT(outcome.output, Not(HasSubstr("infeasible")));
  EXPECT_THAT(outcome.output, HasSubstr("stream 1 (device -1, 'cpu0'): 1 steps"));
  EXPECT_THAT(outcome.output, HasSubstr("list-order peak 9000000 bytes, 2 pinned host buffers"));
  EXPECT_THAT(outcome.output, HasSubstr("host compute: 1 steps, 0.002000 s of host busy loops"));
  Outcome ring = run("run --dry-run --trace " + kData + "/v2.trace.json --plan " + kData + "/v2-allreduce.plan.json");
  EXPECT_EQ(ring.exit_code, 2) << ring.output;
  EXPECT_THAT(ring.output, HasSubstr("step 0: allreduce over group [0, 1] needs 2 GPUs"));
}

// The fixtures of tests/sim/core_cases_test.cpp (both simulator engines) through the dry run.
TEST(MemsimCudaCli, DryRunReportsTheCoreCasesLikeTheSimulators)
{
  auto files = [](const std::string& name) {
    return "--trace " + kData + "/" + name + ".trace.json --plan " + kData + "/" + name + ".plan.json";
  };
  Outcome unused = run("run --dry-run " + files("unused-weight"));
  EXPECT_EQ(unused.exit_code, 0) << unused.output;
  EXPECT_THAT(unused.output, HasSubstr("infeasible (out_of_memory): out of memory: device 0 ('gpu0'): the tensors "
                                       "resident from the start need 51000000 bytes, budget is 10000000 bytes"));
  Outcome bytes = run("run --dry-run " + files("fragment"));
  EXPECT_EQ(bytes.exit_code, 0) << bytes.output;
  EXPECT_THAT(bytes.output, Not(HasSubstr("infeasible")));
  EXPECT_THAT(bytes.output, HasSubstr("list-order peak 3145728 bytes"));
  Outcome pool = run("run --dry-run --allocator pool " + files("fragment"));
  EXPECT_EQ(pool.exit_code, 0) << pool.output;
  EXPECT_THAT(pool.output, HasSubstr("infeasible (fragmentation): out of memory (fragmentation): step 5 (compute on "
                                     "gpu0/compute) allocates tensor 3 'd' (2097152 bytes) on gpu0 before it runs "
                                     "with 1048576 bytes in use of the budget of 3145728 bytes, but the largest free "
                                     "block is 1048576 bytes"));
  Outcome unknown = run("run --dry-run --allocator slab " + files("fragment"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.output, HasSubstr("--allocator: unknown allocator 'slab' (valid: bytes, pool)"));
}

TEST(MemsimCudaCli, WithoutADeviceItSaysSoAndExitsThree)
{
  const auto timeline = std::filesystem::temp_directory_path() / "memsim_cuda_cli_timeline.json";
  Outcome outcome =
      run("run " + fixtures("chain.plan.json") + " --iterations 2 --warmup 1 --timeline " + timeline.string());
  if (outcome.exit_code == 3) {
    EXPECT_THAT(outcome.output, HasSubstr("memsim-cuda: no CUDA device found ("));
    EXPECT_FALSE(std::filesystem::exists(timeline));
    Outcome calibrate = run("calibrate --out " + (std::filesystem::temp_directory_path() / "m.yaml").string());
    EXPECT_EQ(calibrate.exit_code, 3);
    EXPECT_THAT(calibrate.output, HasSubstr("memsim-cuda: no CUDA device found ("));
    return;
  }
  // A GPU is present: the run must have worked.
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  nlohmann::json document = nlohmann::json::parse(std::ifstream(timeline));
  EXPECT_TRUE(document.contains("measured"));
  std::filesystem::remove(timeline);
}

TEST(MemsimCudaCli, AssembleRebuildsTheTimelineFromRawTimingsWithoutAGpu)
{
  // The chain plan's ten steps, as a run would have recorded them (ms).
  const std::vector<std::pair<double, double>> ms{{0, 1},     {1, 1.5},   {1, 2},     {2, 2},     {2, 2.5},
                                                  {2.5, 4.5}, {4.5, 4.5}, {4.5, 4.5}, {4.5, 6.5}, {6.5, 6.5}};
  nlohmann::json starts = nlohmann::json::array(), ends = nlohmann::json::array();
  for (auto [start, end] : ms) {
    starts.push_back(start * 1e-3);
    ends.push_back(end * 1e-3);
  }
  nlohmann::json raw = {{"format", "memsim-cuda-timings"},
                        {"version", 1},
                        {"gpu", "Test GPU"},
                        {"kernels", "spin"},
                        {"warmup", 1},
                        {"spin_overhead_s", 2e-6},
                        {"enqueue_gate_s", 1e-3},
                        {"pool", {{"budget_bytes", 8000000}, {"arena_bytes", 11048576}, {"alignment", 256}}},
                        {"iterations", {{{"start_s", starts}, {"end_s", ends}}}}};
  const auto dir = std::filesystem::temp_directory_path();
  const auto raw_path = dir / "memsim_cuda_cli_raw.json";
  const auto timeline = dir / "memsim_cuda_cli_assembled.json";
  std::ofstream(raw_path) << raw.dump();
  Outcome outcome = run("assemble " + fixtures("chain.plan.json") + " --timings " + raw_path.string() + " --timeline " +
                        timeline.string());
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("iteration time: median 0.006500 s"));
  EXPECT_THAT(outcome.output, HasSubstr("compute busy 0.006000 s, stall 0.000500 s"));
  nlohmann::json document = nlohmann::json::parse(std::ifstream(timeline));
  EXPECT_EQ(document["measured"]["gpu"], "Test GPU");

  // Timings that do not match the plan's program are refused.
  raw["iterations"][0]["start_s"].erase(9);
  raw["iterations"][0]["end_s"].erase(9);
  std::ofstream(raw_path) << raw.dump();
  Outcome wrong = run("assemble " + fixtures("chain.plan.json") + " --timings " + raw_path.string());
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_THAT(wrong.output, HasSubstr("at /iterations/0: 9 step times for a program of 10 steps"));
  std::filesystem::remove(raw_path);
  std::filesystem::remove(timeline);
}

TEST(MemsimCudaCli, CalibrateFromRawReproducesTheCommittedMachineFile)
{
  const std::string calibration = std::string(MEMSIM_SOURCE_DIR) + "/runtime/calibration/";
  const auto out = std::filesystem::temp_directory_path() / "h100-calibrated.yaml";
  Outcome outcome =
      run("calibrate --from-raw " + calibration + "h100-calibrated.calibration.json --out " + out.string());
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(out), read(calibration + "h100-calibrated.yaml"));
  std::filesystem::remove(out);
}
