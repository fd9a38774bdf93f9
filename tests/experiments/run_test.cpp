// Running sweeps end to end: real worker processes (the memsim executable), byte-identical reruns, resume after
// a lost cell, worker failures reported per cell, interruption, and the `memsim run` command line.
#include "experiment_test_support.hpp"

#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/runner.hpp"
#include "memsim/hwmodels/cost_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <sstream>
#include <thread>

namespace memsim::experiments {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::data_dir;
using testing::lines_of;
using testing::read_file;
using testing::run_command;
using testing::ScratchDir;
using testing::write_file;

const std::filesystem::path kMemsim = MEMSIM_EXECUTABLE;

std::filesystem::path write_small_experiment(const ScratchDir& scratch, const std::string& budgets = "[1.0, 0.5]",
                                             const std::string& extra = "")
{
  std::filesystem::path path = scratch / "small.yaml";
  write_file(path, "format: memsim-experiment\n"
                   "version: 1\n"
                   "name: small\n"
                   "machine: " +
                       (data_dir() / "small.machine.yaml").string() +
                       "\n"
                       "workloads:\n"
                       "  - {name: chain4, trace: " +
                       (data_dir() / "chain4.trace.json").string() +
                       "}\n"
                       "planners: [keep-all, vdnn-all]\n"
                       "sweep:\n"
                       "  budget: {fraction_of_peak: " +
                       budgets + "}\n" + extra);
  return path;
}

RunOptions quiet_options(const std::filesystem::path& worker = kMemsim)
{
  RunOptions options;
  options.jobs = 2;
  options.worker_executable = worker;
  options.plots = false;
  options.progress = Progress::off;
  options.table_output = nullptr;
  return options;
}

std::vector<std::string> fields_of(const std::string& line)
{
  std::vector<std::string> fields;
  std::istringstream stream(line);
  for (std::string field; std::getline(stream, field, ',');)
    fields.push_back(field);
  return fields;
}

TEST(RunTest, SameExperimentGivesByteIdenticalResults)
{
  ScratchDir scratch;
  Experiment first = load_experiment(write_small_experiment(scratch), scratch / "presets");
  RunSummary summary = run_experiment(first, scratch / "one", quiet_options());
  ASSERT_TRUE(summary.failures.empty()) << summary.failures.front();
  EXPECT_EQ(summary.cells, 4u);
  EXPECT_EQ(summary.computed, 4u);
  EXPECT_EQ(summary.cached, 0u);
  Experiment second = load_experiment(write_small_experiment(scratch), scratch / "presets");
  RunOptions one_job = quiet_options();
  one_job.jobs = 1;
  run_experiment(second, scratch / "two", one_job);
  const std::string csv = read_file(scratch / "one" / "results.csv");
  EXPECT_EQ(csv, read_file(scratch / "two" / "results.csv"));

  std::vector<std::string> lines = lines_of(csv);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], csv_header());
  // Stable order: keep-all 1.0, keep-all 0.5, vdnn-all 1.0, vdnn-all 0.5.
  std::vector<std::string> keep_all_full = fields_of(lines[1]);
  const double ideal =
      CostModel(load_trace(data_dir() / "chain4.trace.json"), load_machine(data_dir() / "small.machine.yaml"))
          .ideal_time();
  EXPECT_EQ(keep_all_full[0], "chain4");
  EXPECT_EQ(keep_all_full[1], "test-gpu");
  EXPECT_EQ(keep_all_full[2], "keep-all");
  EXPECT_EQ(keep_all_full[3], "30000000");
  EXPECT_EQ(keep_all_full[4], "10000000000");
  EXPECT_EQ(keep_all_full[5], "true");
  EXPECT_NEAR(std::stod(keep_all_full[6]), 0.0125, 1e-12); // keep-all moves nothing: compute only
  EXPECT_EQ(keep_all_full[7], format_number(ideal));
  EXPECT_EQ(keep_all_full[10], "30000000"); // its peak is the default schedule's
  EXPECT_EQ(keep_all_full[11], "0");
  EXPECT_EQ(keep_all_full[12], "0");
  EXPECT_THAT(lines[2], StartsWith("chain4,test-gpu,keep-all,15000000,10000000000,false,,"));
  EXPECT_THAT(lines[3], StartsWith("chain4,test-gpu,vdnn-all,30000000,10000000000,true,"));
  EXPECT_THAT(lines[4], StartsWith("chain4,test-gpu,vdnn-all,15000000,10000000000,"));
}

