// The experiment YAML loader: what it accepts, and located file:line:col messages for what it refuses.
#include "experiment_test_support.hpp"

#include "memsim/common/error.hpp"
#include "memsim/experiments/experiment.hpp"
#include "memsim/hwmodels/fuse.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim::experiments {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::data_dir;
using testing::ScratchDir;
using testing::write_file;

// The head every case shares; the machine and trace are referenced relative to the experiment's folder.
std::string head()
{
  return "format: memsim-experiment\n"                    // line 1
         "version: 1\n"                                   // line 2
         "name: t\n"                                      // line 3
         "machine: small.machine.yaml\n"                  // line 4
         "workloads:\n"                                   // line 5
         "  - {name: chain, trace: chain4.trace.json}\n"; // line 6
}

class LoaderTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    std::filesystem::copy_file(data_dir() / "small.machine.yaml", scratch_ / "small.machine.yaml");
    std::filesystem::copy_file(data_dir() / "chain4.trace.json", scratch_ / "chain4.trace.json");
  }
  std::filesystem::path write(const std::string& text)
  {
    std::filesystem::path path = scratch_ / "exp.yaml";
    write_file(path, text);
    return path;
  }
  Experiment load(const std::string& text) { return load_experiment(write(text), scratch_ / "no-presets"); }
  // The full message of the InputError the loader throws for `text`.
  std::string error_of(const std::string& text)
  {
    try {
      load(text);
    } catch (const InputError& error) {
      return error.what();
    }
    return "(no error)";
  }
  std::string file() const { return (scratch_ / "exp.yaml").string(); }

  ScratchDir scratch_;
};

TEST_F(LoaderTest, LoadsAFullExperiment)
{
  Experiment experiment = load(head() + "planners:\n"
                                        "  - keep-all\n"
                                        "  - {name: vdnn-all, label: vdnn}\n"
                                        "sweep:\n"
                                        "  budget: [8MiB, 20000000]\n"
                                        "  bandwidth: [12GB/s, 25GB/s]\n"
                                        "outputs: {plots: [peak_vs_budget]}\n"
                                        "parallelism: {jobs: 3}\n");
  EXPECT_EQ(experiment.name, "t");
  ASSERT_EQ(experiment.workloads.size(), 1u);
  EXPECT_EQ(experiment.workloads[0].name, "chain");
  EXPECT_EQ(experiment.workloads[0].trace_file, scratch_.path() / "chain4.trace.json");
  EXPECT_EQ(experiment.workloads[0].trace.ops.size(), 13u);
  EXPECT_EQ(experiment.machine.name, "test-gpu");
  EXPECT_EQ(experiment.machine_file, scratch_.path() / "small.machine.yaml");
  ASSERT_EQ(experiment.planners.size(), 2u);
  EXPECT_EQ(experiment.planners[0].label, "keep-all");
  EXPECT_EQ(experiment.planners[1].label, "vdnn");
  EXPECT_EQ(experiment.planners[1].name, "vdnn-all");
  ASSERT_EQ(experiment.budgets.size(), 2u);
  EXPECT_EQ(*experiment.budgets[0].bytes, 8u * 1024 * 1024);
  EXPECT_EQ(*experiment.budgets[1].bytes, 20000000u);
  EXPECT_EQ(experiment.bandwidths, (std::vector<double>{12e9, 25e9}));
  EXPECT_EQ(experiment.plots, (std::vector<std::string>{"peak_vs_budget"}));
  EXPECT_EQ(experiment.jobs, 3u);
}

TEST_F(LoaderTest, DefaultsAreTheGpuMemoryBothPlotsAndTheCoreCount)
{
  Experiment experiment = load(head() + "planners: [keep-all]\n");
  ASSERT_EQ(experiment.budgets.size(), 1u);
  EXPECT_EQ(*experiment.budgets[0].bytes, 1024u * 1024 * 1024); // small.machine.yaml: 1GiB
  EXPECT_TRUE(experiment.bandwidths.empty());
  EXPECT_EQ(experiment.plots, (std::vector<std::string>{"time_vs_budget", "peak_vs_budget"}));
  EXPECT_EQ(experiment.jobs, 0u);
}

