// The capacity search of `memsim max-scale`: exact boundaries of synthetic feasibility functions (monotone and not),
// the boundary of a generated workload whose keep-all peak is linear in the batch, and the command line.
#include "experiment_test_support.hpp"

#include "memsim/common/error.hpp"
#include "memsim/experiments/capacity_search.hpp"
#include "memsim/experiments/scale_study.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/generator_registry.hpp"
#include "test_traces.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <regex>
#include <set>

namespace memsim::experiments {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_command;

const std::filesystem::path kMemsim = MEMSIM_EXECUTABLE;

ProbeFunction feasible_when(std::function<bool(std::int64_t)> rule)
{
  return [rule = std::move(rule)](std::int64_t value) {
    ProbeOutcome outcome;
    outcome.feasible = rule(value);
    return outcome;
  };
}

std::set<std::int64_t> probed_values(const CapacityResult& result)
{
  std::set<std::int64_t> values;
  for (const Probe& probe : result.probes)
    values.insert(probe.value);
  return values;
}

TEST(CapacitySearch, FindsEveryMonotoneBoundaryExactly)
{
  for (std::int64_t boundary = 1; boundary <= 300; ++boundary) {
    const CapacityResult result =
        find_largest_feasible(feasible_when([=](std::int64_t v) { return v <= boundary; }), {1, 1 << 20, 8});
    ASSERT_TRUE(result.largest) << boundary;
    EXPECT_EQ(*result.largest, boundary);
    EXPECT_FALSE(result.reached_limit);
    // Each value is probed once, and the search stays logarithmic plus the scan window.
    EXPECT_EQ(probed_values(result).size(), result.probes.size());
    EXPECT_LE(result.probes.size(), 2 * 10 + 8 + 2u) << boundary;
  }
}

TEST(CapacitySearch, LeavesAHoleThatBisectionFallsIntoBehind)
{
  // Feasible up to 50 except at 48: bisection between 32 and 64 probes 48 and stops at 47; the scan finds 49 and 50.
  const CapacityResult result =
      find_largest_feasible(feasible_when([](std::int64_t v) { return v <= 50 && v != 48; }), {1, 1 << 20, 8});
  ASSERT_TRUE(result.largest);
  EXPECT_EQ(*result.largest, 50);
  EXPECT_TRUE(probed_values(result).contains(48));
}

TEST(CapacitySearch, ScanWidthBoundsWhatANonMonotonePlannerCanHide)
{
  // Feasible up to 20, then again from 26 to 28 (no power of two lands there): the gap of 5 values is crossed by a
  // scan of 8 and not by one of 5.
  auto rule = [](std::int64_t v) { return v <= 20 || (v >= 26 && v <= 28); };
  EXPECT_EQ(*find_largest_feasible(feasible_when(rule), {1, 1 << 20, 8}).largest, 28);
  EXPECT_EQ(*find_largest_feasible(feasible_when(rule), {1, 1 << 20, 5}).largest, 20);
}

TEST(CapacitySearch, StartLimitAndNothingFeasible)
{
  const CapacityResult none = find_largest_feasible(feasible_when([](std::int64_t) { return false; }), {1, 100, 8});
  EXPECT_FALSE(none.largest);
  // The start and the window above it (1..9), then the doubling values not probed yet (16, 32, 64) and the limit.
  EXPECT_EQ(none.probes.size(), 13u);
  EXPECT_EQ(none.probes.back().value, 100);

  const CapacityResult late =
      find_largest_feasible(feasible_when([](std::int64_t v) { return v >= 5 && v <= 9; }), {1, 100, 8});
  EXPECT_EQ(*late.largest, 9);

  // Feasible only from 40 to 70 (a fixed cost too large at small sizes): found by doubling from the start, 64, then
  // bisected up to 70.
  const CapacityResult window =
      find_largest_feasible(feasible_when([](std::int64_t v) { return v >= 40 && v <= 70; }), {1, 1000, 2});
  ASSERT_TRUE(window.largest);
  EXPECT_EQ(*window.largest, 70);

  const CapacityResult capped = find_largest_feasible(feasible_when([](std::int64_t) { return true; }), {3, 100, 8});
  EXPECT_EQ(*capped.largest, 100);
  EXPECT_TRUE(capped.reached_limit);
  for (const Probe& probe : capped.probes)
    EXPECT_LE(probe.value, 100);

  EXPECT_THROW(find_largest_feasible(feasible_when([](std::int64_t) { return true; }), {0, 100, 8}),
               std::invalid_argument);
}

ScaleStudy small_cnn_study()
{
  ScaleStudy study;
  parse_workload_spec("cnn:depth=4,channel_scale=0.25,image=32,classes=10", study);
  study.axis = ScaleAxis::batch;
  study.axis_param = resolve_axis_param(study.generator, study.axis, "");
  study.planner = "keep-all";
  study.machine = load_machine_or_preset("v100-32gb-pcie3", default_presets_dir());
  study.simulation.engine = EngineKind::fast;
  return study;
}

// A hand-made workload whose keep-all peak is linear in the batch: a 6-layer chain of 1 MB x batch activations
// and 1 kB weights (tests/support/test_traces.hpp), registered as a generator for these tests only.
const bool kTestChainRegistered = [] {
  generator_registry().add(
      GeneratorInfo{"test-chain",
                    "6-layer chain, activations of 1 MB x batch (tests only)",
                    {ParamSpec{"batch", ParamType::integer, "samples", 1, 1.0, std::nullopt, {}, ""}},
                    [](const ParamValues& values, const RooflineFor&) {
                      Trace trace = test::make_chain(6, values.at("batch").get<std::uint64_t>() * 1'000'000);
                      trace.source.batch = values.at("batch").get<int>();
                      return trace;
                    }});
  return true;
}();

TEST(ScaleStudy, FindsTheKnownBoundaryOfAPeakLinearInTheBatch)
{
  ASSERT_TRUE(kTestChainRegistered);
  ScaleStudy study = small_cnn_study();
  parse_workload_spec("test-chain", study);
  auto peak_at = [&](std::int64_t batch) { return default_memory_profile(workload_at(study, batch)).peak_bytes; };
  // Worked out: at the loss, x, a0..a5 and g5 are live (a5's last reader is the loss); at b5, a5 is gone and g4
  // comes: 8 activation-sized tensors either way, so the peak is 8 MB x batch plus the weights' few kB.
  const std::uint64_t slope = peak_at(2) - peak_at(1);
  const std::uint64_t base = peak_at(1) - slope;
  ASSERT_EQ(slope, 8'000'000u);
  ASSERT_LT(base, 20'000u);
  ASSERT_EQ(peak_at(1000), base + 1000 * slope);
  study.budget_bytes = base + 37 * slope + slope / 2; // fits batch 37, not 38
  const CapacityResult result =
      find_largest_feasible([&](std::int64_t v) { return probe_study(study, v); }, {1, 1 << 16, 8});
  ASSERT_TRUE(result.largest);
  EXPECT_EQ(*result.largest, 37);
  EXPECT_FALSE(result.reached_limit);
}

TEST(ScaleStudy, ModelsAxisFusesCopiesUntilTheBudgetIsFull)
{
  ASSERT_TRUE(kTestChainRegistered);
  ScaleStudy study = small_cnn_study();
  parse_workload_spec("test-chain:batch=3", study);
  set_axis(study, ScaleAxis::models, "");
  EXPECT_EQ(study.axis_param, "models");
  // k fused copies multiply every tensor by k (hwmodels/fuse.hpp), so keep-all's peak is exactly k x one model's.
  const std::uint64_t single = default_memory_profile(workload_at(study, 1)).peak_bytes;
  ASSERT_EQ(default_memory_profile(workload_at(study, 7)).peak_bytes, 7 * single);
  study.budget_bytes = 5 * single + single / 2; // fits 5 models, not 6
  const CapacityResult result =
      find_largest_feasible([&](std::int64_t v) { return probe_study(study, v); }, {1, 1 << 10, 8});
  ASSERT_TRUE(result.largest);
  EXPECT_EQ(*result.largest, 5);
  // Samples/s counts every model: 5 x batch 3 over the fused iteration's time.
  const ProbeOutcome five = probe_study(study, 5);
  ASSERT_TRUE(five.feasible);
  EXPECT_DOUBLE_EQ(five.samples_per_s, 15.0 / five.iteration_time_s);
  EXPECT_THROW(set_axis(study, ScaleAxis::models, "batch"), InputError);
  EXPECT_THROW(set_axis_step(study, 0.5), InputError);
}

// hfta fuses the models itself: on the models axis it gets the single model and models = N, runs subsets of at most
// k* one after another, and so trains any N; its time at N = 7 with k* = 5 is keep-all's at 5 plus keep-all's at 2.
TEST(ScaleStudy, ModelsAxisGivesAPlannerThatFusesTheSingleModel)
{
  ASSERT_TRUE(kTestChainRegistered);
  ScaleStudy study = small_cnn_study();
  parse_workload_spec("test-chain:batch=3", study);
  set_axis(study, ScaleAxis::models, "");
  const std::uint64_t single = default_memory_profile(workload_at(study, 1)).peak_bytes;
  study.budget_bytes = 5 * single + single / 2;
  const ProbeOutcome five = probe_study(study, 5);
  const ProbeOutcome two = probe_study(study, 2);
  ASSERT_TRUE(five.feasible && two.feasible);
  EXPECT_FALSE(probe_study(study, 7).feasible); // keep-all on 7 fused models

  study.planner = "hfta";
  const ProbeOutcome seven = probe_study(study, 7);
  ASSERT_TRUE(seven.feasible) << seven.reason;
  EXPECT_NEAR(seven.iteration_time_s, five.iteration_time_s + two.iteration_time_s, 1e-12);
  EXPECT_DOUBLE_EQ(seven.samples_per_s, 21.0 / seven.iteration_time_s); // 7 models x batch 3
  const CapacityResult result =
      find_largest_feasible([&](std::int64_t v) { return probe_study(study, v); }, {1, 16, 2});
  ASSERT_TRUE(result.largest);
  EXPECT_EQ(*result.largest, 16);
  EXPECT_TRUE(result.reached_limit);
}

// hfta-capuchin fuses the models itself too, all N in one graph: past k* = 5 it trains 6 fused models by swapping
// and recomputing within the budget, but not every N (the fused graph's largest op outgrows the budget).
TEST(ScaleStudy, ModelsAxisGivesHftaCapuchinTheSingleModel)
{
  ASSERT_TRUE(kTestChainRegistered);
  ScaleStudy study = small_cnn_study();
  parse_workload_spec("test-chain:batch=3", study);
  set_axis(study, ScaleAxis::models, "");
  const std::uint64_t single = default_memory_profile(workload_at(study, 1)).peak_bytes;
  study.budget_bytes = 5 * single + single / 2;
  study.planner = "hfta-capuchin";
  const ProbeOutcome six = probe_study(study, 6);
  ASSERT_TRUE(six.feasible) << six.reason;
  EXPECT_DOUBLE_EQ(six.samples_per_s, 18.0 / six.iteration_time_s); // 6 models x batch 3
  const CapacityResult result =
      find_largest_feasible([&](std::int64_t v) { return probe_study(study, v); }, {1, 16, 2});
  ASSERT_TRUE(result.largest);
  EXPECT_GE(*result.largest, 6);
  EXPECT_LT(*result.largest, 16);
}

TEST(ScaleStudy, ARecordedTraceIsRescaledToEachBatch)
{
  // The same chain recorded at batch 4 (4 MB activations): `memsim trace rescale` makes it 1 MB x batch again, so
  // the boundary is the generator's, 37.
  memsim::test::ScratchDir scratch;
  Trace recorded = test::make_chain(6, 4'000'000);
  recorded.source.batch = 4;
  save_trace(recorded, scratch / "chain-b4.trace.json");
  ScaleStudy study = small_cnn_study();
  parse_workload_spec((scratch / "chain-b4.trace.json").string(), study);
  ASSERT_TRUE(study.recorded);
  set_axis(study, ScaleAxis::batch, "");
  EXPECT_EQ(study.axis_param, "batch");
  auto peak_at = [&](std::int64_t batch) { return default_memory_profile(workload_at(study, batch)).peak_bytes; };
  const std::uint64_t slope = peak_at(2) - peak_at(1);
  ASSERT_EQ(slope, 8'000'000u);
  study.budget_bytes = peak_at(1) - slope + 37 * slope + slope / 2;
  const CapacityResult result =
      find_largest_feasible([&](std::int64_t v) { return probe_study(study, v); }, {1, 1 << 16, 8});
  ASSERT_TRUE(result.largest);
  EXPECT_EQ(*result.largest, 37);
  EXPECT_THROW(set_axis(study, ScaleAxis::depth, ""), InputError);
}

TEST(ScaleStudy, FindsTheBoundaryThatAnExhaustiveScanFinds)
{
  // keep-all fits exactly when the default schedule's peak fits: the oracle scans every batch.
  ScaleStudy study = small_cnn_study();
  auto peak_at = [&](std::int64_t batch) { return default_memory_profile(workload_at(study, batch)).peak_bytes; };
  study.budget_bytes = (peak_at(37) + peak_at(38)) / 2;
  std::int64_t oracle = 0;
  for (std::int64_t batch = 1; batch <= 200; ++batch)
    if (peak_at(batch) <= study.budget_bytes)
      oracle = batch;
  ASSERT_EQ(oracle, 37);
  const CapacityResult result =
      find_largest_feasible([&](std::int64_t v) { return probe_study(study, v); }, {1, 1 << 16, 8});
  ASSERT_TRUE(result.largest);
  EXPECT_EQ(*result.largest, oracle);
  for (const Probe& probe : result.probes) {
    EXPECT_EQ(probe.outcome.feasible, peak_at(probe.value) <= study.budget_bytes) << probe.value;
    if (probe.outcome.feasible) {
      EXPECT_DOUBLE_EQ(probe.outcome.samples_per_s, static_cast<double>(probe.value) / probe.outcome.iteration_time_s);
    } else {
      EXPECT_FALSE(probe.outcome.reason.empty());
    }
  }
}

TEST(ScaleStudy, ThroughputFloorMakesFastEnoughAConditionOfFitting)
{
  ScaleStudy study = small_cnn_study();
  study.budget_bytes = 0; // the GPU's memory
  const ProbeOutcome free_run = probe_study(study, 16);
  ASSERT_TRUE(free_run.feasible);
  study.min_samples_per_s = free_run.samples_per_s * 1.01;
  const ProbeOutcome below = probe_study(study, 16);
  EXPECT_FALSE(below.feasible);
  EXPECT_THAT(below.reason, HasSubstr("below the floor"));
}

// The runtime-overhead limit (DTR's and DyNN-Offload's max-batch rule): time <= R x keep-all's with unlimited memory.
TEST(ScaleStudy, OverheadLimitComparesWithKeepAllOnAnUnlimitedGpu)
{
  ASSERT_TRUE(kTestChainRegistered);
  ScaleStudy study = small_cnn_study();
  parse_workload_spec("test-chain", study);
  // keep-all's plan does not depend on memory, so its time is the reference exactly, and a limit of 1 admits it.
  const Trace at_ten = workload_at(study, 10);
  const double reference_s = unlimited_keep_all(at_ten, study.machine, study.simulation).time_s;
  study.max_overhead = 1.0;
  const ProbeOutcome keep_all = probe_study(study, 10);
  ASSERT_TRUE(keep_all.feasible) << keep_all.reason;
  EXPECT_DOUBLE_EQ(keep_all.iteration_time_s, reference_s);
  // The reference exists where keep-all itself runs out of memory: 40 GB of activations at batch 5000 on the 32 GiB
  // V100 (the chain's op times do not depend on the batch, so it is the same time).
  EXPECT_DOUBLE_EQ(unlimited_keep_all(workload_at(study, 5000), study.machine, study.simulation).time_s, reference_s);
  EXPECT_FALSE(probe_study(study, 5000).feasible);
  // √n checkpointing recomputes, so it is slower than the reference: the limit decides on either side of its ratio.
  study.planner = "checkpoint-sqrt";
  study.max_overhead.reset();
  const ProbeOutcome free_run = probe_study(study, 10);
  ASSERT_TRUE(free_run.feasible) << free_run.reason;
  const double ratio = free_run.iteration_time_s / reference_s;
  ASSERT_GT(ratio, 1.0);
  study.max_overhead = ratio * 1.001;
  EXPECT_TRUE(probe_study(study, 10).feasible);
  study.max_overhead = ratio * 0.999;
  const ProbeOutcome over = probe_study(study, 10);
  EXPECT_FALSE(over.feasible);
  EXPECT_THAT(over.reason, HasSubstr("keep-all's"));
}

// μ-TWO's ring runs several cycles of a one-iteration workload: the limit compares its time per iteration with
// keep-all's single iteration, not the whole run's (which is several times keep-all's).
TEST(ScaleStudy, OverheadLimitComparesARingPerIteration)
{
  ASSERT_TRUE(kTestChainRegistered);
  ScaleStudy study = small_cnn_study();
  parse_workload_spec("test-chain:batch=3", study);
  set_axis(study, ScaleAxis::models, "");
  study.budget_bytes = 0; // the GPU's memory: nothing is swapped
  study.planner = "mu-two";
  study.planner_params = {{"partitions", "finest"}, {"include_full_fusion", false}};
  const double reference_s = unlimited_keep_all(workload_at(study, 2), study.machine, study.simulation).time_s;
  const ProbeOutcome ring = probe_study(study, 2);
  ASSERT_TRUE(ring.feasible) << ring.reason;
  // Two one-model sub-arrays take about keep-all's time on the two fused models per cycle, and the run has several.
  ASSERT_GT(ring.iteration_time_s, 2 * reference_s);
  study.max_overhead = 2.0;
  const ProbeOutcome limited = probe_study(study, 2);
  EXPECT_TRUE(limited.feasible) << limited.reason;
  EXPECT_DOUBLE_EQ(limited.iteration_time_s, ring.iteration_time_s);
  study.max_overhead = 1.0 + 1e-9; // no ring is faster than keep-all fused on an unlimited GPU
  const ProbeOutcome over = probe_study(study, 2);
  ASSERT_FALSE(over.feasible);
  EXPECT_THAT(over.reason, HasSubstr("iterations, per 1 of keep-all's"));
}

// A step scales a number parameter: axis value v sets channel_scale to v x 0.125, so value 8 is the whole-number
// scale 1; an integer parameter (the batch) refuses a step.
TEST(ScaleStudy, AStepScalesANumberParameter)
{
  ScaleStudy study = small_cnn_study();
  EXPECT_THROW(set_axis_step(study, 0.5), InputError);
  set_axis(study, ScaleAxis::width, "channel_scale");
  ScaleStudy whole = study;
  set_axis_step(study, 0.125);
  EXPECT_DOUBLE_EQ(axis_value(study, 4), 0.5);
  EXPECT_EQ(trace_to_json(workload_at(study, 8)), trace_to_json(workload_at(whole, 1)));
  EXPECT_NE(trace_to_json(workload_at(study, 4)), trace_to_json(workload_at(whole, 1)));
  EXPECT_THROW(set_axis_step(study, 0), InputError);
  // A new axis starts again from whole numbers.
  set_axis(study, ScaleAxis::batch, "");
  EXPECT_EQ(study.axis_step, 1);
}

TEST(ScaleStudy, AxesResolveToIntegerGeneratorParameters)
{
  EXPECT_EQ(resolve_axis_param("cnn", ScaleAxis::depth, ""), "depth");
  EXPECT_EQ(resolve_axis_param("transformer", ScaleAxis::depth, ""), "layers");
  EXPECT_EQ(resolve_axis_param("transformer", ScaleAxis::width, ""), "hidden");
  EXPECT_EQ(resolve_axis_param("transformer", ScaleAxis::batch, "seq"), "seq");
  EXPECT_THROW(resolve_axis_param("transformer", ScaleAxis::batch, "dtype"), InputError);
  ScaleStudy study;
  EXPECT_THROW(parse_workload_spec("cnn:depth=x", study), InputError);
  EXPECT_THROW(parse_workload_spec("cnn:depth=4,,image=8", study), InputError);
  EXPECT_THROW(parse_workload_spec("nosuch", study), InputError);
}

TEST(MaxScaleCommand, JsonListsEveryProbeAndTheLargestValue)
{
  const auto result =
      run_command(kMemsim.string() + " max-scale --workload cnn:depth=4,channel_scale=0.25,image=32,classes=10"
                                     " --planner keep-all --machine v100-32gb-pcie3 --budget 64MiB --json",
                  /*stdout_only=*/true);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json document = nlohmann::json::parse(result.output);
  ASSERT_TRUE(document["largest"].is_number_integer());
  const std::int64_t largest = document["largest"];
  bool saw_largest = false, saw_next = false;
  for (const auto& probe : document["probes"]) {
    EXPECT_EQ(probe["feasible"].get<bool>(), probe["value"].get<std::int64_t>() <= largest) << probe.dump();
    saw_largest |= probe["value"] == largest;
    saw_next |= probe["value"] == largest + 1;
  }
  EXPECT_TRUE(saw_largest);
  EXPECT_TRUE(saw_next);
}

TEST(MaxScaleCommand, ProgressLinesLogEveryProbe)
{
  const std::string command = kMemsim.string() +
                              " max-scale --workload cnn:depth=4,channel_scale=0.25,image=32,classes=10"
                              " --planner keep-all --machine v100-32gb-pcie3 --budget 64MiB";
  const auto searched = run_command(command + " --json", /*stdout_only=*/true);
  ASSERT_EQ(searched.exit_code, 0) << searched.output;
  const nlohmann::json probes = nlohmann::json::parse(searched.output)["probes"];
  const auto logged = run_command(command + " --progress lines");
  ASSERT_EQ(logged.exit_code, 0) << logged.output;
  // One line per probe, in order, each stamped with the seconds elapsed.
  const std::regex probe_line(R"(\[ *[0-9]+\.[0-9] s\] keep-all: probe ([0-9]+): batch ([0-9]+) (fits|does not fit))");
  std::size_t seen = 0;
  for (const std::string& line : memsim::test::lines_of(logged.output)) {
    std::smatch match;
    if (!std::regex_match(line, match, probe_line))
      continue;
    ASSERT_LT(seen, probes.size()) << line;
    EXPECT_EQ(std::stoul(match[1]), seen + 1) << line;
    EXPECT_EQ(std::stol(match[2]), probes[seen]["value"].get<std::int64_t>()) << line;
    EXPECT_EQ(match[3] == "fits", probes[seen]["feasible"].get<bool>()) << line;
    ++seen;
  }
  EXPECT_EQ(seen, probes.size()) << logged.output;
  const auto quiet = run_command(command + " --progress off");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_THAT(quiet.output, Not(HasSubstr("probe 1:")));
  const auto bad = run_command(command + " --progress always");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--progress: always not in {auto,on,lines,off}"));
}

TEST(MaxScaleCommand, BadInputIsLocated)
{
  auto run = [](const std::string& args) { return run_command(kMemsim.string() + " max-scale " + args); };
  const std::string common = " --planner keep-all --machine v100-32gb-pcie3";
  auto axis = run("--workload cnn --axis heads" + common);
  EXPECT_EQ(axis.exit_code, 2);
  EXPECT_THAT(axis.output, HasSubstr("--axis: unknown axis 'heads' (valid: batch, width, depth, models)"));
  auto models_param = run("--workload cnn --axis models --axis-param batch" + common);
  EXPECT_EQ(models_param.exit_code, 2);
  EXPECT_THAT(models_param.output, HasSubstr("--axis-param: the models axis fuses copies"));
  auto fusion_on_batch = run("--workload cnn --fusion batch-proxy" + common);
  EXPECT_EQ(fusion_on_batch.exit_code, 2);
  EXPECT_THAT(fusion_on_batch.output, HasSubstr("--fusion: only the models axis fuses"));
  auto unknown_fusion = run("--workload cnn --axis models --fusion vmap" + common);
  EXPECT_EQ(unknown_fusion.exit_code, 2);
  EXPECT_THAT(unknown_fusion.output, HasSubstr("--fusion: unknown fusion model 'vmap'"));
  auto measured_without_traces = run("--workload cnn --axis models --fusion measured" + common);
  EXPECT_EQ(measured_without_traces.exit_code, 2);
  EXPECT_THAT(measured_without_traces.output,
              HasSubstr("--fused-traces: --fusion measured needs the directory of recorded fused traces"));
  auto traces_without_measured = run("--workload cnn --axis models --fused-traces dir" + common);
  EXPECT_EQ(traces_without_measured.exit_code, 2);
  EXPECT_THAT(traces_without_measured.output, HasSubstr("--fused-traces: is read only with --fusion measured"));
  auto width = run("--workload cnn --axis width" + common);
  EXPECT_EQ(width.exit_code, 2);
  EXPECT_THAT(width.output, HasSubstr("no parameter for the width axis"));
  auto refused = run("--workload preset:model=transformer-iwslt --planner rotor --machine v100-32gb-pcie3 --limit 4");
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("the planner refuses the workload"));
  EXPECT_THAT(refused.output, HasSubstr("no chain view"));
  auto tiny = run("--workload cnn --budget 1KiB" + common);
  EXPECT_EQ(tiny.exit_code, 1) << tiny.output;
  EXPECT_THAT(tiny.output, HasSubstr("no batch from 1 on fits"));
}

} // namespace
} // namespace memsim::experiments
