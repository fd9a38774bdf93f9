// memsim validate: the comparison of a simulated and a measured timeline (exact figures on hand-made runs),
// the summary documents, and the command line in both modes on "measurements" made by stretching real
// simulations by a known factor (so every expected error is known in advance).
#include "experiment_test_support.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/experiments/validation.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>

#include <gtest/gtest.h>

#include <fstream>

namespace memsim::validation {
namespace {

using ::testing::HasSubstr;
using experiments::testing::data_dir;
using experiments::testing::read_file;
using experiments::testing::run_command;
using experiments::testing::ScratchDir;
using experiments::testing::write_file;

const std::filesystem::path kMemsim = MEMSIM_EXECUTABLE;

StepRecord record(StepId step, StepKind kind, const std::string& stream, double start, double end,
                  std::uint64_t bytes = 0)
{
  StepRecord r;
  r.step = step;
  r.kind = kind;
  r.stream = stream;
  r.start_s = start;
  r.end_s = end;
  r.bytes = bytes;
  r.label = fmt::format("s{}", step); // not a literal assigned, then appended: g++ 12 -Wrestrict false positive at -O3
  return r;
}

RunResult run_of(std::vector<StepRecord> steps, std::uint64_t peak)
{
  RunResult run;
  run.timeline = std::move(steps);
  run.memory.push_back(MemorySample{0, 0, peak});
  run.metrics = metrics_from_timeline(run.timeline, run.memory);
  return run;
}

TEST(ErrorStats, QuantilesAndWeightedError)
{
  // Relative errors 0.1, 0.2, 0.3, 0.4 (and one step with a zero measurement, left out of the relative figures).
  const ErrorStats stats = error_stats({1.1, 2.4, 1.3, 1.4, 0.5}, {1.0, 2.0, 1.0, 1.0, 0.0});
  EXPECT_EQ(stats.count, 5u);
  EXPECT_NEAR(stats.median_abs_relative, 0.25, 1e-12);
  EXPECT_NEAR(stats.p90_abs_relative, 0.37, 1e-12); // interpolated between 0.3 and 0.4
  EXPECT_NEAR(stats.max_abs_relative, 0.4, 1e-12);
  EXPECT_NEAR(stats.weighted_abs_relative, (0.1 + 0.4 + 0.3 + 0.4 + 0.5) / 5.0, 1e-12);
  EXPECT_NEAR(stats.median_abs_s, 0.4, 1e-12);
  EXPECT_THROW(error_stats({1.0}, {}), std::invalid_argument);
  EXPECT_EQ(error_stats({}, {}).median_abs_relative, 0);
}

TEST(CompareRuns, IterationStallTransferAndPeakErrors)
{
  // Simulated: compute 0-1, offload 1-3 (d2h), compute waits for a prefetch 3-4 then runs 4-5.
  RunResult simulated =
      run_of({record(0, StepKind::compute, "compute", 0, 1), record(1, StepKind::offload, "d2h", 1, 3, 100),
              record(2, StepKind::prefetch, "h2d", 3, 4, 100), record(3, StepKind::compute, "compute", 4, 5)},
             1000);
  // Measured: the transfers are 50% slower, so the second compute starts at 5.5 and the iteration ends at 6.5.
  RunResult measured =
      run_of({record(0, StepKind::compute, "compute", 0, 1), record(1, StepKind::offload, "d2h", 1, 4, 100),
              record(2, StepKind::prefetch, "h2d", 4, 5.5, 100), record(3, StepKind::compute, "compute", 5.5, 6.5),
              record(4, StepKind::free, "d2h", 6.5, 6.5)},
             800);
  const nlohmann::json document = {{"measured", {{"kernels", "spin"}, {"iteration_times_s", {6.4, 6.5, 6.6}}}}};
  const ValidationReport report = compare_runs(simulated, measured, document);
  const ValidationSummary& s = report.summary;
  EXPECT_TRUE(s.simulated_feasible);
  EXPECT_TRUE(s.measured_feasible);
  EXPECT_DOUBLE_EQ(s.simulated_iteration_s, 5);
  EXPECT_DOUBLE_EQ(s.measured_iteration_s, 6.5);
  EXPECT_NEAR(s.iteration_error, 5 / 6.5 - 1, 1e-12);
  EXPECT_NEAR(s.simulated_stall_s, 3, 1e-12); // compute idle from 1 to 4
  EXPECT_NEAR(s.measured_stall_s, 4.5, 1e-12);
  EXPECT_NEAR(s.stall_error_s, -1.5, 1e-12);
  EXPECT_NEAR(s.stall_error_of_iteration, -1.5 / 6.5, 1e-12);
  EXPECT_NEAR(s.simulated_transfer_s, 3, 1e-12);
  EXPECT_NEAR(s.measured_transfer_s, 4.5, 1e-12);
  EXPECT_NEAR(s.transfer_error, 3 / 4.5 - 1, 1e-12);
  EXPECT_EQ(s.simulated_peak_bytes, 1000u);
  EXPECT_EQ(s.measured_peak_bytes, 800u);
  EXPECT_NEAR(s.peak_error, 0.25, 1e-12);
  EXPECT_EQ(s.compute_steps.count, 2u);
  EXPECT_NEAR(s.compute_steps.max_abs_relative, 0, 1e-12);
  EXPECT_EQ(s.transfer_steps.count, 2u);
  EXPECT_NEAR(s.transfer_steps.median_abs_relative, 1.0 / 3, 1e-12);
  // Step ends drift by 0, 1, 1.5, 1.5 seconds of a 6.5 s iteration.
  EXPECT_NEAR(s.step_end.max_abs_relative, 1.5 / 6.5, 1e-12);
  EXPECT_NEAR(s.step_end.median_abs_relative, 1.25 / 6.5, 1e-12);
  EXPECT_EQ(s.steps_compared, 4u);
  EXPECT_EQ(s.steps_only_measured, 1u);
  EXPECT_EQ(s.steps_only_simulated, 0u);
  EXPECT_EQ(s.kernels, "spin");
  EXPECT_EQ(s.measured_iterations, 3u);
  EXPECT_NEAR(s.measured_iteration_spread, 0.2 / 6.5, 1e-12);

  const std::string csv = steps_csv(report);
  EXPECT_THAT(csv, HasSubstr("1,offload,d2h,s1,100,1,3,1,4,2,3,-0.3333333333333333\n"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
}

TEST(CompareRuns, InfeasibleRunsCarryTheirErrors)
{
  RunResult simulated = run_of({record(0, StepKind::compute, "compute", 0, 1)}, 10);
  simulated.metrics.feasible = false;
  simulated.error = ExecutionError{1, 3, 1.0, 10, 20, "step 1 out of memory"};
  RunResult measured = run_of({record(0, StepKind::compute, "compute", 0, 1)}, 10);
  const ValidationSummary s = compare_runs(simulated, measured).summary;
  EXPECT_FALSE(s.simulated_feasible);
  EXPECT_EQ(s.simulated_error, "step 1 out of memory");
  EXPECT_TRUE(s.measured_feasible);
  EXPECT_EQ(s.kernels, "");
}

TEST(ValidationSummary, JsonRoundTripAndCsvColumns)
{
  RunResult a = run_of({record(0, StepKind::compute, "compute", 0, 1), record(1, StepKind::offload, "d2h", 1, 2)}, 5);
  RunResult b = run_of({record(0, StepKind::compute, "compute", 0, 2), record(1, StepKind::offload, "d2h", 2, 3)}, 7);
  const ValidationSummary s = compare_runs(a, b).summary;
  const ValidationSummary back = summary_from_json(summary_to_json(s), "summary.json");
  EXPECT_EQ(summary_to_json(back), summary_to_json(s));
  EXPECT_EQ(summary_csv_columns().size(), summary_csv_values(s).size());
  EXPECT_THROW(summary_from_json(nlohmann::json{{"format", "memsim-timeline"}}, "x.json"), InputError);
  nlohmann::json broken = summary_to_json(s);
  broken.erase("iteration_error");
  try {
    summary_from_json(broken, "broken.json");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr("broken.json"));
    EXPECT_THAT(error.what(), HasSubstr("iteration_error"));
  }
}

TEST(CellId, FractionAndByteBudgets)
{
  EXPECT_EQ(cell_id("vgg", "vdnn-all", 123, 0.35), "vgg.vdnn-all.f0.35");
  EXPECT_EQ(cell_id("vgg", "keep-all", 123, 1.0), "vgg.keep-all.f1");
  EXPECT_EQ(cell_id("vgg", "rotor", 4000000000, std::nullopt), "vgg.rotor.b4000000000");
}

// A "measurement": the simulated timeline document with every time multiplied by `factor`, plus the
// `measured` object memsim-cuda writes.
void write_stretched(const std::filesystem::path& simulated, const std::filesystem::path& out, double factor,
                     const std::string& kernels = "spin")
{
  nlohmann::json document = json_io::read_file(simulated);
  for (auto& step : document["steps"]) {
    step["start_s"] = step["start_s"].get<double>() * factor;
    step["end_s"] = step["end_s"].get<double>() * factor;
  }
  for (auto& sample : document["memory"])
    sample[1] = sample[1].get<double>() * factor;
  const double iteration = document["metrics"]["iteration_time_s"].get<double>() * factor;
  document["measured"] = {{"executor", "test"}, {"kernels", kernels}, {"iteration_times_s", {iteration, iteration}}};
  json_io::write_file(out, document);
}

TEST(ValidateCommand, OnePlanAgainstAStretchedSimulation)
{
  ScratchDir scratch;
  const std::string trace = (data_dir() / "chain4.trace.json").string();
  const std::string machine = (data_dir() / "small.machine.yaml").string();
  const auto plan = scratch / "vdnn.plan.json";
  ASSERT_EQ(run_command(kMemsim.string() + " plan --trace " + trace + " --machine " + machine +
                        " --planner vdnn-all --out " + plan.string())
                .exit_code,
            0);
  ASSERT_EQ(run_command(kMemsim.string() + " simulate --trace " + trace + " --machine " + machine + " --plan " +
                        plan.string() + " --timeline " + (scratch / "sim.json").string())
                .exit_code,
            0);
  write_stretched(scratch / "sim.json", scratch / "measured.json", 1.25);

  const auto result =
      run_command(kMemsim.string() + " validate --trace " + trace + " --machine " + machine + " --plan " +
                      plan.string() + " --measured " + (scratch / "measured.json").string() +
                      " --json --no-plots --out " + (scratch / "out").string(),
                  true);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = nlohmann::json::parse(result.output);
  EXPECT_NEAR(summary["iteration_error"].get<double>(), 1 / 1.25 - 1, 1e-9);
  EXPECT_NEAR(summary["compute_steps"]["median_abs_relative"].get<double>(), 0.2, 1e-9);
  EXPECT_GT(summary["transfer_steps"]["count"].get<int>(), 0);
  EXPECT_NEAR(summary["transfer_error"].get<double>(), 1 / 1.25 - 1, 1e-9);
  EXPECT_NEAR(summary["stall_error_s"].get<double>(), -0.25 * summary["simulated_stall_s"].get<double>(), 1e-12);
  EXPECT_EQ(summary["peak_error"].get<double>(), 0);
  EXPECT_EQ(summary["kernels"], "spin");
  EXPECT_EQ(summary, json_io::read_file(scratch / "out" / "summary.json"));
  EXPECT_THAT(read_file(scratch / "out" / "steps.csv"), HasSubstr("offload,d2h"));
  EXPECT_TRUE(std::filesystem::exists(scratch / "out" / "simulated.timeline.json"));

  // The table form names the figures.
  const auto table = run_command(kMemsim.string() + " validate --trace " + trace + " --machine " + machine +
                                 " --plan " + plan.string() + " --measured " + (scratch / "measured.json").string());
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("error -20.00%"));
}

TEST(ValidateCommand, BadInputIsLocated)
{
  ScratchDir scratch;
  const std::string trace = (data_dir() / "chain4.trace.json").string();
  const std::string machine = (data_dir() / "small.machine.yaml").string();
  auto missing = run_command(kMemsim.string() + " validate --trace " + trace + " --machine " + machine);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("--plan is required"));
  auto both = run_command(kMemsim.string() + " validate --trace " + trace + " --experiment x.yaml");
  EXPECT_EQ(both.exit_code, 2);