TEST_F(LoaderTest, PresetMachineByName)
{
  std::filesystem::create_directories(scratch_ / "presets");
  std::filesystem::copy_file(data_dir() / "small.machine.yaml", scratch_ / "presets" / "tiny.yaml");
  std::string text = head();
  text.replace(text.find("small.machine.yaml"), std::string("small.machine.yaml").size(), "tiny");
  Experiment experiment = load_experiment(write(text + "planners: [keep-all]\n"), scratch_ / "presets");
  EXPECT_EQ(experiment.machine.name, "test-gpu");
  EXPECT_EQ(experiment.machine_file, scratch_.path() / "presets" / "tiny.yaml");
}

TEST_F(LoaderTest, UnknownTopLevelKey)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\nsweeps: {}\n"),
            file() + ":8:1: unknown key 'sweeps' (valid keys: format, version, name, description, workloads, "
                     "machine, planners, sweep, outputs, parallelism, engine, allocator, search)");
}

TEST_F(LoaderTest, EngineAndAllocatorDefaultToSimgridAndBytes)
{
  Experiment plain = load(head() + "planners: [keep-all]\n");
  EXPECT_EQ(plain.simulation.engine, EngineKind::simgrid);
  EXPECT_EQ(plain.simulation.allocator, AllocatorKind::bytes);
  Experiment chosen = load(head() + "planners: [keep-all]\nengine: fast\nallocator: pool\n");
  EXPECT_EQ(chosen.simulation.engine, EngineKind::fast);
  EXPECT_EQ(chosen.simulation.allocator, AllocatorKind::pool);
  const std::vector<Cell> cells = expand_cells(chosen);
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].engine, EngineKind::fast);
  EXPECT_EQ(cells[0].allocator, AllocatorKind::pool);
  const Cell back = cell_from_json(cell_to_json(cells[0]), "cell.json");
  EXPECT_EQ(back.engine, EngineKind::fast);
  EXPECT_EQ(back.allocator, AllocatorKind::pool);
  // The allocator changes what a cell computes, so it is part of the key; the defaults keep old keys.
  EXPECT_NE(cell_key(cells[0]), cell_key(expand_cells(plain)[0]));
  EXPECT_FALSE(cell_to_json(expand_cells(plain)[0]).contains("engine"));
}

TEST_F(LoaderTest, UnknownEngineOrAllocatorIsLocated)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\nengine: ns3\n"),
            file() + ":8:9: engine: 'ns3' is not an engine (valid: simgrid, fast)");
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\nallocator: slab\n"),
            file() + ":8:12: allocator: 'slab' is not an allocator (valid: bytes, pool)");
}

TEST_F(LoaderTest, WrongVersion)
{
  std::string text = head() + "planners: [keep-all]\n";
  text.replace(text.find("version: 1"), 10, "version: 2");
  EXPECT_EQ(error_of(text), file() + ":2:10: version: unsupported memsim-experiment version 2 (this build reads "
                                     "version 1)");
}

TEST_F(LoaderTest, BadBudgetUnit)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\nsweep:\n  budget: [8GiB, 12GB/s]\n"),
            file() + ":9:18: sweep.budget[1]: '12GB/s' is not a size: unknown unit 'GB/s' (accepted: B, KB, MB, "
                     "GB, TB, KiB, MiB, GiB, TiB; e.g. 16GiB)");
}

TEST_F(LoaderTest, ZeroFractionOfPeak)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\nsweep:\n  budget: {fraction_of_peak: [1.0, 0]}\n"),
            file() + ":9:36: sweep.budget.fraction_of_peak[1]: a fraction of the peak must be positive, found '0'");
}

TEST_F(LoaderTest, BudgetThatIsNeitherListNorFractions)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\nsweep:\n  budget: 8GiB\n"),
            file() + ":9:11: sweep.budget: expected a list of sizes (e.g. [8GiB, 12GiB]) or "
                     "{fraction_of_peak: [1.0, 0.5]}");
}

