// On a GPU (label gpu; skipped without one): the spin kernels reproduce the trace times, the pipeline
// fixture runs within its budget and an OOM plan is reported, not silently run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>

using ::testing::HasSubstr;

namespace {

// MEMSIM_CUDA_EXE / MEMSIM_RUNTIME_TEST_DATA override the build-time paths (a binary carried to a GPU box).
std::string from_env(const char* name, const char* fallback)
{
  const char* value = std::getenv(name);
  return value ? value : fallback;
}
const std::string kData = from_env("MEMSIM_RUNTIME_TEST_DATA", MEMSIM_TEST_DATA_DIR);
const std::string kExe = from_env("MEMSIM_CUDA_EXE", MEMSIM_CUDA_EXE);

struct Outcome {
  int exit_code = -1;
  std::string output;
};

Outcome run(const std::string& arguments)
{
  const std::string command = kExe + " " + arguments + " 2>&1";
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

// Runs a plan; skips the test when there is no device.
nlohmann::json run_plan(const std::string& trace, const std::string& plan, Outcome& outcome)
{
  const auto timeline = std::filesystem::temp_directory_path() / ("memsim_gpu_" + plan);
  outcome = run("run --trace " + kData + "/" + trace + " --plan " + kData + "/" + plan +
                " --warmup 1 --iterations 3 --timeline " + timeline.string());
  if (outcome.exit_code == 3)
    return nullptr;
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  nlohmann::json document = nlohmann::json::parse(std::ifstream(timeline));
  std::filesystem::remove(timeline);
  return document;
}

} // namespace

TEST(MemsimCudaGpu, SpinKernelsTakeTheTraceTime)
{
  Outcome outcome;
  nlohmann::json document = run_plan("chain.trace.json", "chain.plan.json", outcome);
  if (document.is_null())
    GTEST_SKIP() << "no CUDA device: " << outcome.output;
  for (const auto& step : document["measured"]["steps"]) {
    if (!step.contains("requested_s"))
      continue;
    const double requested = step["requested_s"].get<double>();
    const double measured = step["duration_s"]["median"].get<double>();
    EXPECT_NEAR(measured, requested, 0.02 * requested + 10e-6) << "step " << step["step"];
  }
  EXPECT_EQ(document["measured"]["iterations"], 3);
}

TEST(MemsimCudaGpu, PipelineStaysWithinItsBudget)
{
  Outcome outcome;
  nlohmann::json document = run_plan("pipeline.trace.json", "pipeline.plan.json", outcome);
  if (document.is_null())
    GTEST_SKIP() << "no CUDA device";
  EXPECT_THAT(outcome.output, HasSubstr("feasible"));
  EXPECT_LE(document["measured"]["pool"]["list_order_peak_bytes"].get<std::uint64_t>(), 420000000u);
}

TEST(MemsimCudaGpu, OutOfMemoryIsReportedNotRun)
{
  Outcome outcome;
  nlohmann::json document = run_plan("chain.trace.json", "oom.plan.json", outcome);
  if (document.is_null())
    GTEST_SKIP() << "no CUDA device";
  EXPECT_THAT(outcome.output, HasSubstr("infeasible: out of memory: step 5 (compute on gpu0/compute)"));
  EXPECT_EQ(document["measured"]["steps"].size(), 5u);
}
