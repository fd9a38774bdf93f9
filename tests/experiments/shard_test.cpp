// Sweeps on a cluster: `memsim run --shard I/N` takes the cells whose index is I-1 modulo N, and `memsim merge`
// joins the shards' folders into results.csv and plots byte-identical to an unsharded run, refusing folders of
// another experiment, a shard given twice, and cells that no folder has.
#include "experiment_test_support.hpp"

#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/runner.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace memsim::experiments {
namespace {

using ::testing::HasSubstr;
using testing::data_dir;
using testing::read_file;
using testing::run_command;
using testing::ScratchDir;
using testing::write_file;

const std::string kMemsim = MEMSIM_EXECUTABLE;

bool have_matplotlib() { return run_command(std::string(MEMSIM_PYTHON) + " -c 'import matplotlib'").exit_code == 0; }

// 3 planners x 3 budgets = 9 cells (with a plot when matplotlib is here).
std::filesystem::path write_experiment(const ScratchDir& scratch, const std::string& name,
                                       const std::string& budgets = "[1.0, 0.8, 0.5]")
{
  std::filesystem::path path = scratch / (name + ".yaml");
  write_file(path, "format: memsim-experiment\nversion: 1\nname: " + name +
                       "\nmachine: " + (data_dir() / "small.machine.yaml").string() +
                       "\nworkloads:\n  - {name: chain4, trace: " + (data_dir() / "chain4.trace.json").string() +
                       "}\nplanners: [keep-all, vdnn-all, checkpoint-sqrt]\n"
                       "sweep:\n  budget: {fraction_of_peak: " +
                       budgets + "}\n" + (have_matplotlib() ? "outputs: {plots: [time_vs_budget]}\n" : ""));
  return path;
}

testing::CommandResult run_shard(const std::filesystem::path& experiment, const std::string& shard,
                                 const std::filesystem::path& out)
{
  return run_command(kMemsim + " run " + experiment.string() + " --shard " + shard + " --out " + out.string());
}

std::set<std::string> cached_keys(const std::filesystem::path& cells_dir)
{
  std::set<std::string> keys;
  for (const auto& entry : std::filesystem::directory_iterator(cells_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == 21 && name.ends_with(".json"))
      keys.insert(name.substr(0, 16));
  }
  return keys;
}

TEST(ShardTest, ShardsTakeCellsModuloNAndMergeToTheUnshardedBytes)
{
  ScratchDir scratch;
  const std::filesystem::path experiment_file = write_experiment(scratch, "shards");
  const auto whole =
      run_command(kMemsim + " run " + experiment_file.string() + " --out " + (scratch / "whole").string());
  ASSERT_EQ(whole.exit_code, 0) << whole.output;

  Experiment experiment = load_experiment(experiment_file, scratch / "presets");
  const std::vector<Cell> cells = expand_cells(experiment);
  ASSERT_EQ(cells.size(), 9u);
  for (unsigned shard = 1; shard <= 3; ++shard) {
    const std::filesystem::path out = scratch / ("shard-" + std::to_string(shard));
    const auto result = run_shard(experiment_file, std::to_string(shard) + "/3", out);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_THAT(result.output, HasSubstr("shard " + std::to_string(shard) + "/3: 3 of 9 cells (3 run, 0 cached)"));
    EXPECT_FALSE(std::filesystem::exists(out / "results.csv")); // only the merge writes the table
    std::set<std::string> expected;
    for (std::size_t index = shard - 1; index < cells.size(); index += 3)
      expected.insert(cell_key(cells[index]));
    EXPECT_EQ(cached_keys(out / "cells"), expected) << "shard " << shard;
  }

  // Given in any order.
  const auto merged =
      run_command(kMemsim + " merge " + (scratch / "merged").string() + " " + (scratch / "shard-3").string() + " " +
                  (scratch / "shard-1").string() + " " + (scratch / "shard-2").string());
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_THAT(merged.output, HasSubstr("9 cells (0 run, 9 cached)"));
  EXPECT_EQ(read_file(scratch / "merged" / "results.csv"), read_file(scratch / "whole" / "results.csv"));
  if (have_matplotlib()) {
    ASSERT_TRUE(std::filesystem::exists(scratch / "merged" / "time_vs_budget.png"));
    EXPECT_EQ(read_file(scratch / "merged" / "time_vs_budget.png"),
              read_file(scratch / "whole" / "time_vs_budget.png"));
  }
}

TEST(ShardTest, MergeRefusesShardsOfAnotherExperiment)
{
  ScratchDir scratch;
  ASSERT_EQ(run_shard(write_experiment(scratch, "first"), "1/2", scratch / "a").exit_code, 0);
  ASSERT_EQ(run_shard(write_experiment(scratch, "second", "[1.0, 0.7, 0.5]"), "2/2", scratch / "b").exit_code, 0);
  const auto merged = run_command(kMemsim + " merge " + (scratch / "merged").string() + " " + (scratch / "a").string() +
                                  " " + (scratch / "b").string());
  EXPECT_EQ(merged.exit_code, 2) << merged.output;
  EXPECT_THAT(merged.output,
              HasSubstr("memsim: " + (scratch / "b" / "sweep.json").string() + ": a shard of experiment 'second'"));
  EXPECT_THAT(merged.output, HasSubstr("not of experiment 'first'"));
  EXPECT_FALSE(std::filesystem::exists(scratch / "merged" / "results.csv"));
}

TEST(ShardTest, MergeNamesTheCellsNoFolderHas)
{
  ScratchDir scratch;
  const std::filesystem::path experiment = write_experiment(scratch, "partial");
  ASSERT_EQ(run_shard(experiment, "1/3", scratch / "one").exit_code, 0);
  ASSERT_EQ(run_shard(experiment, "3/3", scratch / "three").exit_code, 0);
  const auto merged = run_command(kMemsim + " merge " + (scratch / "merged").string() + " " +
                                  (scratch / "one").string() + " " + (scratch / "three").string());
  EXPECT_EQ(merged.exit_code, 2) << merged.output;
  EXPECT_THAT(merged.output,
              HasSubstr("memsim: merge: 3 of 9 cells of experiment 'partial' have no result in the folders given:\n"
                        "  cell 2 (chain4 keep-all 0.8xpeak(22.89MiB)) of shard 2/3\n"
                        "  cell 5 (chain4 vdnn-all 0.8xpeak(22.89MiB)) of shard 2/3\n"
                        "  cell 8 (chain4 checkpoint-sqrt 0.8xpeak(22.89MiB)) of shard 2/3\n"));
  EXPECT_FALSE(std::filesystem::exists(scratch / "merged" / "results.csv"));
}

TEST(ShardTest, MergeRefusesAShardGivenTwiceAndAFolderThatIsNoRun)
{
  ScratchDir scratch;
  const std::filesystem::path experiment = write_experiment(scratch, "twice");
  ASSERT_EQ(run_shard(experiment, "1/2", scratch / "one").exit_code, 0);
  std::filesystem::copy(scratch / "one", scratch / "copy", std::filesystem::copy_options::recursive);
  auto merged = run_command(kMemsim + " merge " + (scratch / "merged").string() + " " + (scratch / "one").string() +
                            " " + (scratch / "copy").string());
  EXPECT_EQ(merged.exit_code, 2) << merged.output;
  EXPECT_EQ(merged.output, "memsim: " + (scratch / "copy").string() + ": shard 1/2 is given twice (also " +
                               (scratch / "one").string() + ")\n");

  std::filesystem::create_directories(scratch / "empty");
  merged = run_command(kMemsim + " merge " + (scratch / "merged").string() + " " + (scratch / "empty").string());
  EXPECT_EQ(merged.exit_code, 2) << merged.output;
  EXPECT_THAT(merged.output, HasSubstr((scratch / "empty").string() + ": not the output folder of a memsim run"));
}

TEST(ShardTest, BadShardOptionsExitTwo)
{
  ScratchDir scratch;
  const std::filesystem::path experiment = write_experiment(scratch, "bad");
  for (const std::string shard : {"0/3", "4/3", "1/0", "2", "a/3", "1/3x", "-1/3"}) {
    const auto result = run_shard(experiment, shard, scratch / "out");
    EXPECT_EQ(result.exit_code, 2) << shard << ": " << result.output;
    EXPECT_THAT(result.output, HasSubstr("memsim: --shard: '" + shard + "'")) << shard;
  }
  EXPECT_EQ(parse_shard("2/3").index, 2u);
  EXPECT_EQ(parse_shard("2/3").count, 3u);
  EXPECT_TRUE(parse_shard("2/3").owns(4));
  EXPECT_FALSE(parse_shard("2/3").owns(5));
}

} // namespace
} // namespace memsim::experiments