TEST_F(LoaderTest, DuplicateBudget)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\nsweep:\n  budget: [8MiB, 8MiB]\n"),
            file() + ":9:18: sweep.budget[1]: duplicate budget '8MiB'");
}

TEST_F(LoaderTest, BadBandwidth)
{
  EXPECT_THAT(error_of(head() + "planners: [keep-all]\nsweep:\n  bandwidth: [12GB/s, 12GiB]\n"),
              StartsWith(file() + ":9:23: sweep.bandwidth[1]: '12GiB' is not a bandwidth: unknown unit 'GiB'"));
}

TEST_F(LoaderTest, MissingTraceFile)
{
  std::string text = head();
  text.replace(text.find("chain4.trace.json"), std::string("chain4.trace.json").size(), "missing.trace.json");
  EXPECT_EQ(error_of(text + "planners: [keep-all]\n"),
            file() + ":6:26: workloads[0].trace: no such trace file 'missing.trace.json' (looked for " +
                (scratch_.path() / "missing.trace.json").string() + ")");
}

TEST_F(LoaderTest, WorkloadWithTraceAndGenerator)
{
  std::string text = head();
  text.replace(text.find("trace: chain4"), 0, "generate: {kind: cnn}, ");
  EXPECT_EQ(error_of(text + "planners: [keep-all]\n"),
            file() + ":6:5: workloads[0]: a workload needs exactly one of 'trace' (a file) or 'generate' (a "
                     "generator spec)");
}

TEST_F(LoaderTest, GeneratorSpecIsCheckedAgainstTheGeneratorsParameters)
{
  auto with_generator = [&](const std::string& spec) {
    std::string text = head();
    text.replace(text.find("trace: chain4.trace.json"), std::string("trace: chain4.trace.json").size(),
                 "generate: " + spec);
    return error_of(text + "planners: [keep-all]\n");
  };
  EXPECT_THAT(with_generator("{kind: rnn}"), HasSubstr(":6:36: workloads[0].generate.kind: unknown generator kind "
                                                       "'rnn' (valid: cnn, layer-chain, moe, preset, recycle, "
                                                       "transformer, "
                                                       "tree-cnn, treelstm, unrolled-gan, var-bert, var-lstm)"));
  EXPECT_THAT(with_generator("{kind: cnn, width: 2}"),
              HasSubstr(":6:41: workloads[0].generate: unknown key 'width' (valid keys: kind, depth, channel_scale, "
                        "image, batch, classes, dtype, residual)"));
  EXPECT_THAT(with_generator("{kind: cnn, depth: 0}"),
              HasSubstr(":6:48: workloads[0].generate.depth: parameter 'depth' of generator 'cnn': 0 is outside "
                        "[1, inf]"));
  EXPECT_THAT(with_generator("{kind: cnn, depth: two}"), HasSubstr(":6:48: workloads[0].generate.depth: "));
}

TEST_F(LoaderTest, DuplicateWorkloadName)
{
  EXPECT_EQ(error_of(head() + "  - {name: chain, trace: chain4.trace.json}\nplanners: [keep-all]\n"),
            file() + ":7:12: workloads[1].name: duplicate workload name 'chain'");
}

TEST_F(LoaderTest, UnknownWorkloadKey)
{
  EXPECT_EQ(error_of(head() + "  - {name: other, trace: chain4.trace.json, batch: 4}\nplanners: [keep-all]\n"),
            file() + ":7:45: workloads[1]: unknown key 'batch' (valid keys: name, trace, generate)");
}

TEST_F(LoaderTest, MissingMachineFile)
{
  std::string text = head();
  text.replace(text.find("small.machine.yaml"), std::string("small.machine.yaml").size(), "other.yaml");
  EXPECT_EQ(error_of(text + "planners: [keep-all]\n"),
            file() + ":4:10: machine: no such machine file 'other.yaml' (looked for " +
                (scratch_.path() / "other.yaml").string() + ")");
}

