// Multi-iteration dynamic traces (memsim gen var-lstm|treelstm|moe|var-bert|tree-cnn|
// unrolled-gan|recycle) run on both engines: keep-all is feasible
// and takes exactly the ops' summed time (one compute stream, nothing moves), at the default schedule's peak, each
// iteration exactly its own ops' time (make_plan stamps the steps' iterations from their ops); under the dtr policy
// with three quarters of the activation memory it fits by rematerializing, the same on both engines.
#include "dynamic_specs.hpp"
#include "engine_comparison.hpp"

#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/dynamic_generators.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace memsim {
namespace {

const Roofline kRoofline{14e12, 900e9, 5e-6, "test-gpu"};

Machine pcie_machine()
{
  Machine machine;
  machine.name = "one-gpu-pcie";
  machine.gpus.push_back(Gpu{"gpu0", "test-gpu", 1ull << 36, {{"fp32", 14e12}}, 900e9, 0});
  machine.host.memory = 1ull << 38;
  machine.links.push_back(Link{"pcie", "gpu0", "host", 12e9, 1e-6, Duplex::split});
  return machine;
}

std::vector<Trace> dynamic_traces()
{
  const VarLstmSpec lstm = test::small_var_lstm(3, 2, 6, 512); // activations dominate: DTR has something to evict
  TreeLstmSpec tree;
  tree.iterations = 3;
  tree.min_leaves = 3;
  tree.max_leaves = 8;
  tree.batch = 512;
  tree.hidden = 32;
  tree.vocab = 64;
  MoeSpec moe;
  moe.iterations = 3;
  moe.layers = 2;
  moe.experts = 4;
  moe.groups = 4;
  moe.group_tokens = 256;
  moe.hidden = 32;
  moe.ffn = 64;
  moe.classes = 4;
  VarBertSpec bert;
  bert.iterations = 3;
  bert.min_seq = 16;
  bert.max_seq = 64;
  bert.layers = 2;
  bert.hidden = 32;
  bert.heads = 4;
  bert.batch = 16;
  bert.vocab = 64;
  TreeCnnSpec tree_cnn;
  tree_cnn.iterations = 3;
  tree_cnn.min_leaves = 3;
  tree_cnn.max_leaves = 8;
  tree_cnn.batch = 256;
  tree_cnn.channels = 8;
  tree_cnn.width = 8;
  tree_cnn.vocab = 64;
  tree_cnn.classes = 4;
  UnrolledGanSpec gan;
  gan.iterations = 3;
  gan.min_unroll = 1;
  gan.max_unroll = 4;
  gan.layers = 1;
  gan.hidden = 16;
  gan.noise = 8;
  gan.batch = 512;
  RecycleSpec recycle;
  recycle.iterations = 3;
  recycle.min_crop = 8;
  recycle.max_crop = 24;
  recycle.crop_step = 8;
  recycle.blocks = 1;
  recycle.msa = 4;
  recycle.msa_hidden = 16;
  recycle.pair_hidden = 8;
  recycle.heads = 2;
  recycle.bins = 8;
  return {generate_var_lstm(lstm, kRoofline),     generate_tree_lstm(tree, kRoofline),
          generate_moe(moe, kRoofline),           generate_var_bert(bert, kRoofline),
          generate_tree_cnn(tree_cnn, kRoofline), generate_unrolled_gan(gan, kRoofline),
          generate_recycle(recycle, kRoofline)};
}

TEST(DynamicTraces, KeepAllAndDtrRunOnBothEngines)
{
  const Machine machine = pcie_machine();
  for (const Trace& trace : dynamic_traces()) {
    SCOPED_TRACE(trace.name);
    const TraceAnalysis analysis(trace);
    const std::uint64_t peak = analysis.default_profile().peak_bytes;
    const Plan keep_all = make_plan("keep-all", trace, machine, PlanRequest{2 * peak});
    SimOptions options{false};
    const test::EngineRuns runs = test::run_on_both_engines(trace, machine, keep_all, options);
    for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
      ASSERT_TRUE(run->metrics.feasible) << (run->error ? run->error->message : "");
      EXPECT_NEAR(run->metrics.iteration_time_s, trace.total_time_s(), 1e-9 * trace.total_time_s());
      EXPECT_EQ(run->metrics.peak_device_bytes, peak);
      std::vector<double> own_ops_time;
      for (const Op& op : trace.ops) {
        own_ops_time.resize(std::max(own_ops_time.size(), static_cast<std::size_t>(op.iteration) + 1), 0.0);
        own_ops_time[static_cast<std::size_t>(op.iteration)] += op.time_s;
      }
      ASSERT_EQ(own_ops_time.size(), 3u);
      ASSERT_EQ(run->metrics.iteration_times_s.size(), 3u);
      for (std::size_t k = 0; k < 3; ++k)
        EXPECT_NEAR(run->metrics.iteration_times_s[k], own_ops_time[k], 1e-9 * own_ops_time[k]) << "iteration " << k;
      EXPECT_NEAR(run->metrics.steady_iteration_time_s, (own_ops_time[1] + own_ops_time[2]) / 2,
                  1e-9 * trace.total_time_s());
    }

    // DTR with three quarters of the activation memory (weights, moments and inputs stay): it must fit by evicting and
    // rematerializing, and both engines must decide the same.
    const std::uint64_t resident = analysis.default_profile().resident_bytes;
    Plan tight = keep_all;
    tight.budget_bytes = resident + (peak - resident) * 3 / 4;
    options.policy = PolicyChoice{"dtr", {}};
    const RunResult dtr_fast = test::run_on_both_engines(trace, machine, tight, options).fast;
    EXPECT_TRUE(dtr_fast.metrics.feasible) << (dtr_fast.error ? dtr_fast.error->message : "");
    EXPECT_LE(dtr_fast.metrics.peak_device_bytes, tight.budget_bytes);
    EXPECT_GT(dtr_fast.metrics.recompute_time_s, 0.0);
    EXPECT_EQ(dtr_fast.metrics.iteration_times_s.size(), 3u) << "the policy's actions keep the iterations";
  }
}

} // namespace
} // namespace memsim