  const auto plan = scratch / "keep.plan.json";
  ASSERT_EQ(run_command(kMemsim.string() + " plan --trace " + trace + " --machine " + machine +
                        " --planner keep-all --out " + plan.string())
                .exit_code,
            0);
  write_file(scratch / "bad.json", R"({"format": "memsim-timeline", "version": 1, "steps": [{"step": 0}]})");
  auto bad = run_command(kMemsim.string() + " validate --trace " + trace + " --machine " + machine + " --plan " +
                         plan.string() + " --measured " + (scratch / "bad.json").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("bad.json"));
  EXPECT_THAT(bad.output, HasSubstr("/steps/0"));
}

TEST(ValidateCommand, SweepFromAMeasurementsFolder)
{
  ScratchDir scratch;
  const auto experiment = scratch / "v.yaml";
  write_file(experiment, "format: memsim-experiment\nversion: 1\nname: v\nmachine: " +
                             (data_dir() / "small.machine.yaml").string() +
                             "\nworkloads:\n  - {name: chain4, trace: " + (data_dir() / "chain4.trace.json").string() +
                             "}\nplanners: [keep-all, vdnn-all]\nsweep:\n  budget: {fraction_of_peak: [1.0, 0.9]}\n");
  const auto inputs = scratch / "inputs";
  auto prepared =
      run_command(kMemsim.string() + " validate --experiment " + experiment.string() + " --prepare " + inputs.string());
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  const std::string cells = read_file(inputs / "cells.txt");
  // keep-all does not fit 0.9x its peak: three planned cells, spin lines first, then gemm.
  EXPECT_EQ(cells,
            "chain4.keep-all.f1 chain4 spin\nchain4.vdnn-all.f1 chain4 spin\nchain4.vdnn-all.f0.9 chain4 spin\n"
            "chain4.keep-all.f1 chain4 gemm\nchain4.vdnn-all.f1 chain4 gemm\nchain4.vdnn-all.f0.9 chain4 gemm\n");
  ASSERT_TRUE(std::filesystem::exists(inputs / "workloads" / "chain4.trace.json"));

  // "Run" two cells: the simulation stretched by 1.1 (spin) and shrunk by 0.9 (gemm, one cell); the third cell
  // is not measured. The plan that ran travels with the measurements.
  const auto measurements = scratch / "measured";
  std::filesystem::create_directories(measurements);
  const std::string machine = (data_dir() / "small.machine.yaml").string();
  for (const std::string cell : {"chain4.keep-all.f1", "chain4.vdnn-all.f0.9"}) {
    std::filesystem::copy_file(inputs / "plans" / (cell + ".plan.json"), measurements / (cell + ".plan.json"));
    ASSERT_EQ(run_command(kMemsim.string() + " simulate --trace " +
                          (inputs / "workloads" / "chain4.trace.json").string() + " --machine " + machine + " --plan " +
                          (inputs / "plans" / (cell + ".plan.json")).string() + " --timeline " +
                          (scratch / (cell + ".sim.json")).string())
                  .exit_code,
              0);
    write_stretched(scratch / (cell + ".sim.json"), measurements / (cell + ".spin.measured.json"), 1.1);
  }
  write_stretched(scratch / "chain4.vdnn-all.f0.9.sim.json", measurements / "chain4.vdnn-all.f0.9.gemm.measured.json",
                  0.8, "gemm");

  const auto out = scratch / "out";
  auto result = run_command(kMemsim.string() + " validate --experiment " + experiment.string() + " --measurements " +
                            measurements.string() + " --out " + out.string() + " --no-plots --jobs 2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("3 comparisons; 1 cells infeasible for their planner; 1 planned cells not measured"));
  const std::string csv = read_file(out / "validation.csv");
  std::vector<std::string> lines;
  std::istringstream stream(csv);
  for (std::string line; std::getline(stream, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << csv;
  EXPECT_THAT(lines[0],
              HasSubstr("cell,workload,machine,planner,planner_name,budget_bytes,budget_fraction,plan_matches,"
                        "kernels,"));
  // Rows in cell order, spin before gemm; errors 1/1.1 - 1 and 1/0.8 - 1 = +25%.
  EXPECT_THAT(lines[1], HasSubstr("chain4.keep-all.f1,chain4,"));
  EXPECT_THAT(lines[1], HasSubstr(",true,spin,true,true,"));
  EXPECT_THAT(lines[2], HasSubstr("chain4.vdnn-all.f0.9,chain4,"));
  EXPECT_THAT(lines[3], HasSubstr(",true,gemm,true,true,"));
  const nlohmann::json spin = json_io::read_file(out / "cells" / "chain4.keep-all.f1.spin" / "summary.json");
  EXPECT_NEAR(spin["iteration_error"].get<double>(), 1 / 1.1 - 1, 1e-9);
  const nlohmann::json gemm = json_io::read_file(out / "cells" / "chain4.vdnn-all.f0.9.gemm" / "summary.json");
  EXPECT_NEAR(gemm["iteration_error"].get<double>(), 0.25, 1e-9);

  // A plan that differs from what the planner makes now is simulated as it ran, and flagged.
  nlohmann::json plan = json_io::read_file(measurements / "chain4.keep-all.f1.plan.json");
  plan["planner"] = "hand";
  json_io::write_file(measurements / "chain4.keep-all.f1.plan.json", plan);
  result = run_command(kMemsim.string() + " validate --experiment " + experiment.string() + " --measurements " +
                       measurements.string() + " --out " + out.string() + " --no-plots");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("(plan differs)"));
  EXPECT_THAT(read_file(out / "validation.csv"), HasSubstr(",false,spin,"));
}

} // namespace
} // namespace memsim::validation