TEST_F(LoaderTest, UnknownMachinePreset)
{
  std::string text = head();
  text.replace(text.find("small.machine.yaml"), std::string("small.machine.yaml").size(), "no-such-gpu");
  EXPECT_THAT(error_of(text + "planners: [keep-all]\n"),
              StartsWith(file() + ":4:10: machine: no such machine file or preset (presets in "));
}

TEST_F(LoaderTest, UnknownPlanner)
{
  EXPECT_THAT(error_of(head() + "planners:\n  - keep-all\n  - no-such-planner\n"),
              StartsWith(file() + ":9:5: planners[1]: unknown planner 'no-such-planner' (valid: "));
  EXPECT_THAT(error_of(head() + "planners:\n  - keep-all\n  - no-such-planner\n"), HasSubstr("vdnn-all"));
}

TEST_F(LoaderTest, UnknownPlannerParameter)
{
  EXPECT_THAT(error_of(head() + "planners:\n  - {name: vdnn-all, params: {no_such: 1}}\n"),
              StartsWith(file() + ":8:40: planners[0].params.no_such: unknown parameter 'no_such' for planner "
                                  "'vdnn-all' (valid: "));
}

TEST_F(LoaderTest, DuplicatePlannerLabel)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all, vdnn-all, keep-all]\n"),
            file() + ":7:32: planners[2]: duplicate planner 'keep-all' (give one of them a different 'label')");
}

TEST_F(LoaderTest, NoPlanners)
{
  EXPECT_EQ(error_of(head() + "planners: []\n"), file() + ":7:11: planners: an experiment needs at least one planner");
}

TEST_F(LoaderTest, UnknownPlot)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\noutputs:\n  plots: [time_vs_bw]\n"),
            file() + ":9:11: outputs.plots[0]: unknown plot 'time_vs_bw' (valid: time_vs_budget, peak_vs_budget, "
                     "overhead_vs_budget, overhead_vs_bandwidth, throughput_vs_batch)");
}

// sweep.batch: every workload at every batch, named <name>-b<batch>. A recorded trace is rescaled (activations with
// the batch, weights not); a generator is run with its `batch` set, giving the trace it gives for that batch directly.
TEST_F(LoaderTest, BatchSweepExpandsEachWorkloadPerBatch)
{
  const std::string workloads = "  - {name: net, generate: {kind: cnn, depth: 2, batch: 8}}\n"
                                "planners: [keep-all]\n";
  const Experiment swept =
      load(head() + workloads + "sweep: {batch: [2, 3]}\noutputs: {plots: [throughput_vs_batch]}\n");
  ASSERT_EQ(swept.workloads.size(), 4u);
  EXPECT_EQ(swept.workloads[0].name, "chain-b2");
  EXPECT_EQ(swept.workloads[1].name, "chain-b3");
  EXPECT_EQ(swept.workloads[3].name, "net-b3");
  EXPECT_EQ(swept.workloads[3].base, "net");
  EXPECT_EQ(swept.workloads[3].batch, 3);
  const Experiment plain = load(head() + workloads);
  const Trace& recorded = plain.workloads[0].trace;
  const Trace& tripled = swept.workloads[1].trace;
  EXPECT_EQ(tripled.source.batch, 3);
  EXPECT_EQ(tripled.tensor(5).bytes, 3 * recorded.tensor(5).bytes); // activation a0: 4 MB at batch 1
  EXPECT_EQ(tripled.tensor(1).bytes, recorded.tensor(1).bytes);     // weight w0
  std::string direct = head() + workloads;
  direct.replace(direct.find("batch: 8"), 8, "batch: 2");
  EXPECT_EQ(trace_to_json(swept.workloads[2].trace), trace_to_json(load(direct).workloads[1].trace));
  EXPECT_EQ(swept.workloads[2].generator["batch"], 2);

  const std::vector<Cell> cells = expand_cells(swept);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[1].base_workload, "chain");
  EXPECT_EQ(cells[1].batch, 3);
  const Cell back = cell_from_json(cell_to_json(cells[1]), "cell.json");
  EXPECT_EQ(back.batch, 3);
  EXPECT_EQ(back.base_workload, "chain");
  // Cells of an experiment without the axis keep their keys (and cached results).
  EXPECT_FALSE(cell_to_json(expand_cells(plain)[0]).contains("batch"));
  EXPECT_THAT(csv_header(false, true), ::testing::EndsWith(",recomputed_bytes,base_workload,batch"));
  EXPECT_THAT(csv_row(cells[1], CellResult{}, false, true), ::testing::EndsWith(",chain,3"));
}

