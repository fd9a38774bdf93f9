// The memsim executable end to end: `simulate` on hand-made documents with exactly known answers (the DESIGN.md
// appendix example), `plan` -> `simulate` round trips, `gen`, `planners`, exit codes and `--help` everywhere.
#include "test_files.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace memsim {
namespace {

using ::testing::HasSubstr;
using test::read_file;
using test::run_command;
using test::ScratchDir;
using test::write_file;

const std::string kMemsim = MEMSIM_EXECUTABLE;
const std::filesystem::path kGood = std::filesystem::path(MEMSIM_SOURCE_DIR) / "tests" / "bad";

std::string quoted(const std::filesystem::path& path)
{
  std::string text = "'"; // built with += : g++ 12's -Wrestrict misfires on "'" + string + "'"
  text += path.string();
  text += '\'';
  return text;
}

std::string simulate_command(const std::filesystem::path& plan, const std::string& extra = "")
{
  return kMemsim + " simulate --trace " + quoted(kGood / "good.trace.json") + " --machine " +
         quoted(kGood / "good.machine.yaml") + " --plan " + quoted(plan) + " " + extra;
}

// A plan over the appendix trace (x, w1 -> l1.fwd -> a1) with the given steps.
std::filesystem::path write_plan(const ScratchDir& scratch, const std::string& steps, std::uint64_t budget = 8000000)
{
  const std::filesystem::path path = scratch / "plan.json";
  write_file(path, R"({"format": "memsim-plan", "version": 1, "trace": "tiny-chain", "machine": "two-gpus-one-switch",
 "planner": "hand", "budget_bytes": )" +
                       std::to_string(budget) + R"(, "steps": [)" + steps + "]}");
  return path;
}

nlohmann::json json_of(const test::CommandResult& result)
{
  try {
    return nlohmann::json::parse(result.output);
  } catch (const std::exception& error) {
    ADD_FAILURE() << "stdout is not one JSON object: " << error.what() << "\n" << result.output;
    return {};
  }
}

// The fixtures of tests/sim/core_cases_test.cpp (and memsim-cuda's tests) through `memsim simulate`, both engines.
TEST(Cli, SimulateReportsTheCoreCasesOnBothEngines)
{
  const std::filesystem::path fixtures = std::filesystem::path(MEMSIM_SOURCE_DIR) / "tests" / "runtime";
  auto command = [&](const std::string& name, const std::string& options) {
    return kMemsim + " simulate --json --trace " + quoted(fixtures / (name + ".trace.json")) + " --machine " +
           quoted(kGood / "good.machine.yaml") + " --plan " + quoted(fixtures / (name + ".plan.json")) + " " + options;
  };
  for (const char* engine : {"simgrid", "fast"}) {
    const std::string on = std::string("--engine ") + engine;
    const auto unused = run_command(command("unused-weight", on), true);
    ASSERT_EQ(unused.exit_code, 0) << unused.output;
    const nlohmann::json unused_metrics = json_of(unused);
    EXPECT_EQ(unused_metrics["feasible"], false) << on;
    EXPECT_EQ(unused_metrics["error"]["kind"], "out_of_memory") << on;
    EXPECT_THAT(unused_metrics["error"]["message"].get<std::string>(),
                HasSubstr("the tensors resident from the start need 51000000 bytes, budget is 10000000 bytes"));

    const auto bytes = run_command(command("fragment", on + " --allocator bytes"), true);
    ASSERT_EQ(bytes.exit_code, 0) << bytes.output;
    EXPECT_EQ(json_of(bytes)["feasible"], true) << on;
    const auto pool = run_command(command("fragment", on + " --allocator pool"), true);
    ASSERT_EQ(pool.exit_code, 0) << pool.output;
    const nlohmann::json error = json_of(pool)["error"];
    EXPECT_EQ(error["kind"], "fragmentation") << on;
    EXPECT_EQ(error["step"], 5);
    EXPECT_EQ(error["bytes_in_use"], 1048576);
    EXPECT_EQ(error["bytes_requested"], 2097152);
    EXPECT_EQ(error["largest_free_block"], 1048576);
  }
}

