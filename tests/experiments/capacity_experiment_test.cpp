// Search experiments (`search:`): one capacity search per workload x planner x budget, cached and resumable,
// capacity.csv agreeing with `memsim max-scale` on each cell, and the loader's checks.
#include "experiment_test_support.hpp"

#include "memsim/common/error.hpp"
#include "memsim/experiments/capacity_experiment.hpp"
#include "test_traces.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sstream>

namespace memsim::experiments {
namespace {

using ::testing::HasSubstr;
using testing::data_dir;
using testing::read_file;
using testing::run_command;
using testing::ScratchDir;
using testing::write_file;

const std::filesystem::path kMemsim = MEMSIM_EXECUTABLE;
const std::string kWorkload = "cnn:depth=4,channel_scale=0.25,image=32,classes=10";

std::filesystem::path
write_search_experiment(const ScratchDir& scratch, const std::string& search,
                        const std::string& workload_line = "  - {name: tiny-cnn, generate: {kind: cnn, depth: 4, "
                                                           "channel_scale: 0.25, image: 32, classes: 10}}\n")
{
  std::filesystem::path path = scratch / "capacity.yaml";
  write_file(path, "format: memsim-experiment\n"
                   "version: 1\n"
                   "name: capacity\n"
                   "machine: v100-32gb-pcie3\n"
                   "workloads:\n" +
                       workload_line +
                       "planners: [keep-all, checkpoint-sqrt]\n"
                       "sweep: {budget: [48MiB, 96MiB]}\n"
                       "search: " +
                       search + "\n");
  return path;
}

RunOptions quiet()
{
  RunOptions options;
  options.jobs = 2;
  options.plots = false;
  options.progress = Progress::off;
  options.table_output = nullptr;
  return options;
}

std::vector<std::vector<std::string>> csv_rows(const std::string& text)
{
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> fields;
    std::istringstream stream(line);
    for (std::string field; std::getline(stream, field, ',');)
      fields.push_back(field);
    rows.push_back(fields);
  }
  return rows;
}

TEST(CapacityExperiment, EachCellAgreesWithMaxScaleAndRerunsFromTheCache)
{
  ScratchDir scratch;
  const Experiment experiment =
      load_experiment(write_search_experiment(scratch, "{axis: batch, limit: 4096}"), default_presets_dir());
  ASSERT_TRUE(experiment.search);
  const CapacitySummary first = run_capacity_experiment(experiment, scratch / "out", quiet());
  EXPECT_EQ(first.cells, 4u);
  EXPECT_EQ(first.computed, 4u);
  const std::string csv = read_file(first.capacity_csv);
  const auto rows = csv_rows(csv);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0][7], "largest");
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const std::string& planner = rows[r][1];
    const std::string& budget = rows[r][3];
    const auto cli = run_command(kMemsim.string() + " max-scale --workload " + kWorkload + " --planner " + planner +
                                     " --machine v100-32gb-pcie3 --budget " + budget + " --limit 4096 --json",
                                 /*stdout_only=*/true);
    ASSERT_EQ(cli.exit_code, 0) << cli.output;
    const auto document = nlohmann::json::parse(cli.output);
    EXPECT_EQ(rows[r][7], std::to_string(document["largest"].get<std::int64_t>())) << planner << " " << budget;
  }
  // A larger budget never trains a smaller batch with keep-all.
  EXPECT_LT(std::stoll(rows[1][7]), std::stoll(rows[2][7]));

  const CapacitySummary second = run_capacity_experiment(experiment, scratch / "out", quiet());
  EXPECT_EQ(second.computed, 0u);
  EXPECT_EQ(second.cached, 4u);
  EXPECT_EQ(read_file(second.capacity_csv), csv);

  // A lost search is the only one redone.
  std::filesystem::path lost;
  for (const auto& entry : std::filesystem::directory_iterator(scratch / "out" / "searches"))
    lost = entry.path();
  std::filesystem::remove(lost);
  const CapacitySummary third = run_capacity_experiment(experiment, scratch / "out", quiet());
  EXPECT_EQ(third.computed, 1u);
  EXPECT_EQ(read_file(third.capacity_csv), csv);
}

TEST(CapacityExperiment, ThroughputFloorComesFromKeepAllsLargestBatch)
{
  ScratchDir scratch;
  const Experiment experiment =
      load_experiment(write_search_experiment(scratch, "{axis: batch, limit: 4096, min_throughput: 0.5}"),
                      default_presets_dir());
  const CapacitySummary summary = run_capacity_experiment(experiment, scratch / "out", quiet());
  const auto rows = csv_rows(read_file(summary.capacity_csv));
  ASSERT_EQ(rows.size(), 5u);
  for (std::size_t r = 1; r < rows.size(); ++r) {
    ASSERT_FALSE(rows[r][11].empty()); // min_samples_per_s
    if (!rows[r][10].empty()) {
      EXPECT_GE(std::stod(rows[r][10]), std::stod(rows[r][11]));
    }
  }
}