// sweep.models: every workload fused k times (fuse_trace, efficiency model), named <name>-k<k>; with a batch axis
// too, each batch's workload is fused. Every tensor is k times the single model's; the columns say how many models.
TEST_F(LoaderTest, ModelsSweepFusesEachWorkload)
{
  const std::string workloads = "planners: [keep-all]\n";
  const Experiment plain = load(head() + workloads);
  const Experiment swept = load(head() + workloads + "sweep: {models: [1, 3]}\n");
  ASSERT_EQ(swept.workloads.size(), 2u);
  EXPECT_EQ(swept.workloads[0].name, "chain-k1");
  EXPECT_EQ(swept.workloads[1].name, "chain-k3");
  EXPECT_EQ(swept.workloads[1].base, "chain");
  EXPECT_EQ(swept.workloads[1].models, 3);
  EXPECT_FALSE(swept.workloads[1].batch);
  const Trace& single = plain.workloads[0].trace;
  const Trace& three = swept.workloads[1].trace;
  ASSERT_EQ(three.tensors.size(), single.tensors.size());
  for (std::size_t i = 0; i < single.tensors.size(); ++i)
    EXPECT_EQ(three.tensors[i].bytes, 3 * single.tensors[i].bytes) << single.tensors[i].name;
  EXPECT_EQ(swept.workloads[1].default_peak_bytes, 3 * plain.workloads[0].default_peak_bytes);
  EXPECT_EQ(three.source.batch, single.source.batch) << "every model trains the trace's batch";

  const Experiment both = load(head() + workloads + "sweep: {batch: [2], models: [2]}\n");
  ASSERT_EQ(both.workloads.size(), 1u);
  EXPECT_EQ(both.workloads[0].name, "chain-b2-k2");
  EXPECT_EQ(both.workloads[0].base, "chain");
  EXPECT_EQ(both.workloads[0].batch, 2);
  EXPECT_EQ(both.workloads[0].models, 2);

  const std::vector<Cell> cells = expand_cells(swept);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[1].models, 3);
  const Cell back = cell_from_json(cell_to_json(cells[1]), "cell.json");
  EXPECT_EQ(back.models, 3);
  EXPECT_EQ(back.base_workload, "chain");
  EXPECT_FALSE(cell_to_json(expand_cells(plain)[0]).contains("models"));
  EXPECT_THAT(csv_header(false, false, true),
              ::testing::EndsWith(",recomputed_bytes,base_workload,models,partition,recompute_fraction,"
                                  "swap_overlap_fraction,excess_peak_ratio,gpu_hours_10k"));
  CellResult result;
  result.metrics.steady_iteration_time_s = 0.36; // 10,000 iterations: 3,600 s, one GPU hour
  result.metrics.recompute_fraction = 0.25;
  result.metrics.swap_overlap_fraction = 0.5;
  result.excess_peak_ratio = 1.5;
  result.partition = "3";
  EXPECT_THAT(csv_row(cells[1], result, false, false, true), ::testing::EndsWith(",chain,3,3,0.25,0.5,1.5,1"));
  EXPECT_EQ(error_of(head() + workloads + "sweep: {models: [0]}\n"),
            file() + ":8:18: sweep.models[0]: a number of models must be between 1 and 2147483647, found 0");
}