TEST(Cli, SimulateJsonOfTheAppendixExample)
{
  const auto result = run_command(simulate_command(kGood / "good.plan.json", "--json"), true);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json metrics = json_of(result);
  EXPECT_EQ(metrics["feasible"], true);
  // compute 1 ms, offload 1e6 B over the 1 GB/s uplink 1 ms, free, prefetch back 1 ms.
  EXPECT_NEAR(metrics["iteration_time_s"].get<double>(), 0.003, 1e-12);
  EXPECT_NEAR(metrics["compute_busy_s"].get<double>(), 0.001, 1e-12);
  EXPECT_EQ(metrics["d2h_bytes"], 1000000);
  EXPECT_EQ(metrics["h2d_bytes"], 1000000);
  EXPECT_EQ(metrics["p2p_bytes"], 0);
  EXPECT_EQ(metrics["peak_device_bytes"], 2001000); // x, w1, a1
  EXPECT_FALSE(metrics.contains("error"));
}

TEST(Cli, TwoGpusOffloadingTogetherShareTheUplink)
{
  ScratchDir scratch;
  const auto plan = write_plan(scratch, R"(
    {"id": 0, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "deps": []},
    {"id": 1, "kind": "compute", "op": 0, "device": 1, "stream": "compute", "deps": []},
    {"id": 2, "kind": "offload", "tensor": 2, "device": 0, "stream": "d2h", "deps": [0]},
    {"id": 3, "kind": "offload", "tensor": 2, "device": 1, "stream": "d2h", "deps": [1]})");
  const auto result = run_command(simulate_command(plan, "--json --timeline " + quoted(scratch / "t.json")), true);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NEAR(json_of(result)["iteration_time_s"].get<double>(), 0.003, 1e-12);
  const nlohmann::json timeline = nlohmann::json::parse(read_file(scratch / "t.json"));
  ASSERT_EQ(timeline["steps"].size(), 4u);
  for (int step : {2, 3}) {
    EXPECT_NEAR(timeline["steps"][step]["start_s"].get<double>(), 0.001, 1e-12);
    EXPECT_NEAR(timeline["steps"][step]["end_s"].get<double>(), 0.003, 1e-12);
  }
  // Perfetto's part: gpu0 and gpu1 each with a compute and a d2h track.
  std::size_t tracks = 0;
  for (const auto& event : timeline["traceEvents"])
    tracks += event["ph"] == "M" && event["name"] == "thread_name";
  EXPECT_EQ(tracks, 4u);
}

TEST(Cli, OutOfMemoryIsAResultWithStepTensorTimeAndBytes)
{
  ScratchDir scratch;
  const auto plan = write_plan(scratch, R"({"id": 0, "kind": "compute", "op": 0, "device": 0, "stream": "compute",
    "deps": []})",
                               1500000);
  const auto result = run_command(simulate_command(plan, "--json"), true);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json metrics = json_of(result);
  EXPECT_EQ(metrics["feasible"], false);
  EXPECT_EQ(metrics["error"]["step"], 0);
  EXPECT_EQ(metrics["error"]["tensor"], 2);
  EXPECT_EQ(metrics["error"]["time_s"], 0.0);
  EXPECT_EQ(metrics["error"]["bytes_in_use"], 1001000);
  EXPECT_EQ(metrics["error"]["bytes_requested"], 1000000);
}

TEST(Cli, UsingAFreedTensorIsReportedInTheTable)
{
  ScratchDir scratch;
  const auto plan = write_plan(scratch, R"(
    {"id": 0, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "deps": []},
    {"id": 1, "kind": "free", "tensor": 2, "device": 0, "stream": "compute", "deps": [0]},
    {"id": 2, "kind": "offload", "tensor": 2, "device": 0, "stream": "d2h", "deps": [1]})");
  const auto result = run_command(simulate_command(plan));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("infeasible: step 2 (offload on gpu0/d2h) offloads tensor 2 'a1' (1000000 "
                                       "bytes) but it is not resident on gpu0 at t=0.001000000s"));
}