TEST(RunTest, FastEngineGivesTheSameResultsAsSimgrid)
{
  ScratchDir scratch;
  Experiment reference = load_experiment(write_small_experiment(scratch), scratch / "presets");
  ASSERT_TRUE(run_experiment(reference, scratch / "simgrid", quiet_options()).failures.empty());
  Experiment fast =
      load_experiment(write_small_experiment(scratch, "[1.0, 0.5]", "engine: fast\n"), scratch / "presets");
  ASSERT_TRUE(run_experiment(fast, scratch / "fast", quiet_options()).failures.empty());
  const std::vector<std::string> expected = lines_of(read_file(scratch / "simgrid" / "results.csv"));
  const std::vector<std::string> actual = lines_of(read_file(scratch / "fast" / "results.csv"));
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t row = 0; row < expected.size(); ++row) {
    const std::vector<std::string> want = fields_of(expected[row]);
    const std::vector<std::string> got = fields_of(actual[row]);
    ASSERT_EQ(got.size(), want.size()) << actual[row];
    for (std::size_t column = 0; column < want.size(); ++column) {
      if (want[column] == got[column])
        continue;
      // Times may differ in the last bits (the two engines add durations in different orders).
      const double a = std::stod(want[column]);
      const double b = std::stod(got[column]);
      EXPECT_NEAR(b, a, 1e-9 * std::abs(a)) << "row " << row << " column " << column;
    }
  }
}

TEST(RunTest, ResumeRecomputesOnlyTheMissingCell)
{
  ScratchDir scratch;
  Experiment experiment = load_experiment(write_small_experiment(scratch), scratch / "presets");
  run_experiment(experiment, scratch / "out", quiet_options());
  const std::string csv = read_file(scratch / "out" / "results.csv");

  // Lose one cell's result, as an interrupted run would.
  std::vector<Cell> cells = expand_cells(experiment);
  std::filesystem::path lost = scratch / "out" / "cells" / (cell_key(cells[2]) + ".json");
  ASSERT_TRUE(std::filesystem::exists(lost));
  std::filesystem::remove(lost);

  Experiment again = load_experiment(write_small_experiment(scratch), scratch / "presets");
  RunSummary summary = run_experiment(again, scratch / "out", quiet_options());
  EXPECT_EQ(summary.computed, 1u);
  EXPECT_EQ(summary.cached, 3u);
  EXPECT_TRUE(std::filesystem::exists(lost));
  EXPECT_EQ(read_file(scratch / "out" / "results.csv"), csv);

  // Nothing missing: nothing recomputed.
  RunSummary cached = run_experiment(again, scratch / "out", quiet_options());
  EXPECT_EQ(cached.computed, 0u);
  EXPECT_EQ(cached.cached, 4u);
  EXPECT_EQ(read_file(scratch / "out" / "results.csv"), csv);
}

TEST(RunTest, ExtendingTheSweepReusesFinishedCells)
{
  ScratchDir scratch;
  Experiment experiment = load_experiment(write_small_experiment(scratch), scratch / "presets");
  run_experiment(experiment, scratch / "out", quiet_options());
  Experiment wider = load_experiment(write_small_experiment(scratch, "[1.0, 0.8, 0.5]"), scratch / "presets");
  RunSummary summary = run_experiment(wider, scratch / "out", quiet_options());
  EXPECT_EQ(summary.cells, 6u);
  EXPECT_EQ(summary.computed, 2u);
  EXPECT_EQ(summary.cached, 4u);
  EXPECT_EQ(lines_of(read_file(scratch / "out" / "results.csv")).size(), 7u);
}