// sweep.fusion: measured takes each k-model trace from the recordings in sweep.fused_traces (relative to the
// experiment file: "<name>-b<batch>-k<k>-<tag>.trace.json"), not from fuse_trace; k = 1 stays the trace itself.
// The fusion keys without a models axis, measured without a directory, or a directory without measured are
// located errors.
TEST_F(LoaderTest, ModelsSweepCanReadTheMeasuredFusedTraces)
{
  const Trace single = load_trace(scratch_ / "chain4.trace.json"); // chain4, batch 1
  Trace recorded = fuse_trace(single, 2, FusionModel::efficiency, std::nullopt, "test");
  recorded.name = "chain4-b1-k2";
  recorded.source.models = 1; // as recordings made before the exporter wrote it
  for (Op& op : recorded.ops)
    op.time_s *= 3; // a recording that fusion made slower: the test sees which trace came back
  std::filesystem::create_directories(scratch_ / "fused");
  save_trace(recorded, scratch_ / "fused" / "chain4-b1-k2-rec.trace.json");
  const std::string workloads = "planners: [keep-all]\n";
  const Experiment measured =
      load(head() + workloads + "sweep: {models: [1, 2], fusion: measured, fused_traces: fused}\n");
  ASSERT_EQ(measured.workloads.size(), 2u);
  EXPECT_EQ(measured.workloads[0].trace.total_time_s(), single.total_time_s());
  EXPECT_EQ(measured.workloads[1].name, "chain-k2");
  EXPECT_DOUBLE_EQ(measured.workloads[1].trace.total_time_s(), recorded.total_time_s());
  EXPECT_EQ(measured.workloads[1].trace.source.models, 2);
  const Experiment efficiency = load(head() + workloads + "sweep: {models: [2], fusion: efficiency}\n");
  EXPECT_LT(efficiency.workloads[0].trace.total_time_s(), recorded.total_time_s());

  EXPECT_EQ(error_of(head() + workloads + "sweep: {models: [2], fusion: measured}\n"),
            file() +
                ":8:17: sweep.models: fusion: measured needs fused_traces: the directory of recorded fused traces");
  EXPECT_EQ(error_of(head() + workloads + "sweep: {models: [2], fused_traces: fused}\n"),
            file() + ":8:36: sweep.fused_traces: fused_traces is read only with fusion: measured");
  EXPECT_EQ(error_of(head() + workloads + "sweep: {fusion: measured}\n"),
            file() + ":8:17: sweep.fusion: 'fusion' says how a models axis fuses: it needs sweep.models");
  EXPECT_THAT(error_of(head() + workloads + "sweep: {models: [2], fusion: vmap}\n"),
              ::testing::HasSubstr("sweep.fusion: unknown fusion model 'vmap'"));
  EXPECT_THAT(error_of(head() + workloads + "sweep: {models: [3], fusion: measured, fused_traces: fused}\n"),
              ::testing::HasSubstr("no recorded fused trace of 3 models of 'chain4'"));
}

// sweep.fusion reaches the planners that fuse the single model themselves, unless the experiment gave them their own
// `fusion`; they cannot read measured recordings, a located error. keep-all has no such parameter.
TEST_F(LoaderTest, ModelsSweepFusionReachesThePlannersThatFuse)
{
  const std::string planners = "planners: [keep-all, hfta, {name: mu-two, label: own, params: {fusion: efficiency}}]\n";
  const Experiment proxy = load(head() + planners + "sweep: {models: [2], fusion: batch-proxy}\n");
  EXPECT_FALSE(proxy.planners[0].params.contains("fusion"));
  EXPECT_EQ(proxy.planners[1].params["fusion"], "batch-proxy");
  EXPECT_EQ(proxy.planners[2].params["fusion"], "efficiency");
  const Experiment plain = load(head() + planners + "sweep: {models: [2]}\n");
  EXPECT_EQ(plain.planners[1].params["fusion"], "efficiency");
  EXPECT_THAT(error_of(head() + "planners: [hfta]\n" + "sweep: {models: [2], fusion: measured, fused_traces: f}\n"),
              ::testing::HasSubstr("sweep.fusion: planner 'hfta' fuses the models itself and cannot read recorded "
                                   "fused traces"));
}