TEST(Cli, PlanThenSimulateRoundTrip)
{
  ScratchDir scratch;
  const std::string common = " --machine " + quoted(kGood / "good.machine.yaml");
  const auto generated = run_command(kMemsim + " gen cnn --depth 4 --batch 4 --image 32 --machine " +
                                     quoted(kGood / "good.machine.yaml") + " --out " + quoted(scratch / "cnn.json"));
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  for (const char* planner : {"keep-all", "vdnn-all", "vdnn-conv", "checkpoint-sqrt"}) {
    const auto planned = run_command(kMemsim + " plan --trace " + quoted(scratch / "cnn.json") + common +
                                     " --planner " + planner + " --out " + quoted(scratch / "plan.json"));
    ASSERT_EQ(planned.exit_code, 0) << planner << ": " << planned.output;
    const auto simulated = run_command(kMemsim + " simulate --json --trace " + quoted(scratch / "cnn.json") + common +
                                           " --plan " + quoted(scratch / "plan.json"),
                                       true);
    ASSERT_EQ(simulated.exit_code, 0) << planner << ": " << simulated.output;
    EXPECT_EQ(json_of(simulated)["feasible"], true) << planner;
  }
}

// --state-dir reaches the planner: mu-two's ring creates the folder, and its search, once ended, leaves nothing there
// and the same plan as without the option; a folder that cannot be created fails before the search. (Resuming a
// stopped search: tests/sim/mu_two_resume_test.cpp.)
TEST(Cli, PlanKeepsNoStateOnceTheSearchEnds)
{
  ScratchDir scratch;
  const std::string common = " --machine " + quoted(kGood / "good.machine.yaml");
  ASSERT_EQ(run_command(kMemsim + " gen cnn --depth 3 --batch 2 --image 16" + common + " --out " +
                        quoted(scratch / "cnn.json"))
                .exit_code,
            0);
  const std::string plan = kMemsim + " plan --trace " + quoted(scratch / "cnn.json") + common +
                           " --planner mu-two --param models=3 --param partitions=finest --param "
                           "include_full_fusion=false --out ";
  const auto plain = run_command(plan + quoted(scratch / "plain.json"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto kept = run_command(plan + quoted(scratch / "kept.json") + " --state-dir " + quoted(scratch / "state"));
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_EQ(read_file(scratch / "kept.json"), read_file(scratch / "plain.json"));
  ASSERT_TRUE(std::filesystem::is_directory(scratch / "state"));
  EXPECT_TRUE(std::filesystem::is_empty(scratch / "state"));

  write_file(scratch / "file", "not a folder\n");
  const auto refused =
      run_command(plan + quoted(scratch / "refused.json") + " --state-dir " + quoted(scratch / "file" / "state"));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr((scratch / "file" / "state").string() + ": cannot create the state folder"));
  EXPECT_FALSE(std::filesystem::exists(scratch / "refused.json"));
}

TEST(Cli, PlannerThatCannotFitExitsOneWithTheReason)
{
  ScratchDir scratch;
  const auto result = run_command(kMemsim + " plan --trace " + quoted(kGood / "good.trace.json") + " --machine " +
                                  quoted(kGood / "good.machine.yaml") + " --planner keep-all --budget 1000 --out " +
                                  quoted(scratch / "plan.json"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("keep-all needs"));
  EXPECT_FALSE(std::filesystem::exists(scratch / "plan.json"));
}

TEST(Cli, GenIsDeterministic)
{
  ScratchDir scratch;
  const std::string base = kMemsim + " gen transformer --layers 2 --hidden 64 --heads 4 --seq 16 --batch 2 --machine " +
                           quoted(kGood / "good.machine.yaml") + " --out ";
  ASSERT_EQ(run_command(base + quoted(scratch / "a.json")).exit_code, 0);
  ASSERT_EQ(run_command(base + quoted(scratch / "b.json")).exit_code, 0);
  EXPECT_EQ(read_file(scratch / "a.json"), read_file(scratch / "b.json"));
  EXPECT_EQ(nlohmann::json::parse(read_file(scratch / "a.json"))["format"], "memsim-trace");
}

// memsim gen fuse end to end: K = 1 writes the generated trace back byte for byte; K = 3 triples every tensor.
TEST(Cli, GenFuseIsTheIdentityAtOneModelAndTriplesBytesAtThree)
{
  ScratchDir scratch;
  ASSERT_EQ(run_command(kMemsim + " gen transformer --layers 2 --hidden 64 --heads 4 --seq 16 --batch 2 --machine " +
                        quoted(kGood / "good.machine.yaml") + " --out " + quoted(scratch / "one.json"))
                .exit_code,
            0);
  const std::string fuse = kMemsim + " gen fuse --trace " + quoted(scratch / "one.json");
  ASSERT_EQ(run_command(fuse + " --models 1 --out " + quoted(scratch / "same.json")).exit_code, 0);
  EXPECT_EQ(read_file(scratch / "same.json"), read_file(scratch / "one.json"));
  for (const char* fusion : {"efficiency", "batch-proxy"}) {
    const auto result =
        run_command(fuse + " --models 3 --fusion " + fusion + " --out " + quoted(scratch / "three.json"));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const nlohmann::json one = nlohmann::json::parse(read_file(scratch / "one.json"));
    const nlohmann::json three = nlohmann::json::parse(read_file(scratch / "three.json"));
    EXPECT_EQ(three["name"], one["name"].get<std::string>() + "-k3");
    ASSERT_EQ(three["tensors"].size(), one["tensors"].size());
    for (std::size_t i = 0; i < one["tensors"].size(); ++i)
      EXPECT_EQ(three["tensors"][i]["bytes"].get<std::uint64_t>(), 3 * one["tensors"][i]["bytes"].get<std::uint64_t>());
    EXPECT_EQ(three["ops"].size(), one["ops"].size());
  }
}

TEST(Cli, PlannersListsTheBaselinesWithTheirParameters)
{
  const auto result = run_command(kMemsim + " planners");
  ASSERT_EQ(result.exit_code, 0);
  for (const char* text : {"keep-all", "vdnn-all", "vdnn-conv", "checkpoint-sqrt", "--param lookahead=<integer>"})
    EXPECT_THAT(result.output, HasSubstr(text));
}

TEST(Cli, PlannersListsEveryPlannerWithTypedRangedParameters)
{
  const auto result = run_command(kMemsim + " planners");
  ASSERT_EQ(result.exit_code, 0);
  for (const char* name : {"keep-all", "vdnn-all", "vdnn-conv", "checkpoint-sqrt", "rotor", "offload-dp", "pofo",
                           "autocapper", "opportunist"})
    EXPECT_THAT(result.output, HasSubstr(std::string(name) + "\n    ")) << name;
  EXPECT_THAT(result.output, HasSubstr("    --param lookahead=<integer>  default 1 in [0, 1000]: prefetch when"));
  EXPECT_THAT(result.output, HasSubstr("    --param levels=<integer>  default 50 in [2, 1000]: memory discretization"));
}

TEST(Cli, GeneratorsListsTheirOptions)
{
  const auto result = run_command(kMemsim + " generators");
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.output, HasSubstr("cnn\n    VGG-style"));
  EXPECT_THAT(result.output, HasSubstr("transformer\n    Transformer"));
  EXPECT_THAT(result.output, HasSubstr("    --depth <integer>  default 16 in [1, inf]: conv layers"));
  EXPECT_THAT(result.output,
              HasSubstr("    --channels <number> (channel_scale in experiment files)  default 1.0: channel width"));
  EXPECT_THAT(result.output, HasSubstr("    --dtype <string>  default \"fp32\" one of fp32, fp16, bf16: element type"));
  EXPECT_THAT(result.output, HasSubstr("    --residual <boolean>  default false: ResNet-style"));
}

TEST(Cli, ImportersListsTheirOptions)
{
  const auto result = run_command(kMemsim + " importers");
  ASSERT_EQ(result.exit_code, 0);
  for (const char* name : {"dtr\n", "checkmate\n", "pytorch-eg\n"})
    EXPECT_THAT(result.output, HasSubstr(name));
  EXPECT_THAT(result.output, HasSubstr("    --seconds-per-cost <number>  default 0.001 in [0, inf]: seconds per unit"));
  EXPECT_THAT(result.output, HasSubstr("    --profile <string>  default \"\": Chrome/Kineto"));
}

TEST(Cli, MachinesListsThePresetsWithGpusAndHostMemory)
{
  const auto result = run_command(kMemsim + " machines");
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.output,
              HasSubstr("4x1080ti-pcie-1switch     4 x GTX1080Ti-11GB (11.00GiB), host 375.00GiB, 1 switches"));
  EXPECT_THAT(result.output,
              HasSubstr("dgx2                     16 x V100-SXM3-32GB (32.00GiB), host 1.50TiB, 15 switches"));
}

