// Sweeps that lose nothing: the runner killed by SIGKILL mid-sweep, a worker killed mid-cell (after writing half a
// result), an output folder that cannot be written, a disk that fills up. Each run is compared byte for byte with
// an uninterrupted run of the same experiment.
#include "experiment_test_support.hpp"

#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/runner.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <regex>
#include <thread>

namespace memsim::experiments {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing::data_dir;
using testing::read_file;
using testing::run_command;
using testing::ScratchDir;
using testing::write_file;

const std::filesystem::path kMemsim = MEMSIM_EXECUTABLE;

// 3 planners x 8 budgets of the 4-layer chain: 24 cells, long enough (one worker at a time) to be killed midway.
std::filesystem::path write_experiment(const ScratchDir& scratch)
{
  std::filesystem::path path = scratch / "crash.yaml";
  write_file(path, "format: memsim-experiment\nversion: 1\nname: crash\nmachine: " +
                       (data_dir() / "small.machine.yaml").string() +
                       "\nworkloads:\n  - {name: chain4, trace: " + (data_dir() / "chain4.trace.json").string() +
                       "}\nplanners: [keep-all, vdnn-all, checkpoint-sqrt]\n"
                       "sweep:\n  budget: {fraction_of_peak: [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]}\n");
  return path;
}

std::string reference_csv(const ScratchDir& scratch, const std::filesystem::path& experiment_file)
{
  const auto result = run_command(kMemsim.string() + " run " + experiment_file.string() + " --no-plots --out " +
                                  (scratch / "reference").string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return read_file(scratch / "reference" / "results.csv");
}

// Finished cells: OUT/cells/<key>.json (not the <key>.cell.json inputs, not temporaries).
std::size_t finished_cells(const std::filesystem::path& cells_dir)
{
  std::size_t count = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(cells_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == 21 && name.ends_with(".json")) // 16 hex digits + ".json"
      ++count;
  }
  return count;
}

std::size_t temporaries(const std::filesystem::path& folder)
{
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos)
      ++count;
  return count;
}

// "24 cells (21 run, 3 cached) in ..." -> {21, 3}
std::pair<int, int> run_and_cached(const std::string& output)
{
  std::smatch match;
  if (!std::regex_search(output, match, std::regex(R"(\d+ cells \((\d+) run, (\d+) cached\))")))
    return {-1, -1};
  return {std::stoi(match[1]), std::stoi(match[2])};
}