// A planner that fuses the models itself (hfta declares `models`) gets the single model with models = N; keep-all
// gets the N-model fused trace. With room for two models: at N = 2 both are the same fused array; at N = 5 keep-all
// does not fit and hfta trains 2+2+1, taking 2 T(2) + T(1), and every model's batch counts in samples_per_s.
TEST_F(LoaderTest, ModelsSweepGivesHftaTheSingleModel)
{
  const std::uint64_t single_peak = load(head() + "planners: [keep-all]\n").workloads[0].default_peak_bytes;
  const std::uint64_t budget = 2 * single_peak + single_peak / 2;
  Experiment experiment = load(head() + "planners: [keep-all, hfta]\nengine: fast\n" +
                               fmt::format("sweep: {{models: [1, 2, 5], budget: [{}]}}\n", budget));
  materialize_workloads(experiment, scratch_.path() / "out");
  const std::vector<Cell> cells = expand_cells(experiment);
  ASSERT_EQ(cells.size(), 6u); // k1, k2, k5 x keep-all, hfta
  EXPECT_TRUE(cells[4].single_model_hash.empty());
  EXPECT_EQ(cells[5].params["models"], 5);
  EXPECT_EQ(cells[5].single_model_file.filename(), "chain-k1.trace.json");
  const Cell back = cell_from_json(cell_to_json(cells[5]), "cell.json");
  EXPECT_EQ(back.single_model_hash, cells[5].single_model_hash);
  std::vector<CellResult> results;
  for (const Cell& cell : cells)
    results.push_back(run_cell(cell));
  for (std::size_t i : {0u, 1u, 2u, 3u, 5u})
    ASSERT_TRUE(results[i].feasible) << describe_cell(cells[i]) << ": " << results[i].reason;
  EXPECT_FALSE(results[4].feasible); // keep-all of 5 fused models
  EXPECT_EQ(results[3].partition, "2");
  EXPECT_EQ(results[5].partition, "2+2+1");
  const double t1 = results[0].metrics.iteration_time_s;
  const double t2 = results[2].metrics.iteration_time_s;
  EXPECT_NEAR(results[3].metrics.iteration_time_s, t2, 1e-12);
  EXPECT_NEAR(results[5].metrics.iteration_time_s, 2 * t2 + t1, 1e-12);
  EXPECT_EQ(results[3].metrics.peak_device_bytes, results[2].metrics.peak_device_bytes);
  EXPECT_EQ(results[5].metrics.peak_device_bytes, results[2].metrics.peak_device_bytes);
  ASSERT_TRUE(results[5].metrics.samples_per_s && results[0].metrics.samples_per_s);
  EXPECT_NEAR(*results[5].metrics.samples_per_s, 5 * *results[0].metrics.samples_per_s * t1 / (2 * t2 + t1), 1e-6);
}