TEST(Cli, PoliciesListsLruSwapWithItsParameter)
{
  const auto result = run_command(kMemsim + " policies");
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.output, HasSubstr("lru-swap\n"));
  EXPECT_THAT(result.output, HasSubstr("    --policy-param min_bytes=<integer>  default 0 in [0, inf]"));
}

// Two instances of the appendix op on gpu0 with a 3.5 MB budget: x and w1 of both instances (2.002 MB) and the
// first a1 fit; the second a1 does not, so lru-swap offloads the first (1 MB over the 1 GB/s uplink: 1 ms).
const char* kTwoInstanceSteps = R"(
    {"id": 0, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "deps": []},
    {"id": 1, "kind": "compute", "op": 0, "device": 0, "stream": "compute", "instance": 1, "deps": []})";

TEST(Cli, SimulateWithAPolicyWritesARealizedPlanThatReplaysTheSame)
{
  ScratchDir scratch;
  const auto plan = write_plan(scratch, kTwoInstanceSteps, 3500000);
  const auto realized = scratch / "realized.json";
  for (const char* engine : {"simgrid", "fast"}) {
    const auto live = run_command(simulate_command(plan, std::string("--json --policy lru-swap --engine ") + engine +
                                                             " --realized-plan " + quoted(realized)),
                                  true);
    ASSERT_EQ(live.exit_code, 0) << live.output;
    const nlohmann::json metrics = json_of(live);
    EXPECT_EQ(metrics["feasible"], true);
    EXPECT_NEAR(metrics["iteration_time_s"].get<double>(), 0.003, 1e-12);
    EXPECT_EQ(metrics["d2h_bytes"], 1000000);
    EXPECT_EQ(metrics["peak_device_bytes"], 3002000);
    const nlohmann::json document = nlohmann::json::parse(read_file(realized));
    EXPECT_FALSE(document.contains("policy"));
    ASSERT_EQ(document["steps"].size(), 4u); // compute, offload, free, compute
    EXPECT_EQ(document["steps"][1]["kind"], "offload");
    EXPECT_EQ(document["steps"][2]["kind"], "free");
    EXPECT_EQ(document["steps"][2]["deps"], nlohmann::json::array({1}));
    EXPECT_EQ(document["steps"][3]["deps"], nlohmann::json::array({2}));

    const auto replay = run_command(simulate_command(realized, std::string("--json --engine ") + engine), true);
    ASSERT_EQ(replay.exit_code, 0) << replay.output;
    const nlohmann::json replayed = json_of(replay);
    for (const char* key :
         {"feasible", "iteration_time_s", "stall_time_s", "peak_device_bytes", "h2d_bytes", "d2h_bytes"})
      EXPECT_EQ(replayed[key], metrics[key]) << key;
  }
}

