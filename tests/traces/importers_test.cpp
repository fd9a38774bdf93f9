// Importers of other tools' traces, on small hand-written fixtures whose answers are worked out in the comments.
#include "memsim/common/error.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/compressed_file.hpp"
#include "memsim/traces/importer_registry.hpp"
#include "memsim/traces/importers.hpp"
#include "memsim/traces/summary.hpp"
#include "memsim/traces/views.hpp"

#include "test_files.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace memsim {
namespace {

const std::filesystem::path kData = std::filesystem::path(MEMSIM_TEST_DATA_DIR) / "data";

// The registry's importers call the import functions with the parameters bound (defaults for those not given).
TEST(ImporterRegistry, BindsParametersAndChecksThem)
{
  const ImporterRegistry& registry = importer_registry();
  EXPECT_EQ(registry.names(), "checkmate, dtr, pytorch-eg");
  const ImporterInfo& checkmate = registry.get("checkmate");
  const ImportedTrace by_default =
      checkmate.make(kData / "small.checkmate.json", registry.complete_params(checkmate, nlohmann::json::object()));
  EXPECT_EQ(trace_to_json(by_default.trace),
            trace_to_json(import_checkmate_graph(kData / "small.checkmate.json", 1e-3)));
  const ImportedTrace doubled =
      checkmate.make(kData / "small.checkmate.json", registry.complete_params(checkmate, {{"seconds_per_cost", 2.0}}));
  EXPECT_DOUBLE_EQ(doubled.trace.total_time_s(), 14.0);
  EXPECT_THROW((void)checkmate.make(kData / "small.checkmate.json",
                                    registry.complete_params(checkmate, {{"seconds_per_cost", 0}})),
               InputError);
  EXPECT_THROW((void)registry.complete_params(checkmate, {{"seconds_per_cost", -1}}), InputError);
  const ImporterInfo& dtr = registry.get("dtr");
  const ImportedTrace log = dtr.make(kData / "small.dtr.log", registry.complete_params(dtr, nlohmann::json::object()));
  EXPECT_NE(log.report.find("compute 0.002901 s"), std::string::npos) << log.report;
}

std::string error_of(const std::function<void()>& action)
{
  try {
    action();
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(DtrImport, StoragesReleasePointsAndTimesFollowTheLog)
{
  DtrImportStats stats;
  const Trace trace = import_dtr_log(kData / "small.dtr.log", &stats);
  // Ops: mm, view (alias), relu_ (MUTATE), sum, sum_backward. The constant before START is skipped.
  ASSERT_EQ(trace.ops.size(), 5u);
  EXPECT_EQ(trace.ops[0].name, "mm");
  EXPECT_EQ(trace.ops[2].name, "relu_");
  EXPECT_EQ(trace.ops[3].phase, Phase::forward);
  EXPECT_EQ(trace.ops[4].phase, Phase::backward);
  EXPECT_TRUE(trace.ops[1].outputs.empty()); // an alias allocates nothing
  EXPECT_DOUBLE_EQ(trace.total_time_s(), 2.901e-3);
  EXPECT_DOUBLE_EQ(stats.total_compute_s, 2.901e-3);
  EXPECT_EQ(stats.calls, 4u);
  EXPECT_EQ(stats.mutates, 1u);
  EXPECT_EQ(stats.constant_bytes, 1100u);
  // Tensors: w, x (weights), a, av$ (relu_'s new version), l, g.
  ASSERT_EQ(trace.tensors.size(), 6u);
  EXPECT_EQ(trace.tensors[0].kind, TensorKind::weight);
  EXPECT_EQ(trace.tensors[1].bytes, 1000u);
  EXPECT_EQ(trace.tensors[3].name, "av$");
  EXPECT_EQ(trace.tensors[3].bytes, 4000u);
  EXPECT_EQ(trace.tensors[5].kind, TensorKind::gradient);
  // a loses its last handle (RELEASE a) after relu_ moved 'av' to the new storage.
  EXPECT_EQ(trace.tensors[2].free_after.value_or(-1), 2);
  EXPECT_EQ(trace.tensors[3].free_after.value_or(-1), 4);
  EXPECT_EQ(trace.tensors[4].free_after.value_or(-1), 4);
  EXPECT_EQ(trace.tensors[5].free_after.value_or(-1), 4); // still referenced at the end: lives to the last op
  EXPECT_FALSE(trace.tensors[0].free_after.has_value());
  // 1100 resident; mm 5100; relu_ 9100 (simrd counts the new version before the old one goes) then 5100;
  // sum 5104; sum_backward 9104.
  const MemoryProfile profile = default_memory_profile(trace);
  EXPECT_EQ(profile.resident_bytes, 1100u);
  EXPECT_EQ(profile.in_use_during, (std::vector<std::uint64_t>{5100, 5100, 9100, 5104, 9104}));
  EXPECT_EQ(profile.peak_bytes, 9104u);
  EXPECT_EQ(profile.peak_op, 4);
}

TEST(DtrImport, ReadsGzipCompressedLogs)
{
  test::ScratchDir dir;
  write_possibly_gzipped(dir / "small.log.gz", test::read_file(kData / "small.dtr.log"));
  EXPECT_NE(test::read_file(dir / "small.log.gz").substr(0, 2), std::string("{\""));
  const Trace trace = import_dtr_log(dir / "small.log.gz");
  EXPECT_EQ(default_memory_profile(trace).peak_bytes, 9104u);
}

TEST(DtrImport, BadLogsNameTheLine)
{
  test::ScratchDir dir;
  const std::string good = test::read_file(kData / "small.dtr.log");
  auto with = [&](const std::string& name, const std::string& text) {
    test::write_file(dir / name, text);
    return error_of([&] { import_dtr_log(dir / name); });
  };
  // Cut in the middle of line 9 (the first CALL's MEMORY line).
  std::size_t cut = 0;
  for (int line = 0; line < 9; ++line)
    cut = good.find('\n', cut) + 1;
  EXPECT_NE(with("cut.log", good.substr(0, cut + 20)).find("cut.log:10: invalid JSON (truncated log?)"),
            std::string::npos);
  // Ends right after a CALL: its MEMORY and ALIAS lines are missing.
  EXPECT_NE(with("short.log", good.substr(0, cut)).find("short.log:9: log ends before the MEMORY line of 'a'"),
            std::string::npos)
      << with("short.log", good.substr(0, cut));
  EXPECT_NE(with("unknown.log", "{\"INSTRUCTION\":\"FREE\",\"NAME\":\"x\"}\n")
                .find("unknown.log:1: unknown instruction 'FREE'"),
            std::string::npos);
  EXPECT_NE(with("negative.log", "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"w\"}\n{\"INSTRUCTION\":\"MEMORY\","
                                 "\"MEMORY\":\"-8\",\"NAME\":\"w\"}\n")
                .find("negative.log:2: negative size -8 for tensor 'w'"),
            std::string::npos);
  EXPECT_NE(with("undefined.log",
                 "{\"ARGS\":[\"nope\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[],\"TIME\":\"1\"}\n")
                .find("undefined.log:1: unknown tensor 'nope'"),
            std::string::npos);
}

TEST(CheckmateImport, TopologicalOrderSizesAndLayers)
{
  const Trace trace = import_checkmate_graph(kData / "small.checkmate.json", 1e-3);
  EXPECT_EQ(trace.name, "tiny_train");
  ASSERT_EQ(trace.ops.size(), 4u);
  std::vector<std::string> names;
  for (const Op& op : trace.ops)
    names.push_back(op.name);
  EXPECT_EQ(names, (std::vector<std::string>{"in", "conv", "loss", "conv_backward"}));
  EXPECT_EQ(trace.ops[3].phase, Phase::backward);
  EXPECT_EQ(trace.ops[3].inputs, (std::vector<TensorId>{0, 2}));
  EXPECT_EQ(trace.ops[3].layer, 1); // conv_backward joins conv's layer
  EXPECT_EQ(trace.ops[2].layer, 2);
  EXPECT_DOUBLE_EQ(trace.total_time_s(), 7e-3);
  // 100; 300; 304 while loss runs, then conv's output (last read by loss) goes: 104; 204.
  const MemoryProfile profile = default_memory_profile(trace);
  EXPECT_EQ(profile.in_use_during, (std::vector<std::uint64_t>{100, 300, 304, 204}));
  EXPECT_EQ(trace.tensors[3].free_after.value_or(-1), 3); // the sink stays to the end
  EXPECT_DOUBLE_EQ(import_checkmate_graph(kData / "small.checkmate.json", 2.0).total_time_s(), 14.0);
}

TEST(CheckmateImport, RefusesCyclesAndNegativeSizes)
{
  test::ScratchDir dir;
  std::string text = test::read_file(kData / "small.checkmate.json");
  std::string cyclic = text;
  cyclic.replace(cyclic.find("{\"source\": 0, \"target\": 3}"), 26, "{\"source\": 3, \"target\": 1}");
  test::write_file(dir / "cyclic.json", cyclic);
  const std::string cycle = error_of([&] { import_checkmate_graph(dir / "cyclic.json", 1e-3); });
  EXPECT_NE(cycle.find("cyclic.json: at /nodes/"), std::string::npos) << cycle;
  EXPECT_NE(cycle.find("the graph has a cycle"), std::string::npos) << cycle;
  std::string negative = text;
  negative.replace(negative.find("\"cost_ram\": 4}"), 14, "\"cost_ram\": -4}");
  test::write_file(dir / "negative.json", negative);
  EXPECT_NE(error_of([&] {
              import_checkmate_graph(dir / "negative.json", 1e-3);
            }).find("negative.json: at /nodes/2/cost_ram: negative size -4"),
            std::string::npos);
  std::string dangling = text;
  dangling.replace(dangling.find("\"target\": 1}"), 12, "\"target\": 9}");
  test::write_file(dir / "dangling.json", dangling);
  EXPECT_NE(error_of([&] {
              import_checkmate_graph(dir / "dangling.json", 1e-3);
            }).find("dangling.json: at /links/0/target: no node with id 9"),
            std::string::npos);
}

// A real ExecutionGraphObserver file (torch 1.13, CPU): Linear(8, 4) -> relu -> sum, backward, SGD step.
TEST(PytorchEgImport, TopLevelOpsPhasesAndStorages)
{
  const Trace trace = import_pytorch_execution_graph(kData / "linear.eg.json", std::nullopt);
  ASSERT_FALSE(trace.ops.empty());
  EXPECT_EQ(trace.ops[0].name, "aten::linear");
  EXPECT_EQ(trace.ops[0].phase, Phase::forward);
  auto count = [&](Phase phase) {
    return std::count_if(trace.ops.begin(), trace.ops.end(), [&](const Op& op) { return op.phase == phase; });
  };
  EXPECT_GT(count(Phase::backward), 0);
  EXPECT_GT(count(Phase::update), 0);
  // linear reads the batch (2x8 floats), the weight (4x8) and the bias (4): resident, 64 + 128 + 16 bytes.
  std::vector<std::uint64_t> read_bytes;
  for (TensorId id : trace.ops[0].inputs) {
    EXPECT_EQ(trace.tensor(id).kind, TensorKind::input);
    read_bytes.push_back(trace.tensor(id).bytes);
  }
  std::sort(read_bytes.begin(), read_bytes.end());
  EXPECT_EQ(read_bytes, (std::vector<std::uint64_t>{16, 64, 128}));
  ASSERT_EQ(trace.ops[0].outputs.size(), 1u);
  EXPECT_EQ(trace.tensor(trace.ops[0].outputs[0]).bytes, 2u * 4 * 4);
  EXPECT_DOUBLE_EQ(trace.total_time_s(), 0.0); // no profile: no times
}

TEST(PytorchEgImport, JoinsProfilerTimes)
{
  const Trace plain = import_pytorch_execution_graph(kData / "linear.eg.json", std::nullopt);
  const Trace timed = import_pytorch_execution_graph(kData / "linear.eg.json", kData / "linear.profile.json");
  ASSERT_EQ(plain.ops.size(), timed.ops.size());
  for (const Op& op : timed.ops)
    EXPECT_GT(op.time_s, 0.0) << op.name;
  EXPECT_EQ(default_memory_profile(plain).peak_bytes, default_memory_profile(timed).peak_bytes);
}

TEST(PytorchEgImport, RefusesOtherSchemas)
{
  test::ScratchDir dir;
  test::write_file(dir / "eg.json", R"({"schema": "2.0.0", "nodes": []})");
  EXPECT_NE(error_of([&] {
              import_pytorch_execution_graph(dir / "eg.json", std::nullopt);
            }).find("eg.json: at /schema: unsupported execution graph schema '2.0.0'"),
            std::string::npos);
}

} // namespace
} // namespace memsim