// excess_peak_ratio (Fig. 9d) = the cell's configuration's keep-all peak / GPU memory. chain4's keep-all peak is
// 30 MB, during l2.bwd: weights 4 MB + input 4 MB + activations a0..a2 12 MB + gradients g3, g2 8 MB + weight
// gradients dw3, dw2 2 MB (a3 and the loss died with l3.bwd). The machine has 1 GiB. keep-all's configuration is the
// whole N-fused trace (N x 30 MB, also when it does not fit); hfta's is its largest fused subset (2+2+1: 2 x 30 MB).
TEST_F(LoaderTest, ExcessPeakRatioIsTheConfigurationsKeepAllPeakOverGpuMemory)
{
  const double single_peak = 30e6;
  const double gpu_memory = 1024.0 * 1024.0 * 1024.0;
  const auto budget = static_cast<std::uint64_t>(2.5 * single_peak);
  Experiment experiment = load(head() + "planners: [keep-all, hfta]\nengine: fast\n" +
                               fmt::format("sweep: {{models: [1, 5], budget: [{}]}}\n", budget));
  ASSERT_EQ(experiment.workloads[0].default_peak_bytes, 30'000'000u);
  materialize_workloads(experiment, scratch_.path() / "out");
  const std::vector<Cell> cells = expand_cells(experiment);
  ASSERT_EQ(cells.size(), 4u); // k1, k5 x keep-all, hfta
  std::vector<CellResult> results;
  for (const Cell& cell : cells)
    results.push_back(run_cell(cell));
  EXPECT_DOUBLE_EQ(results[0].excess_peak_ratio, single_peak / gpu_memory);
  EXPECT_DOUBLE_EQ(results[1].excess_peak_ratio, single_peak / gpu_memory);
  EXPECT_FALSE(results[2].feasible);
  EXPECT_DOUBLE_EQ(results[2].excess_peak_ratio, 5 * single_peak / gpu_memory);
  ASSERT_TRUE(results[3].feasible) << results[3].reason;
  EXPECT_EQ(results[3].partition, "2+2+1");
  EXPECT_DOUBLE_EQ(results[3].excess_peak_ratio, 2 * single_peak / gpu_memory);
}

TEST_F(LoaderTest, BatchSweepErrorsAreLocated)
{
  const std::string planners = "planners: [keep-all]\n";
  EXPECT_EQ(error_of(head() + planners + "sweep: {batch: [2, 0]}\n"),
            file() + ":8:20: sweep.batch[1]: a batch must be between 1 and 2147483647, found 0");
  EXPECT_EQ(error_of(head() + planners + "sweep: {batch: [2, 2]}\n"),
            file() + ":8:20: sweep.batch[1]: duplicate batch 2");
  EXPECT_EQ(error_of(head() + planners + "outputs: {plots: [throughput_vs_batch]}\n"),
            file() + ":8:19: outputs.plots[0]: plot 'throughput_vs_batch' needs a batch axis (sweep.batch: [32, "
                     "64, ...])");
  EXPECT_THAT(error_of(head() + planners + "sweep: {batch: [2]}\nsearch: {axis: batch}\n"),
              HasSubstr(":8:16: sweep.batch: a search experiment searches its own axis: it cannot also sweep the "
                        "batch"));
}

TEST_F(LoaderTest, BadJobs)
{
  EXPECT_EQ(error_of(head() + "planners: [keep-all]\nparallelism: {jobs: 0}\n"),
            file() + ":8:21: parallelism.jobs: jobs must be between 1 and 4096, found 0");
}

TEST_F(LoaderTest, YamlSyntaxError)
{
  EXPECT_THAT(error_of(head() + "planners: [keep-all\n"), StartsWith(file() + ":8:1: invalid YAML"));
}

TEST_F(LoaderTest, MissingName)
{
  std::string text = head();
  text.erase(text.find("name: t\n"), 8);
  EXPECT_EQ(error_of(text + "planners: [keep-all]\n"), file() + ":1:1: missing required key 'name'");
}

// Every experiment shipped in configs/experiments loads: names, planners and their params, machine presets and
// traces all resolve (a typo there is only found by a user otherwise).
TEST(ShippedExperiments, EveryConfigLoads)
{
  const std::filesystem::path source = MEMSIM_SOURCE_DIR;
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source / "configs" / "experiments")) {
    if (entry.path().extension() != ".yaml")
      continue;
    SCOPED_TRACE(entry.path().string());
    Experiment experiment;
    ASSERT_NO_THROW(experiment = load_experiment(entry.path(), source / "configs" / "machines"));
    EXPECT_FALSE(experiment.workloads.empty());
    EXPECT_FALSE(experiment.planners.empty());
    ++loaded;
  }
  EXPECT_GE(loaded, 5); // quickstart, pofo-fig2, pofo-fig3, validation-h100, validation-h100-recorded
}

} // namespace
} // namespace memsim::experiments