// The same two instances under dtr: the first instance's a1 is dropped (no copy, no time) for the second's.
TEST(Cli, SimulateWithDtrDropsInsteadOfCopying)
{
  ScratchDir scratch;
  const auto plan = write_plan(scratch, kTwoInstanceSteps, 3500000);
  for (const char* engine : {"simgrid", "fast"}) {
    const auto live = run_command(
        simulate_command(plan, std::string("--json --policy dtr --policy-param heuristic=dtr-eq --engine ") + engine),
        true);
    ASSERT_EQ(live.exit_code, 0) << live.output;
    const nlohmann::json metrics = json_of(live);
    EXPECT_EQ(metrics["feasible"], true);
    EXPECT_NEAR(metrics["iteration_time_s"].get<double>(), 0.002, 1e-12);
    EXPECT_EQ(metrics["d2h_bytes"], 0);
    EXPECT_EQ(metrics["peak_device_bytes"], 3002000);
  }
  const auto bad = run_command(simulate_command(plan, "--policy dtr --policy-param heuristic=random"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("parameter 'heuristic' of policy 'dtr'"));
}

TEST(Cli, ThePlansPolicyRunsUnlessTheCommandLineOverridesIt)
{
  ScratchDir scratch;
  const auto plan = scratch / "plan.json";
  write_file(plan, R"({"format": "memsim-plan", "version": 1, "trace": "tiny-chain", "machine": "m", "planner": "hand",
 "budget_bytes": 3500000, "policy": {"name": "lru-swap", "params": {"min_bytes": 0}}, "steps": [)" +
                       std::string(kTwoInstanceSteps) + "]}");
  const auto with_plan_policy = run_command(simulate_command(plan, "--json --engine fast"), true);
  ASSERT_EQ(with_plan_policy.exit_code, 0) << with_plan_policy.output;
  EXPECT_EQ(json_of(with_plan_policy)["feasible"], true);
  const auto none = run_command(simulate_command(plan, "--json --engine fast --policy none"), true);
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_EQ(json_of(none)["feasible"], false);
  const auto large_only =
      run_command(simulate_command(plan, "--json --engine fast --policy-param min_bytes=2000000"), true);
  ASSERT_EQ(large_only.exit_code, 0) << large_only.output;
  EXPECT_EQ(json_of(large_only)["feasible"], false);
}

TEST(Cli, BadPolicyNamesAndParametersExitTwo)
{
  ScratchDir scratch;
  const auto plan = write_plan(scratch, kTwoInstanceSteps, 3500000);
  const auto unknown = run_command(simulate_command(plan, "--policy no-such"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.output, HasSubstr("unknown policy 'no-such' (valid: dtr, dynn-offload, lru-swap, uvm)"));
  const auto bad_value = run_command(simulate_command(plan, "--policy lru-swap --policy-param min_bytes=-1"));
  EXPECT_EQ(bad_value.exit_code, 2);
  EXPECT_THAT(bad_value.output, HasSubstr("parameter 'min_bytes' of policy 'lru-swap'"));
  const auto no_policy = run_command(simulate_command(plan, "--policy-param min_bytes=1"));
  EXPECT_EQ(no_policy.exit_code, 2);
  EXPECT_THAT(no_policy.output, HasSubstr("there is no policy to set parameters of"));
}

TEST(Cli, GenChecksTypesAndRangesOfItsOptions)
{
  const std::string base = kMemsim + " gen cnn --machine " + quoted(kGood / "good.machine.yaml") + " --out /dev/null";
  const auto not_integer = run_command(base + " --depth four");
  EXPECT_EQ(not_integer.exit_code, 2);
  EXPECT_THAT(not_integer.output, HasSubstr("--depth: 'four' is not a valid integer"));
  const auto out_of_range = run_command(base + " --depth 0");
  EXPECT_EQ(out_of_range.exit_code, 2);
  EXPECT_THAT(out_of_range.output, HasSubstr("--depth: 0 is outside [1, inf]"));
  const auto bad_choice = run_command(base + " --dtype fp8");
  EXPECT_EQ(bad_choice.exit_code, 2);
  EXPECT_THAT(bad_choice.output, HasSubstr("'fp8' is not one of fp32, fp16, bf16"));
}

TEST(Cli, EveryCommandHasHelp)
{
  for (const char* command :
       {"", "simulate", "plan", "planners", "policies", "generators", "importers", "machines", "gen", "gen cnn",
        "gen transformer", "gen fuse", "run", "import", "import dtr", "import checkmate"}) {
    std::string line = kMemsim; // built with += : g++ 12's -Wrestrict misfires on a + chain here
    line += ' ';
    line += command;
    line += " --help";
    const auto result = run_command(line);
    EXPECT_EQ(result.exit_code, 0) << command;
    EXPECT_THAT(result.output, HasSubstr("Usage:")) << command;
  }
}

TEST(Cli, UnknownSubcommandIsBadInput)
{
  const auto result = run_command(kMemsim + " simulat");
  EXPECT_EQ(result.exit_code, 2) << result.output;
}

} // namespace
} // namespace memsim