// With an overhead limit of 1, checkpoint-sqrt (it recomputes: always slower than keep-all with unlimited memory)
// trains nothing, keep-all trains what it trained without the limit, and each cell agrees with max-scale.
TEST(CapacityExperiment, OverheadLimitAgreesWithMaxScale)
{
  ScratchDir scratch;
  const Experiment experiment =
      load_experiment(write_search_experiment(scratch, "{axis: batch, limit: 4096, max_overhead: 1}"),
                      default_presets_dir());
  const CapacitySummary summary = run_capacity_experiment(experiment, scratch / "out", quiet());
  const auto rows = csv_rows(read_file(summary.capacity_csv));
  ASSERT_EQ(rows.size(), 5u);
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const auto cli =
        run_command(kMemsim.string() + " max-scale --workload " + kWorkload + " --planner " + rows[r][1] +
                        " --machine v100-32gb-pcie3 --budget " + rows[r][3] + " --limit 4096 --max-overhead 1 --json",
                    /*stdout_only=*/true);
    const auto document = nlohmann::json::parse(cli.output);
    const std::string largest =
        document["largest"].is_null() ? "" : std::to_string(document["largest"].get<std::int64_t>());
    EXPECT_EQ(rows[r][7], largest) << rows[r][1] << " " << rows[r][3];
    EXPECT_EQ(document["max_overhead"], 1.0);
    if (rows[r][1] == "checkpoint-sqrt") {
      EXPECT_EQ(rows[r][7], "");
    } else {
      EXPECT_FALSE(rows[r][7].empty());
    }
  }
  EXPECT_THAT(
      [&] {
        try {
          load_experiment(write_search_experiment(scratch, "{max_overhead: 0.5}"), default_presets_dir());
        } catch (const InputError& error) {
          return std::string(error.what());
        }
        return std::string("no error");
      }(),
      HasSubstr("capacity.yaml:9:24: search.max_overhead: max_overhead must be a time ratio >= 1"));
}

TEST(CapacityExperiment, CommandWritesCapacityCsvAndPlot)
{
  ScratchDir scratch;
  const auto path = write_search_experiment(scratch, "{axis: depth, limit: 64}");
  const auto result = run_command(kMemsim.string() + " run " + path.string() + " --out " + (scratch / "out").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("largest depth at budget"));
  EXPECT_TRUE(std::filesystem::is_regular_file(scratch / "out" / "capacity.csv"));
  EXPECT_TRUE(std::filesystem::is_regular_file(scratch / "out" / "capacity.png"));
}

TEST(CapacityExperiment, RecordedTraceWorkloadsAreRescaledAlongTheBatch)
{
  ScratchDir scratch;
  Trace recorded = test::make_chain(6, 4'000'000);
  recorded.source.batch = 4;
  save_trace(recorded, scratch / "chain-b4.trace.json");
  const auto path =
      write_search_experiment(scratch, "{axis: batch, limit: 4096}", "  - {name: chain, trace: chain-b4.trace.json}\n");
  const Experiment experiment = load_experiment(path, default_presets_dir());
  const CapacitySummary summary = run_capacity_experiment(experiment, scratch / "out", quiet());
  const auto rows = csv_rows(read_file(summary.capacity_csv));
  ASSERT_EQ(rows.size(), 5u);
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const auto cli = run_command(kMemsim.string() + " max-scale --workload " +
                                     (scratch / "chain-b4.trace.json").string() + " --planner " + rows[r][1] +
                                     " --machine v100-32gb-pcie3 --budget " + rows[r][3] + " --limit 4096 --json",
                                 /*stdout_only=*/true);
    ASSERT_EQ(cli.exit_code, 0) << cli.output;
    EXPECT_EQ(rows[r][7], std::to_string(nlohmann::json::parse(cli.output)["largest"].get<std::int64_t>()));
  }
  // keep-all at 48 MiB (50.33 MB): 8 MB per sample (the chain's worked-out slope) plus the weights' few kB fits 6
  // samples, not 7 (56 MB).
  EXPECT_EQ(rows[1][1], "keep-all");
  EXPECT_EQ(rows[1][7], "6");
}

TEST(CapacityExperiment, LoaderRejectsWhatASearchCannotUse)
{
  ScratchDir scratch;
  auto error_of = [&](const std::filesystem::path& path) {
    try {
      load_experiment(path, default_presets_dir());
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of(write_search_experiment(scratch, "{axis: heads}")),
              HasSubstr("capacity.yaml:9:16: search.axis: unknown axis 'heads'"));
  EXPECT_THAT(error_of(write_search_experiment(scratch, "{axis: width}")),
              HasSubstr("no parameter for the width axis"));
  EXPECT_THAT(error_of(write_search_experiment(scratch, "{start: 10, limit: 5}")),
              HasSubstr("limit (5) is below start (10)"));
  EXPECT_THAT(error_of(write_search_experiment(scratch, "{axis: depth}",
                                               "  - {name: recorded, trace: " +
                                                   (data_dir() / "chain4.trace.json").string() + "}\n")),
              HasSubstr("is a recorded trace: it scales along the batch only"));
}

} // namespace
} // namespace memsim::experiments
