// The sweep grid (stable order, fraction-of-peak budgets, keys) and the deterministic CSV and table.
#include "experiment_test_support.hpp"

#include "memsim/common/stable_hash.hpp"
#include "memsim/experiments/experiment.hpp"
#include "memsim/experiments/runner.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/views.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim::experiments {
namespace {

using testing::data_dir;
using testing::ScratchDir;
using testing::write_file;

Experiment load_text(const ScratchDir& scratch, const std::string& body)
{
  std::filesystem::path path = scratch / "exp.yaml";
  write_file(path, "format: memsim-experiment\nversion: 1\nname: sweep\nmachine: " +
                       (data_dir() / "small.machine.yaml").string() +
                       "\nworkloads:\n  - {name: a, trace: " + (data_dir() / "chain4.trace.json").string() +
                       "}\n  - {name: b, trace: " + (data_dir() / "chain4.trace.json").string() + "}\n" + body);
  return load_experiment(path, scratch / "presets");
}

TEST(SweepTest, CellsAreWorkloadsThenPlannersThenBudgetsThenBandwidths)
{
  ScratchDir scratch;
  Experiment experiment = load_text(scratch, "planners: [keep-all, vdnn-all]\n"
                                             "sweep: {budget: [16MiB, 8MiB], bandwidth: [12GB/s, 3GB/s]}\n");
  std::vector<Cell> cells = expand_cells(experiment);
  std::vector<std::string> described;
  for (const Cell& cell : cells)
    described.push_back(describe_cell(cell));
  EXPECT_EQ(described, (std::vector<std::string>{
                           "a keep-all 16.00MiB 12GB/s", "a keep-all 16.00MiB 3GB/s", "a keep-all 8.00MiB 12GB/s",
                           "a keep-all 8.00MiB 3GB/s", "a vdnn-all 16.00MiB 12GB/s", "a vdnn-all 16.00MiB 3GB/s",
                           "a vdnn-all 8.00MiB 12GB/s", "a vdnn-all 8.00MiB 3GB/s", "b keep-all 16.00MiB 12GB/s",
                           "b keep-all 16.00MiB 3GB/s", "b keep-all 8.00MiB 12GB/s", "b keep-all 8.00MiB 3GB/s",
                           "b vdnn-all 16.00MiB 12GB/s", "b vdnn-all 16.00MiB 3GB/s", "b vdnn-all 8.00MiB 12GB/s",
                           "b vdnn-all 8.00MiB 3GB/s"}));
  for (std::size_t i = 0; i < cells.size(); ++i)
    EXPECT_EQ(cells[i].index, i);
  EXPECT_EQ(cells[0].budget_bytes, 16u << 20);
  EXPECT_EQ(*cells[1].bandwidth_override, 3e9);
  EXPECT_EQ(cells[1].bandwidth_bytes_per_s, 3e9);
  EXPECT_EQ(cells[0].machine, "test-gpu");
}

TEST(SweepTest, WithoutABandwidthAxisCellsUseTheMachinesHostLink)
{
  ScratchDir scratch;
  Experiment experiment = load_text(scratch, "planners: [keep-all]\nsweep: {budget: [16MiB]}\n");
  std::vector<Cell> cells = expand_cells(experiment);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_FALSE(cells[0].bandwidth_override);
  EXPECT_EQ(cells[0].bandwidth_bytes_per_s, 10e9); // small.machine.yaml: gpu0-host 10GB/s
  EXPECT_EQ(describe_cell(cells[0]), "a keep-all 16.00MiB");
}

// chain4 under the default schedule peaks during l2.bwd: inputs x (4 MB) and weights (4 x 1 MB) resident,
// a0..a2 (12 MB), g3 (4 MB), dw3 (1 MB), and its outputs g2 (4 MB) + dw2 (1 MB) = 30 MB.
TEST(SweepTest, FractionOfPeakBudgetsAreFractionsOfTheDefaultSchedulePeak)
{
  ScratchDir scratch;
  Experiment experiment =
      load_text(scratch, "planners: [keep-all]\nsweep: {budget: {fraction_of_peak: [1.0, 0.5, 0.3333]}}\n");
  EXPECT_EQ(default_memory_profile(experiment.workloads[0].trace).peak_bytes, 30000000u);
  EXPECT_EQ(experiment.workloads[0].default_peak_bytes, 30000000u);
  std::vector<Cell> cells = expand_cells(experiment);
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ(cells[0].budget_bytes, 30000000u);
  EXPECT_EQ(cells[1].budget_bytes, 15000000u);
  EXPECT_EQ(cells[2].budget_bytes, 9999000u);
  EXPECT_EQ(*cells[1].budget_fraction, 0.5);
  EXPECT_EQ(describe_cell(cells[1]), "a keep-all 0.5xpeak(14.31MiB)");
}

TEST(SweepTest, CellKeysDependOnContentNotOnPathsOrPosition)
{
  ScratchDir scratch;
  Experiment experiment = load_text(scratch, "planners: [keep-all]\nsweep: {budget: [16MiB, 8MiB]}\n");
  std::vector<Cell> cells = expand_cells(experiment);
  EXPECT_EQ(cell_key(cells[0]).size(), 16u);
  EXPECT_NE(cell_key(cells[0]), cell_key(cells[1]));
  Cell moved = cells[0];
  moved.index = 7;
  moved.trace_file = "/elsewhere/chain4.trace.json";
  EXPECT_EQ(cell_key(moved), cell_key(cells[0]));
  Cell other_params = cells[0];
  other_params.params["x"] = 1;
  EXPECT_NE(cell_key(other_params), cell_key(cells[0]));
  Cell round_trip = cell_from_json(cell_to_json(cells[0]), "cell.json");
  EXPECT_EQ(cell_to_json(round_trip), cell_to_json(cells[0]));
}

TEST(SweepTest, StableHashIsFnv1a)
{
  EXPECT_EQ(stable_hash(""), "cbf29ce484222325");
  EXPECT_EQ(stable_hash("a"), "af63dc4c8601ec8c");
}

Cell sample_cell()
{
  Cell cell;
  cell.workload = "resnet";
  cell.machine = "v100";
  cell.planner_label = "ckpt";
  cell.planner = "checkpoint-sqrt";
  cell.params = {{"segments", 4}};
  cell.budget_bytes = 8589934592;
  cell.budget_fraction = 0.5;
  cell.bandwidth_bytes_per_s = 12e9;
  return cell;
}

TEST(CsvTest, HeaderStartsWithTheAppendixColumns)
{
  EXPECT_EQ(csv_header(), "workload,machine,planner,budget_bytes,bandwidth_bytes_per_s,feasible,iteration_time_s,"
                          "ideal_time_s,stall_time_s,recompute_time_s,peak_device_bytes,h2d_bytes,d2h_bytes,"
                          "compute_busy_s,p2p_bytes,peak_host_bytes,budget_fraction,planner_name,params,"
                          "infeasible_stage,reason,samples_per_s,pcie_h2d_utilization,pcie_d2h_utilization,"
                          "swapped_bytes,recomputed_bytes");
}

TEST(CsvTest, FeasibleRow)
{
  CellResult result;
  result.ideal_time_s = 0.25;
  result.metrics.iteration_time_s = 0.3125;
  result.metrics.stall_time_s = 0.0125;
  result.metrics.recompute_time_s = 0.05;
  result.metrics.compute_busy_s = 0.3;
  result.metrics.peak_device_bytes = 8000000000;
  result.metrics.peak_host_bytes = 123;
  result.metrics.h2d_bytes = 4000000;
  result.metrics.d2h_bytes = 5000000;
  result.metrics.samples_per_s = 409.6;
  result.metrics.pcie_h2d_utilization = 0.25;
  result.metrics.pcie_d2h_utilization = 0.5;
  result.metrics.swapped_bytes = 4000000;
  result.metrics.recomputed_bytes = 1000;
  EXPECT_EQ(csv_row(sample_cell(), result),
            "resnet,v100,ckpt,8589934592,12000000000,true,0.3125,0.25,0.0125,0.05,8000000000,4000000,5000000,0.3,0,"
            "123,0.5,checkpoint-sqrt,\"{\"\"segments\"\":4}\",,,409.6,0.25,0.5,4000000,1000");
  result.metrics.samples_per_s.reset(); // the trace named no batch
  const std::string row = csv_row(sample_cell(), result);
  const std::string tail = "\",,,,0.25,0.5,4000000,1000"; // params, stage, reason and samples_per_s empty
  EXPECT_EQ(row.substr(row.size() - tail.size()), tail);
}

TEST(CsvTest, InfeasibleRowLeavesMeasurementsEmptyAndQuotesTheReason)
{
  CellResult result;
  result.feasible = false;
  result.stage = "simulate";
  result.reason = "out of memory at step 12 (\"a3\"), 30MB in use";
  result.ideal_time_s = 0.25;
  result.metrics.iteration_time_s = 1; // not reported for an infeasible cell
  Cell cell = sample_cell();
  cell.budget_fraction.reset();
  EXPECT_EQ(csv_row(cell, result), "resnet,v100,ckpt,8589934592,12000000000,false,,0.25,,,,,,,,,,checkpoint-sqrt,"
                                   "\"{\"\"segments\"\":4}\",simulate,"
                                   "\"out of memory at step 12 (\"\"a3\"\"), 30MB in use\",,,,,");
}

TEST(CsvTest, IterationColumnsOnlyWhenSomeCellRanSeveralIterations)
{
  CellResult one;
  one.metrics.iteration_times_s = {0.3};
  CellResult three;
  three.metrics.iteration_time_s = 0.6;
  three.metrics.iteration_times_s = {0.1, 0.2, 0.3};
  three.metrics.steady_iteration_time_s = 0.25;
  EXPECT_FALSE(has_several_iterations({one}));
  EXPECT_TRUE(has_several_iterations({one, three}));
  // The iteration columns come after reason, the capacity columns last.
  const std::string capacity =
      ",samples_per_s,pcie_h2d_utilization,pcie_d2h_utilization,swapped_bytes,recomputed_bytes";
  EXPECT_EQ(csv_header(true), csv_header().substr(0, csv_header().size() - capacity.size()) +
                                  ",iterations,steady_iteration_time_s,iteration_times_s" + capacity);
  const std::string row = csv_row(sample_cell(), three, true);
  const std::string without = csv_row(sample_cell(), three);
  EXPECT_EQ(row.substr(without.size() - 9), ",3,0.25,0.1;0.2;0.3,,0,0,0,0");
}

TEST(CsvTest, NumbersAreShortestRoundTripWithoutExponentForIntegers)
{
  EXPECT_EQ(format_number(12e9), "12000000000");
  EXPECT_EQ(format_number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_number(0.001), "0.001");
  EXPECT_EQ(format_number(1.5e-7), "1.5e-07");
  EXPECT_EQ(format_number(0), "0");
}

TEST(TableTest, PlannersByBudgetsWithInfeasibleCells)
{
  Cell keep = sample_cell();
  keep.planner_label = "keep-all";
  keep.budget_bytes = 1 << 30;
  keep.budget_fraction = 1.0;
  Cell keep_half = keep;
  keep_half.budget_bytes = 1 << 29;
  keep_half.budget_fraction = 0.5;
  Cell ckpt = sample_cell();
  ckpt.budget_bytes = 1 << 30;
  ckpt.budget_fraction = 1.0;
  Cell ckpt_half = ckpt;
  ckpt_half.budget_bytes = 1 << 29;
  ckpt_half.budget_fraction = 0.5;
  CellResult fast;
  fast.ideal_time_s = 0.1;
  fast.metrics.iteration_time_s = 0.125;
  CellResult infeasible = fast;
  infeasible.feasible = false;
  CellResult slow = fast;
  slow.metrics.iteration_time_s = 0.15;
  EXPECT_EQ(format_table({keep, keep_half, ckpt, ckpt_half}, {fast, infeasible, fast, slow}),
            "resnet on v100, host link 12 GB/s: iteration time (ideal 100.000ms)\n"
            "budget       1x peak   0.5x peak\n"
            "             1.00GiB   512.00MiB\n"
            "keep-all   125.000ms  infeasible\n"
            "ckpt       125.000ms   150.000ms\n"
            "\n");
}

} // namespace
} // namespace memsim::experiments