TEST(RunTest, ChangedTraceContentInvalidatesTheCache)
{
  ScratchDir scratch;
  std::filesystem::copy_file(data_dir() / "chain4.trace.json", scratch / "chain4.trace.json");
  std::filesystem::copy_file(data_dir() / "small.machine.yaml", scratch / "small.machine.yaml");
  const std::string text = "format: memsim-experiment\nversion: 1\nname: c\nmachine: small.machine.yaml\n"
                           "workloads: [{name: w, trace: chain4.trace.json}]\nplanners: [keep-all]\n"
                           "sweep: {budget: [1GiB]}\n";
  write_file(scratch / "c.yaml", text);
  Experiment experiment = load_experiment(scratch / "c.yaml", scratch / "presets");
  EXPECT_EQ(run_experiment(experiment, scratch / "out", quiet_options()).computed, 1u);
  std::string trace = read_file(scratch / "chain4.trace.json");
  trace.replace(trace.find("\"time_s\": 0.001"), 15, "\"time_s\": 0.003"); // l0.fwd takes 2 ms longer
  write_file(scratch / "chain4.trace.json", trace);
  Experiment changed = load_experiment(scratch / "c.yaml", scratch / "presets");
  RunSummary summary = run_experiment(changed, scratch / "out", quiet_options());
  EXPECT_EQ(summary.computed, 1u);
  EXPECT_EQ(summary.cached, 0u);
}

TEST(RunTest, WorkerFailureIsReportedPerCellAndNoCsvIsWritten)
{
  ScratchDir scratch;
  std::filesystem::path fake_worker = scratch / "failing-worker.sh";
  write_file(fake_worker, "#!/bin/sh\necho \"memsim: chain.trace.json: byte 12: invalid JSON\" >&2\nexit 2\n");
  std::filesystem::permissions(fake_worker, std::filesystem::perms::owner_all);
  Experiment experiment = load_experiment(write_small_experiment(scratch), scratch / "presets");
  RunSummary summary = run_experiment(experiment, scratch / "out", quiet_options(fake_worker));
  ASSERT_EQ(summary.failures.size(), 4u);
  std::vector<Cell> cells = expand_cells(experiment);
  const std::filesystem::path log = scratch / "out" / "cells" / (cell_key(cells[0]) + ".log");
  EXPECT_EQ(summary.failures[0], "cell 1 (chain4 keep-all 1xpeak(28.61MiB)) failed: worker ended with exit code 2:\n"
                                 "    memsim: chain.trace.json: byte 12: invalid JSON\n"
                                 "  log: " +
                                     log.string());
  EXPECT_EQ(summary.computed, 0u);
  EXPECT_TRUE(summary.results_csv.empty());
  EXPECT_FALSE(std::filesystem::exists(scratch / "out" / "results.csv"));
}

TEST(RunTest, WorkerThatWritesNoResultIsAFailure)
{
  ScratchDir scratch;
  std::filesystem::path fake_worker = scratch / "silent-worker.sh";
  write_file(fake_worker, "#!/bin/sh\nexit 0\n");
  std::filesystem::permissions(fake_worker, std::filesystem::perms::owner_all);
  Experiment experiment = load_experiment(write_small_experiment(scratch, "[1.0]"), scratch / "presets");
  RunSummary summary = run_experiment(experiment, scratch / "out", quiet_options(fake_worker));
  ASSERT_EQ(summary.failures.size(), 2u);
  EXPECT_THAT(summary.failures[1],
              StartsWith("cell 2 (chain4 vdnn-all 1xpeak(28.61MiB)) failed: worker ended with exit code 0 without a "
                         "result:\n    (no output)\n"));
}