TEST(CrashTest, RunnerKilledMidSweepResumesToByteIdenticalResults)
{
  ScratchDir scratch;
  const std::filesystem::path experiment = write_experiment(scratch);
  const std::string expected = reference_csv(scratch, experiment);
  const std::filesystem::path out = scratch / "killed";

  const pid_t runner = ::fork();
  ASSERT_GE(runner, 0);
  if (runner == 0) {
    ::setpgid(0, 0); // its own group: the test cleans up the workers it leaves behind
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    ::execl(kMemsim.c_str(), kMemsim.c_str(), "run", experiment.c_str(), "--out", out.c_str(), "--jobs", "1",
            "--no-plots", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(runner, runner);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished_cells(out / "cells") < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(runner, SIGKILL);
  int status = 0;
  ::waitpid(runner, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the sweep ended before it could be killed: make it longer";
  const std::size_t cached_at_kill = finished_cells(out / "cells");
  EXPECT_GE(cached_at_kill, 3u);
  EXPECT_LT(cached_at_kill, 24u);
  EXPECT_FALSE(std::filesystem::exists(out / "results.csv"));

  // What a writer killed in the middle of a write leaves (no process has this pid): the rerun removes it.
  write_file(out / "cells" / "0123456789abcdef.json.tmp.999999999", "{\"cell\": {\"cell_for");

  // The rerun may meet the orphaned worker still writing its cell: both write whole files under the same name.
  const auto rerun =
      run_command(kMemsim.string() + " run " + experiment.string() + " --no-plots --out " + out.string());
  ::kill(-runner, SIGKILL); // any worker of the killed runner that is still running
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  const auto [run, cached] = run_and_cached(rerun.output);
  EXPECT_GE(cached, static_cast<int>(cached_at_kill)) << rerun.output;
  EXPECT_GE(run, 1) << rerun.output;
  EXPECT_EQ(run + cached, 24) << rerun.output;
  EXPECT_EQ(read_file(out / "results.csv"), expected);
  EXPECT_EQ(temporaries(out), 0u);
}

TEST(CrashTest, WorkerKilledMidCellIsReportedNeverCachedAndRedoneByTheRerun)
{
  ScratchDir scratch;
  const std::filesystem::path experiment_file = write_experiment(scratch);
  const std::string expected = reference_csv(scratch, experiment_file);
  Experiment experiment = load_experiment(experiment_file, scratch / "presets");
  const std::vector<Cell> cells = expand_cells(experiment);
  const std::string victim = cell_key(cells[4]);

  // The worker of cell 5 writes the first bytes of its result where the result goes, then dies by SIGKILL (as
  // under the OOM killer); the others are real workers.
  const std::filesystem::path worker = scratch / "killed-worker.sh";
  write_file(worker, "#!/bin/sh\n"
                     "case \"$5\" in */" +
                         victim +
                         ".json) printf '{\"cell\": {\"cell_for' > \"$5\"; kill -KILL $$;; "
                         "esac\nexec " +
                         kMemsim.string() + " \"$@\"\n");
  std::filesystem::permissions(worker, std::filesystem::perms::owner_all);
  RunOptions options;
  options.jobs = 2;
  options.worker_executable = worker;
  options.plots = false;
  options.progress = Progress::off;
  options.table_output = nullptr;
  const std::filesystem::path out = scratch / "out";
  RunSummary first = run_experiment(experiment, out, options);
  ASSERT_EQ(first.failures.size(), 1u);
  EXPECT_THAT(first.failures[0], HasSubstr("cell 5 (chain4 keep-all 0.6xpeak(17.17MiB)) failed: worker ended "
                                           "with killed by signal 9 (Killed)"));
  EXPECT_EQ(first.computed, 23u);
  EXPECT_FALSE(std::filesystem::exists(out / "results.csv"));

  options.worker_executable = kMemsim;
  RunSummary second = run_experiment(experiment, out, options);
  ASSERT_TRUE(second.failures.empty()) << second.failures.front();
  EXPECT_EQ(second.computed, 1u); // the half-written result did not pass for a finished cell
  EXPECT_EQ(second.cached, 23u);
  EXPECT_EQ(read_file(out / "results.csv"), expected);
}

TEST(CrashTest, OutputFolderUnderARegularFileIsAClearError)
{
  ScratchDir scratch;
  const std::filesystem::path experiment = write_experiment(scratch);
  write_file(scratch / "plain-file", "not a folder\n");
  const std::filesystem::path out = scratch / "plain-file" / "out";
  const auto result = run_command(kMemsim.string() + " run " + experiment.string() + " --out " + out.string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_EQ(result.output,
            "memsim: " + (out / "cells").string() + ": cannot create the output folder: Not a directory\n");
}

TEST(CrashTest, FilesTooLargeForTheOutputAreAClearError)
{
  // A file-size limit makes every write past 512 bytes fail (EFBIG), as a full disk does, for any user.
  ScratchDir scratch;
  const std::filesystem::path experiment = write_experiment(scratch);
  const std::filesystem::path out = scratch / "out";
  const auto result = run_command("sh -c \"trap '' XFSZ; ulimit -f 1; exec " + kMemsim.string() + " run " +
                                  experiment.string() + " --no-plots --out " + out.string() + "\"");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, MatchesRegex("memsim: " + (out / "sweep\\.json\\.tmp\\.").string() +
                                          "[0-9]+: cannot write: File too large\n"));
  EXPECT_EQ(temporaries(out), 0u);
  EXPECT_FALSE(std::filesystem::exists(out / "results.csv"));
}

// Mounts a tmpfs of `size` (4 KiB: one page) on `folder` in a private mount namespace (as root, or as the root of a
// new user namespace) and runs `command` there; nullopt when this machine allows neither.
std::optional<testing::CommandResult> run_on_tiny_tmpfs(const std::filesystem::path& folder, const std::string& command,
                                                        const std::string& size = "4k")
{
  for (const char* unshare : {"unshare --mount", "unshare --user --map-root-user --mount"}) {
    const std::string script =
        "mount -t tmpfs -o size=" + size + " memsim-full " + folder.string() + " || exit 99; " + command;
    const auto result = run_command(std::string(unshare) + " sh -c '" + script + "'");
    if (result.exit_code != 99 && result.output.find("unshare:") == std::string::npos)
      return result;
  }
  return std::nullopt;
}

TEST(CrashTest, FullDiskIsAClearError)
{
  ScratchDir scratch;
  const std::filesystem::path experiment = write_experiment(scratch);
  const std::filesystem::path full = scratch / "full";
  std::filesystem::create_directories(full);
  const auto result = run_on_tiny_tmpfs(full, kMemsim.string() + " run " + experiment.string() + " --no-plots --out " +
                                                  (full / "out").string());
  if (!result)
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root or unprivileged user namespaces, and unshare); "
                    "FilesTooLargeForTheOutputAreAClearError covers the same write errors";
  EXPECT_EQ(result->exit_code, 2) << result->output;
  EXPECT_THAT(result->output, MatchesRegex("memsim: " + (full / "out" / "sweep\\.json\\.tmp\\.").string() +
                                           "[0-9]+: cannot write: No space left on device\n"));
}

TEST(CrashTest, WorkerThatFindsTheDiskFullIsReported)
{
  // Two pages of tmpfs: sweep.json and the cell's input fit, the worker's result (and its log) do not.
  ScratchDir scratch;
  const std::filesystem::path experiment = scratch / "one.yaml";
  write_file(experiment, "format: memsim-experiment\nversion: 1\nname: one\nmachine: " +
                             (data_dir() / "small.machine.yaml").string() + "\nworkloads:\n  - {name: chain4, trace: " +
                             (data_dir() / "chain4.trace.json").string() + "}\nplanners: [keep-all]\n");
  const std::filesystem::path full = scratch / "full";
  std::filesystem::create_directories(full);
  const auto result = run_on_tiny_tmpfs(
      full, kMemsim.string() + " run " + experiment.string() + " --no-plots --out " + (full / "out").string(), "8k");
  if (!result)
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root or unprivileged user namespaces, and unshare)";
  EXPECT_EQ(result->exit_code, 3) << result->output;
  EXPECT_THAT(result->output, HasSubstr("cell 1 (chain4 keep-all 1.00GiB) failed: worker ended with exit code 2"));
  EXPECT_THAT(result->output, HasSubstr("the file system of " + (full / "out" / "cells").string() + " is full"));
}

} // namespace
} // namespace memsim::experiments