TEST(RunTest, InterruptStopsWorkersAndKeepsNothingHalfWritten)
{
  ScratchDir scratch;
  std::filesystem::path slow_worker = scratch / "slow-worker.sh";
  write_file(slow_worker, "#!/bin/sh\nexec sleep 20\n");
  std::filesystem::permissions(slow_worker, std::filesystem::perms::owner_all);
  Experiment experiment = load_experiment(write_small_experiment(scratch), scratch / "presets");
  RunSummary summary;
  const auto started = std::chrono::steady_clock::now();
  std::thread runner([&] { summary = run_experiment(experiment, scratch / "out", quiet_options(slow_worker)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::pthread_kill(runner.native_handle(), SIGINT); // what Ctrl-C does to the parent
  runner.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_TRUE(summary.interrupted);
  EXPECT_TRUE(summary.failures.empty());
  EXPECT_EQ(summary.computed, 0u);
  EXPECT_LT(seconds, 10.0);
  EXPECT_FALSE(std::filesystem::exists(scratch / "out" / "results.csv"));
}

TEST(RunCommandTest, RunsAnExperimentAndPrintsTheTable)
{
  ScratchDir scratch;
  std::filesystem::path experiment = write_small_experiment(scratch);
  auto result = run_command(kMemsim.string() + " run " + experiment.string() + " --out " + (scratch / "out").string() +
                            " --jobs 2 --no-plots");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("chain4 on test-gpu, host link 10 GB/s: iteration time (ideal 12.500ms)\n"
                                       "budget       1x peak   0.5x peak\n"
                                       "            28.61MiB    14.31MiB\n"
                                       "keep-all    12.500ms  infeasible\n"));
  EXPECT_THAT(result.output, HasSubstr("4 cells (4 run, 0 cached)"));
  EXPECT_TRUE(std::filesystem::exists(scratch / "out" / "results.csv"));
  EXPECT_FALSE(std::filesystem::exists(scratch / "out" / "time_vs_budget.png"));
}

TEST(RunCommandTest, DrawsThePlotsTheFileAsksFor)
{
  ScratchDir scratch;
  std::filesystem::path experiment =
      write_small_experiment(scratch, "[1.0, 0.8, 0.5]", "outputs: {plots: [time_vs_budget, peak_vs_budget]}\n");
  auto result = run_command(kMemsim.string() + " run " + experiment.string() + " --out " + (scratch / "out").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* plot : {"time_vs_budget.png", "peak_vs_budget.png"}) {
    std::string png = read_file(scratch / "out" / plot);
    ASSERT_GT(png.size(), 1000u) << plot;
    EXPECT_EQ(png.substr(1, 3), "PNG") << plot;
  }
}

TEST(RunCommandTest, MissingPythonIsAClearError)
{
  ScratchDir scratch;
  Experiment experiment = load_experiment(write_small_experiment(scratch, "[1.0]"), scratch / "presets");
  RunOptions options = quiet_options();
  options.plots = true;
  options.python = scratch / "no-python";
  try {
    run_experiment(experiment, scratch / "out", options);
    FAIL() << "expected RunError";
  } catch (const RunError& error) {
    EXPECT_EQ(std::string(error.what()), "cannot draw plots: " + (scratch / "no-python").string() +
                                             " not found (install python3-matplotlib, or run with --no-plots); " +
                                             (scratch / "out" / "results.csv").string() + " is complete");
  }
  EXPECT_TRUE(std::filesystem::exists(scratch / "out" / "results.csv"));
}

TEST(RunCommandTest, BadExperimentExitsTwoWithALocatedMessage)
{
  ScratchDir scratch;
  std::filesystem::path experiment = write_small_experiment(scratch, "[1.0, 0]");
  auto result = run_command(kMemsim.string() + " run " + experiment.string() + " --out " + (scratch / "out").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output, "memsim: " + experiment.string() +
                               ":9:36: sweep.budget.fraction_of_peak[1]: a fraction of the peak must be positive, "
                               "found '0'\n");
}

TEST(RunCommandTest, HelpNamesTheOptions)
{
  auto result = run_command(kMemsim.string() + " run --help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.output, HasSubstr("--out"));
  EXPECT_THAT(result.output, HasSubstr("--jobs"));
  EXPECT_THAT(result.output, HasSubstr("--no-plots"));
  auto top = run_command(kMemsim.string() + " --help");
  EXPECT_THAT(top.output, HasSubstr("run"));
  EXPECT_THAT(top.output, ::testing::Not(HasSubstr("worker")));
}

TEST(RunCommandTest, WorkerWithAMissingCellFileExitsTwo)
{
  ScratchDir scratch;
  auto result = run_command(kMemsim.string() + " worker --cell " + (scratch / "none.cell.json").string() + " --out " +
                            (scratch / "r.json").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("none.cell.json"));
}

} // namespace
} // namespace memsim::experiments
