// harmony-pp, harmony-dp, dp-swap, gpipe-swap, pipedream2bw-swap, zero-infinity and zero-offload: the plans they emit
// over a layer-chain trace of a uniform hand-made profile simulate feasible on both engines with the same times, move
// exactly the weight bytes spec §1.8 derives for the implemented schedules, never deadlock under the wrap-around
// binding, receive p2p boundaries at most two microbatches ahead, and are deterministic.
#include "engine_comparison.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/harmony/profile_from_traces.hpp"
#include "memsim/planners/harmony/search.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/traces/layer_chain.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace memsim {
namespace {

constexpr std::uint64_t kMB = 1000000;
constexpr int kMicrobatch = 2;
constexpr std::uint64_t kWeight = 4 * kMB; // per layer (the last layer: half, so |W_last| differs from the rest)
constexpr std::uint64_t kSample = 1 * kMB; // X(u,l) = u x 1 MB

// R identical layers profiled at u = 2: forward 10 ms, backward (recompute + backward) 30 ms, peaks a few MB above
// the resident tensors, CPU update 5 ms; W = 4 MB (2 MB for the last layer), optimizer state 8 MB.
LayerProfile uniform_profile(std::size_t layers)
{
  LayerProfile profile;
  profile.model = "uniform";
  profile.sampled_forward = {kMicrobatch};
  profile.sampled_backward = {kMicrobatch};
  ProfiledMicrobatch sample;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::uint64_t weight = l + 1 == layers ? kWeight / 2 : kWeight;
    profile.layers.push_back({"layer" + std::to_string(l), weight, 0, 2 * weight, 0.005, kSample});
    sample.forward_time_s.push_back(0.010);
    sample.backward_time_s.push_back(0.030);
    sample.forward_peak_bytes.push_back(static_cast<std::int64_t>(weight + 6 * kMB));
    sample.backward_peak_bytes.push_back(static_cast<std::int64_t>(3 * weight + 12 * kMB));
    sample.input_bytes.push_back(kMicrobatch * kSample);
  }
  profile.microbatches.emplace(kMicrobatch, sample);
  return profile;
}

std::uint64_t total_weight(const LayerProfile& profile, std::size_t from = 0)
{
  std::uint64_t total = 0;
  for (std::size_t l = from; l < profile.num_layers(); ++l)
    total += profile.layers[l].weight_bytes;
  return total;
}

// N GPUs of 1 GB under one switch (10 GB/s links), the switch to the host at 12 GB/s, 64 GiB of host memory.
Machine switched_machine(int gpus)
{
  Machine machine;
  machine.name = "harmony-test";
  machine.host.memory = 1ull << 36;
  machine.switches = {"sw0"};
  for (int g = 0; g < gpus; ++g) {
    const std::string name = "gpu" + std::to_string(g);
    machine.gpus.push_back(Gpu{name, "test-gpu", 1000 * kMB, {{"fp32", 10e12}}, 900e9, 0});
    machine.links.push_back(Link{name + "-sw0", name, "sw0", 10e9, 0, Duplex::split});
  }
  machine.links.push_back(Link{"sw0-host", "sw0", "host", 12e9, 0, Duplex::split});
  validate_machine(machine, machine.name);
  return machine;
}

Plan harmony_plan(const std::string& planner, const Trace& trace, const Machine& machine, nlohmann::json params)
{
  PlanRequest request;
  request.devices = static_cast<int>(machine.gpus.size());
  request.params = std::move(params);
  Plan plan = make_plan(planner, trace, machine, request);
  validate_plan(plan, trace, static_cast<int>(machine.gpus.size()), "harmony.plan.json");
  return plan;
}

using Runs = test::EngineRuns;

// Feasible on both engines, which agree (test::run_on_both_engines); the iteration times also to 1e-9 s absolute,
// tighter than the comparison's 1e-9 relative for iterations above 1 s.
Runs simulate_both(const Trace& trace, const Machine& machine, const Plan& plan)
{
  const Runs runs = test::run_on_both_engines(trace, machine, plan);
  for (const RunResult* result : {&runs.fast, &runs.simgrid})
    EXPECT_FALSE(result->error) << result->error->message;
  EXPECT_NEAR(runs.fast.metrics.iteration_time_s, runs.simgrid.metrics.iteration_time_s, 1e-9);
  return runs;
}

// Bytes of one step kind per device, tensors named `prefix`<layer>.
std::vector<std::uint64_t> bytes_per_device(const RunResult& run, StepKind kind, const std::string& prefix, int gpus)
{
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(gpus), 0);
  for (const StepRecord& record : run.timeline)
    if (record.kind == kind && record.device >= 0 && record.label.rfind(prefix, 0) == 0)
      bytes[static_cast<std::size_t>(record.device)] += record.bytes;
  return bytes;
}

std::uint64_t sum(const std::vector<std::uint64_t>& values)
{
  std::uint64_t total = 0;
  for (std::uint64_t value : values)
    total += value;
  return total;
}

// W and dW swapped in and out, per device.
std::vector<std::uint64_t> weight_traffic(const RunResult& run, int gpus)
{
  std::vector<std::uint64_t> moved(static_cast<std::size_t>(gpus), 0);
  for (StepKind kind : {StepKind::prefetch, StepKind::offload})
    for (const char* prefix : {"w.", "dw."}) {
      const std::vector<std::uint64_t> bytes = bytes_per_device(run, kind, prefix, gpus);
      for (std::size_t g = 0; g < moved.size(); ++g)
        moved[g] += bytes[g];
    }
  return moved;
}

void report(const std::string& what, const Plan& plan, const Runs& runs)
{
  std::cout << what << ": simulated " << runs.fast.metrics.iteration_time_s << " s, Harmony's estimate "
            << plan.estimate.iteration_time_s.value_or(0) << " s, h2d " << runs.fast.metrics.h2d_bytes << " B, d2h "
            << runs.fast.metrics.d2h_bytes << " B, p2p " << runs.fast.metrics.p2p_bytes << " B\n";
}

TEST(HarmonyLayerChain, TheTraceReadsBackAsItsProfile)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const LayerProfile back = harmony::layer_profile_from_traces({{"chain", trace}});
  ASSERT_EQ(back.num_layers(), 4u);
  for (std::size_t l = 0; l < 4; ++l) {
    EXPECT_DOUBLE_EQ(back.time_s(LayerPass::forward, kMicrobatch, l), 0.010);
    EXPECT_DOUBLE_EQ(back.time_s(LayerPass::backward, kMicrobatch, l), 0.030);
    EXPECT_EQ(back.peak_bytes(LayerPass::forward, kMicrobatch, l),
              profile.peak_bytes(LayerPass::forward, kMicrobatch, l));
    // The saved activations s.l make up the backward peak exactly.
    EXPECT_EQ(back.peak_bytes(LayerPass::backward, kMicrobatch, l),
              profile.peak_bytes(LayerPass::backward, kMicrobatch, l));
    EXPECT_EQ(back.input_bytes(kMicrobatch, l), kMicrobatch * kSample);
    EXPECT_EQ(back.layers[l].weight_bytes, profile.layers[l].weight_bytes);
    EXPECT_EQ(back.layers[l].optimizer_state_bytes, profile.layers[l].optimizer_state_bytes);
    EXPECT_DOUBLE_EQ(back.layers[l].cpu_update_s, 0.005);
  }
  EXPECT_THROW(layer_chain_trace(profile, 3), InputError); // not sampled, nothing to interpolate from
}

// pp, N = 2, R = 4, D = 8 (4 microbatches of 2): P_F = {0-1}, P_B = {0-1, 2-3}. Tasks FWD[0-1] on GPU 0, BWD[2-3]
// (loss) on GPU 1, BWD[0-1] on GPU 0.
TEST(HarmonyPlan, PipelineMovesThreeWeightsMinusTheLastPack)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const Plan plan =
      harmony_plan("harmony-pp", trace, machine, {{"minibatch", 8}, {"pack_fwd", "0-1"}, {"pack_bwd", "0-1,2-3"}});
  EXPECT_EQ(plan.params["configuration"]["pack_bwd"], "0-1,2-3");
  ASSERT_TRUE(plan.estimate.iteration_time_s);
  const Runs runs = simulate_both(trace, machine, plan);
  report("harmony-pp N=2 R=4 D=8", plan, runs);
  const std::uint64_t W = total_weight(profile);
  const std::uint64_t last = total_weight(profile, 2);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    const std::vector<std::uint64_t> in = bytes_per_device(*run, StepKind::prefetch, "w.", 2);
    EXPECT_EQ(sum(in), W - last + W);
    EXPECT_EQ(in[0], 2 * (W - last)); // FWD[0-1] and BWD[0-1]
    EXPECT_EQ(in[1], last);
    EXPECT_EQ(sum(bytes_per_device(*run, StepKind::offload, "dw.", 2)), W);
    // Checkpoints: X(D, 0) out and in again, as Harmony stashes it (data included), plus the data in; boundaries go
    // GPU to GPU: Y of FWD[0-1] and dX of the loss task, 4 microbatches each.
    EXPECT_EQ(sum(bytes_per_device(*run, StepKind::offload, "x.", 2)), 4 * kMicrobatch * kSample);
    EXPECT_EQ(sum(bytes_per_device(*run, StepKind::prefetch, "x.", 2)), 2 * 4 * kMicrobatch * kSample);
    EXPECT_EQ(run->metrics.p2p_bytes, 2 * 4 * kMicrobatch * kSample);
  }
}

// dp, N = 2, R = 4, D = 8 (2 microbatches of 2 per GPU): every GPU loads W for all forward and backward packs;
// rank 0 alone swaps dW out after the all-reduce.
TEST(HarmonyPlan, DataParallelMovesTwoWeightsMinusTheLastPackPerGpu)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const Plan plan =
      harmony_plan("harmony-dp", trace, machine, {{"minibatch", 8}, {"pack_fwd", "0-1"}, {"pack_bwd", "0-1,2-3"}});
  const Runs runs = simulate_both(trace, machine, plan);
  report("harmony-dp N=2 R=4 D=8", plan, runs);
  const std::uint64_t W = total_weight(profile);
  const std::uint64_t last = total_weight(profile, 2);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    const std::vector<std::uint64_t> in = bytes_per_device(*run, StepKind::prefetch, "w.", 2);
    EXPECT_EQ(in[0], 2 * W - last);
    EXPECT_EQ(in[1], 2 * W - last);
    const std::vector<std::uint64_t> out = bytes_per_device(*run, StepKind::offload, "dw.", 2);
    EXPECT_EQ(out[0], W);
    EXPECT_EQ(out[1], 0u);
  }
}

// The paper's count of Harmony DP (spec A2: every GPU swaps out once, 3N|W|): gradient_out=every_rank. Each GPU
// loads 2|W| - |W_last| as above and swaps |W| of dW out; the host keeps one copy, so its peak is unchanged, and the
// CPU updates wait for the later of the two offloads.
TEST(HarmonyPlan, DataParallelPaperVariantSwapsGradientsOutOfEveryGpu)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const nlohmann::json params{{"minibatch", 8}, {"pack_fwd", "0-1"}, {"pack_bwd", "0-1,2-3"}};
  nlohmann::json paper = params;
  paper["gradient_out"] = "every_rank";
  const Runs code_runs = simulate_both(trace, machine, harmony_plan("harmony-dp", trace, machine, params));
  const Runs runs = simulate_both(trace, machine, harmony_plan("harmony-dp", trace, machine, paper));
  report("harmony-dp gradient_out=every_rank N=2 R=4 D=8", harmony_plan("harmony-dp", trace, machine, paper), runs);
  const std::uint64_t W = total_weight(profile);
  const std::uint64_t last = total_weight(profile, 2);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    EXPECT_EQ(bytes_per_device(*run, StepKind::prefetch, "w.", 2),
              (std::vector<std::uint64_t>{2 * W - last, 2 * W - last}));
    EXPECT_EQ(bytes_per_device(*run, StepKind::offload, "dw.", 2), (std::vector<std::uint64_t>{W, W}));
    EXPECT_EQ(sum(weight_traffic(*run, 2)), 2 * (3 * W - last));
    EXPECT_EQ(run->metrics.peak_host_bytes, code_runs.fast.metrics.peak_host_bytes);
    // Each layer's CPU update waits for the dW offloads of both GPUs. No iteration-time comparison with the code
    // variant: one more offload can reorder the shared uplink either way (Fig. 10's vgg416 D = 16 runs faster with
    // every_rank, experiments/harmony/fig10/dp-variants.csv).
    for (std::size_t l = 0; l < 4; ++l) {
      const std::string layer = std::to_string(l);
      double last_offload = -1;
      for (const StepRecord& record : run->timeline)
        if (record.kind == StepKind::offload && record.label == "dw." + layer)
          last_offload = std::max(last_offload, record.end_s);
      ASSERT_GE(last_offload, 0) << l;
      for (const StepRecord& record : run->timeline)
        if (record.label == "upd." + layer) {
          EXPECT_GE(record.start_s, last_offload) << l;
        }
    }
  }
  // pp has one copy of each pack: the switch changes nothing there.
  nlohmann::json pp = paper;
  pp["pack_fwd"] = "0-1";
  EXPECT_EQ(plan_to_json(harmony_plan("harmony-pp", trace, machine, pp)).at("steps"),
            plan_to_json(harmony_plan("harmony-pp", trace, machine, params)).at("steps"));
}

// Wrap-around binding of one-layer packs over N = 1..8 GPUs: every plan runs to the end (no deadlock) on the fast
// engine, and the weights move as in the two-GPU case.
TEST(HarmonyPlan, WrapAroundNeverDeadlocks)
{
  const LayerProfile profile = uniform_profile(6);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  for (int gpus = 1; gpus <= 8; ++gpus) {
    const Machine machine = switched_machine(gpus);
    const Plan plan = harmony_plan("harmony-pp", trace, machine,
                                   {{"minibatch", 6}, {"pack_fwd", "0,1,2,3,4"}, {"pack_bwd", "0,1,2,3,4,5"}});
    SimOptions options;
    options.engine = EngineKind::fast;
    const RunResult run = simulate(trace, machine, plan, options);
    ASSERT_FALSE(run.error) << gpus << " GPUs: " << run.error->message;
    EXPECT_EQ(run.timeline.size(), plan.steps.size());
    const std::uint64_t W = total_weight(profile);
    EXPECT_EQ(sum(bytes_per_device(run, StepKind::prefetch, "w.", gpus)), 2 * W - total_weight(profile, 5)) << gpus;
  }
}

TEST(HarmonyPlan, SwitchesAndSearch)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const nlohmann::json base = {{"minibatch", 8}, {"pack_fwd", "0-1"}, {"pack_bwd", "0-1,2-3"}};
  nlohmann::json no_p2p = base;
  no_p2p["p2p"] = false;
  no_p2p["prefetch"] = false;
  no_p2p["jit_update"] = false;
  const Plan host_only = harmony_plan("harmony-pp", trace, machine, no_p2p);
  const Runs runs = simulate_both(trace, machine, host_only);
  EXPECT_EQ(runs.fast.metrics.p2p_bytes, 0u);
  // Y and dX of 4 microbatches go out and come back in through the host (x. adds the stash of X(D, 0)).
  EXPECT_EQ(sum(bytes_per_device(runs.fast, StepKind::offload, "x.", 2)), 2 * 4 * kMicrobatch * kSample);
  EXPECT_EQ(sum(bytes_per_device(runs.fast, StepKind::offload, "dx.", 2)), 4 * kMicrobatch * kSample);

  nlohmann::json searched = {{"minibatch", 8}, {"search", true}, {"memory_cap", 60e6}};
  const Plan found = harmony_plan("harmony-pp", trace, machine, searched);
  harmony::SearchSettings search_settings;
  search_settings.memory_cap = 60e6;
  const auto expected = harmony::search(profile, 2, 8, harmony::Mode::pp, search_settings);
  ASSERT_TRUE(expected);
  EXPECT_EQ(found.params["configuration"]["pack_fwd"], harmony::format_packs(expected->best.packs_forward));
  EXPECT_EQ(found.params["configuration"]["pack_bwd"], harmony::format_packs(expected->best.packs_backward));
  EXPECT_FALSE(simulate_both(trace, machine, found).fast.error);
  // The packing methods reach the search: other lists, the same Top-1 as harmony::search with them.
  searched["packing_fwd"] = "authors";
  searched["packing_bwd"] = "greedy,balanced_addx";
  const Plan found_other = harmony_plan("harmony-pp", trace, machine, searched);
  search_settings.methods = harmony::parse_packing_methods({"authors", "greedy,balanced_addx"});
  const auto expected_other = harmony::search(profile, 2, 8, harmony::Mode::pp, search_settings);
  ASSERT_TRUE(expected_other);
  EXPECT_EQ(found_other.params["configuration"]["chosen_by"],
            "search (" + expected_other->forward_method + " fwd, " + expected_other->backward_method + " bwd)");
  EXPECT_EQ(found_other.params["configuration"]["pack_bwd"],
            harmony::format_packs(expected_other->best.packs_backward));
  searched["packing_bwd"] = "reuse";
  EXPECT_THROW((void)harmony_plan("harmony-pp", trace, machine, searched), InputError);

  // Without grouping W comes in once per microbatch (4 of them); dW still goes out once.
  nlohmann::json ungrouped = base;
  ungrouped["group"] = false;
  const Runs reloaded = simulate_both(trace, machine, harmony_plan("harmony-pp", trace, machine, ungrouped));
  EXPECT_EQ(sum(bytes_per_device(reloaded.fast, StepKind::prefetch, "w.", 2)),
            4 * (2 * total_weight(profile) - total_weight(profile, 2)));
  EXPECT_EQ(sum(bytes_per_device(reloaded.fast, StepKind::offload, "dw.", 2)), total_weight(profile));
  // A GPU optimizer step: K comes in and W and K go out instead of dW; nothing runs on the host.
  nlohmann::json gpu_update = base;
  gpu_update["optimizer_offload"] = false;
  const Runs on_gpu = simulate_both(trace, machine, harmony_plan("harmony-pp", trace, machine, gpu_update));
  EXPECT_EQ(sum(bytes_per_device(on_gpu.fast, StepKind::offload, "dw.", 2)), 0u);
  EXPECT_EQ(sum(bytes_per_device(on_gpu.fast, StepKind::offload, "w.", 2)), total_weight(profile));
  EXPECT_EQ(sum(bytes_per_device(on_gpu.fast, StepKind::prefetch, "k.", 2)), 2 * total_weight(profile));
  EXPECT_EQ(sum(bytes_per_device(on_gpu.fast, StepKind::offload, "k.", 2)), 2 * total_weight(profile));
  for (const StepRecord& record : on_gpu.fast.timeline)
    EXPECT_GE(record.device, 0) << record.label;
  gpu_update["jit_update"] = false;
  EXPECT_THROW(harmony_plan("harmony-pp", trace, machine, gpu_update), InputError);
  nlohmann::json other_u = base;
  other_u["u_fwd"] = 4;
  EXPECT_THROW(harmony_plan("harmony-pp", trace, machine, other_u), InputError);
}

// estimator=harmony (the default) is Harmony's estimator with the authors' bandwidths; estimator=machine is the same
// estimator with bw_swap = the slowest GPU-host route (here the 6 GB/s uplink under the 10 GB/s GPU links) and
// bw_p2p = the slowest route of the GPU ring (10 GB/s, GPU to switch to GPU), bw_msg and time_del Harmony's. Only
// the estimate (and the search, which ranks by it) changes, not the steps.
TEST(HarmonyPlan, EstimatorWithTheAuthorsOrTheMachinesBandwidths)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  Machine machine = switched_machine(2);
  ASSERT_EQ(machine.links.back().name, "sw0-host");
  machine.links.back().bandwidth = 6e9;
  harmony::Configuration config;
  config.u_forward = kMicrobatch;
  config.u_backward = kMicrobatch;
  config.packs_forward = harmony::parse_packs("0-1", "pack_fwd");
  config.packs_backward = harmony::parse_packs("0-1,2-3", "pack_bwd");
  harmony::EstimatorSettings machines;
  machines.bw_swap = 6e9;
  machines.bw_p2p = 10e9;
  const nlohmann::json base = {{"minibatch", 8}, {"pack_fwd", "0-1"}, {"pack_bwd", "0-1,2-3"}};
  for (const char* planner : {"harmony-pp", "harmony-dp"}) {
    const harmony::Mode mode = std::string(planner) == "harmony-pp" ? harmony::Mode::pp : harmony::Mode::dp;
    nlohmann::json authors_params = base;
    authors_params["estimator"] = "harmony";
    nlohmann::json machine_params = base;
    machine_params["estimator"] = "machine";
    const Plan by_default = harmony_plan(planner, trace, machine, base);
    const Plan authors = harmony_plan(planner, trace, machine, authors_params);
    const Plan measured = harmony_plan(planner, trace, machine, machine_params);
    EXPECT_EQ(plan_to_json(by_default).dump(), plan_to_json(authors).dump()) << planner;
    ASSERT_TRUE(authors.estimate.iteration_time_s && measured.estimate.iteration_time_s);
    EXPECT_DOUBLE_EQ(*authors.estimate.iteration_time_s, harmony::estimate(profile, 2, 8, mode, config).iteration_s)
        << planner;
    EXPECT_DOUBLE_EQ(*measured.estimate.iteration_time_s,
                     harmony::estimate(profile, 2, 8, mode, config, machines).iteration_s)
        << planner;
    EXPECT_NE(*measured.estimate.iteration_time_s, *authors.estimate.iteration_time_s) << planner;
    EXPECT_EQ(by_default.params["estimator"], "harmony");
    EXPECT_DOUBLE_EQ(authors.params["estimator_settings"]["bw_swap"].get<double>(),
                     harmony::EstimatorSettings{}.bw_swap);
    EXPECT_EQ(measured.params["estimator"], "machine");
    EXPECT_DOUBLE_EQ(measured.params["estimator_settings"]["bw_swap"].get<double>(), 6e9);
    EXPECT_DOUBLE_EQ(measured.params["estimator_settings"]["bw_p2p"].get<double>(), 10e9);
    EXPECT_EQ(plan_to_json(measured).at("steps"), plan_to_json(authors).at("steps")) << planner;

    nlohmann::json searched = {{"minibatch", 8}, {"search", true}, {"memory_cap", 60e6}, {"estimator", "machine"}};
    harmony::SearchSettings settings;
    settings.memory_cap = 60e6;
    settings.estimator = machines;
    const auto expected = harmony::search(profile, 2, 8, mode, settings);
    ASSERT_TRUE(expected);
    EXPECT_DOUBLE_EQ(*harmony_plan(planner, trace, machine, searched).estimate.iteration_time_s,
                     expected->estimate.iteration_s)
        << planner;
  }
  nlohmann::json unknown = base;
  unknown["estimator"] = "simgrid";
  EXPECT_THROW(harmony_plan("harmony-pp", trace, machine, unknown), InputError);
}

// uniform_profile with a last layer without weights, optimizer state or update (Harmony's criterion layer).
LayerProfile criterion_profile(std::size_t layers)
{
  LayerProfile profile = uniform_profile(layers);
  ProfiledLayer& criterion = profile.layers.back();
  criterion.weight_bytes = 0;
  criterion.optimizer_state_bytes = 0;
  criterion.cpu_update_s = 0;
  ProfiledMicrobatch& sample = profile.microbatches.at(kMicrobatch);
  sample.forward_peak_bytes.back() = static_cast<std::int64_t>(6 * kMB);
  sample.backward_peak_bytes.back() = static_cast<std::int64_t>(12 * kMB);
  return profile;
}

// When the last backward pack (the loss task, which runs its own forward) has no weights, the exact volumes of spec
// §1.8 become the paper's forms: pp 3|W| (W in for the forward and the backward, dW out once), dp with
// gradient_out=every_rank 3N|W|, and the authors' code (rank 0 alone swaps dW out) (2N + 1)|W|. R = 5: P_F = {0-1,
// 2-3}, P_B = {0-1, 2-3, 4}, D = 8, N = 2 and 4.
TEST(HarmonyPlan, WeightlessLossPackGivesThePapersVolumes)
{
  const LayerProfile profile = criterion_profile(5);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const std::uint64_t W = total_weight(profile);
  ASSERT_EQ(total_weight(profile, 4), 0u);
  const nlohmann::json params = {{"minibatch", 8}, {"pack_fwd", "0-1,2-3"}, {"pack_bwd", "0-1,2-3,4"}};
  for (int n : {2, 4}) {
    const auto N = static_cast<std::uint64_t>(n);
    const Machine machine = switched_machine(n);
    const Runs pp = simulate_both(trace, machine, harmony_plan("harmony-pp", trace, machine, params));
    nlohmann::json paper = params;
    paper["gradient_out"] = "every_rank";
    const Runs dp_paper = simulate_both(trace, machine, harmony_plan("harmony-dp", trace, machine, paper));
    const Runs dp_code = simulate_both(trace, machine, harmony_plan("harmony-dp", trace, machine, params));
    for (const Runs* runs : {&pp, &dp_paper, &dp_code})
      for (const RunResult* run : {&runs->fast, &runs->simgrid}) {
        const std::uint64_t in = sum(bytes_per_device(*run, StepKind::prefetch, "w.", n));
        const std::uint64_t out = sum(bytes_per_device(*run, StepKind::offload, "dw.", n));
        const std::uint64_t moved = sum(weight_traffic(*run, n));
        if (runs == &pp) {
          EXPECT_EQ(in, 2 * W) << n;
          EXPECT_EQ(out, W) << n;
          EXPECT_EQ(moved, 3 * W) << n;
        } else {
          EXPECT_EQ(bytes_per_device(*run, StepKind::prefetch, "w.", n), std::vector<std::uint64_t>(N, 2 * W)) << n;
          EXPECT_EQ(moved, runs == &dp_paper ? 3 * N * W : (2 * N + 1) * W) << n;
        }
      }
  }
}

// Steps of one kind on `device` whose label starts with `prefix`.
std::vector<StepRecord> records(const RunResult& run, StepKind kind, const std::string& prefix, int device)
{
  std::vector<StepRecord> found;
  for (const StepRecord& record : run.timeline)
    if (record.kind == kind && record.device == device && record.label.rfind(prefix, 0) == 0)
      found.push_back(record);
  return found;
}

// The latest end, on the W load's GPU, of what the tasks before it there did: computes, and W and dW moved or freed
// (steps are emitted in Harmony's task order, so the earlier tasks' steps on that GPU have smaller ids).
double previous_tasks_end(const RunResult& run, const StepRecord& load)
{
  double end = 0;
  for (const StepRecord& record : run.timeline) {
    const bool computed = record.kind == StepKind::compute || record.kind == StepKind::recompute;
    const bool weights = record.label.rfind("w.", 0) == 0 || record.label.rfind("dw.", 0) == 0;
    if (record.device == load.device && record.step < load.step && (computed || weights))
      end = std::max(end, record.end_s);
  }
  return end;
}

// One-layer packs, R = 6, N = 2, D = 4 (two microbatches): rank 1 runs FWD[1], FWD[3], BWD[5] (the loss task) and
// BWD[3] in a row. prefetch=false (Harmony's estimator's rule): every task's W load starts after the previous task
// on its GPU has ended, its computes done and its W and dW freed (the dW offload of a backward included); with
// prefetch (the default) it waits only for the computes, so BWD[3]'s W comes in while BWD[5]'s dW goes out.
// jit_update=false: every CPU update starts after the last backward ends; with it (the default) the packs done
// first update during the rest of the backward.
TEST(HarmonyPlan, PrefetchAndJitUpdateSwitchesMoveTheSteps)
{
  const LayerProfile profile = uniform_profile(6);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const nlohmann::json base = {{"minibatch", 4}, {"pack_fwd", "0,1,2,3,4"}, {"pack_bwd", "0,1,2,3,4,5"}};
  for (bool prefetch : {false, true}) {
    nlohmann::json params = base;
    params["prefetch"] = prefetch;
    const Runs runs = simulate_both(trace, machine, harmony_plan("harmony-pp", trace, machine, params));
    for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
      std::size_t early = 0;
      std::size_t loads = 0;
      for (int device = 0; device < 2; ++device)
        for (const StepRecord& load : records(*run, StepKind::prefetch, "w.", device)) {
          const double previous = previous_tasks_end(*run, load);
          ++loads;
          if (load.start_s < previous - 1e-12)
            ++early;
          if (!prefetch) {
            EXPECT_GE(load.start_s, previous - 1e-12) << load.label << " on GPU " << device;
          }
        }
      EXPECT_EQ(loads, 11u); // 5 forward and 6 backward tasks, one layer of W each
      if (prefetch) {
        EXPECT_GT(early, 0u);
      }
    }
  }
  for (bool jit_update : {false, true}) {
    nlohmann::json params = base;
    params["jit_update"] = jit_update;
    const Runs runs = simulate_both(trace, machine, harmony_plan("harmony-pp", trace, machine, params));
    for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
      double backward_end = 0;
      for (int device = 0; device < 2; ++device)
        for (const StepRecord& record : records(*run, StepKind::compute, "bwd.", device))
          backward_end = std::max(backward_end, record.end_s);
      const std::vector<StepRecord> updates = records(*run, StepKind::compute, "upd.", kHostDevice);
      ASSERT_EQ(updates.size(), 6u);
      std::size_t during_backward = 0;
      for (const StepRecord& update : updates)
        if (update.start_s < backward_end)
          ++during_backward;
      EXPECT_EQ(during_backward > 0, jit_update);
    }
  }
}

// DP Swap, N = 2, D = 8: m = 2 microbatches per GPU. Per GPU W in twice per microbatch (forward, backward), dW in
// from the second microbatch and out after each, then W in, dW in and W out for the update: (4m + 2)|W| per GPU,
// with and without recompute (which only changes the activations' traffic).
TEST(DpSwapPlan, MovesFourMPlusTwoWeightsPerGpu)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const std::uint64_t W = total_weight(profile);
  const int m = 2;
  std::uint64_t saved_out[2] = {0, 0};
  for (bool recompute : {false, true}) {
    const Plan plan = harmony_plan("dp-swap", trace, machine, {{"minibatch", 8}, {"recompute", recompute}});
    const Runs runs = simulate_both(trace, machine, plan);
    report(recompute ? "dp-swap (R) N=2 R=4 D=8" : "dp-swap N=2 R=4 D=8", plan, runs);
    for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
      for (int gpu = 0; gpu < 2; ++gpu) {
        const auto g = static_cast<std::size_t>(gpu);
        const std::uint64_t moved = weight_traffic(*run, 2)[g];
        EXPECT_EQ(moved, (4 * m + 2) * W) << "recompute " << recompute << ", GPU " << gpu;
      }
    }
    saved_out[recompute ? 1 : 0] = sum(bytes_per_device(runs.fast, StepKind::offload, "s.", 2));
    EXPECT_EQ(runs.fast.metrics.recomputed_bytes > 0, recompute);
  }
  EXPECT_GT(saved_out[0], 0u);
  EXPECT_EQ(saved_out[1], 0u);
}

// GP Swap and 2BW Swap, N = 2, R = 4, D = 8, u = 2: m = 4 microbatches through both stages (uniform times: stages
// 0-1 and 2-3). Each GPU moves (4m + 2)|W_s| of its stage's W and dW, (5m + 2)|W_s| with recompute (the stage's
// forward is recomputed, W swapped in again); Y forward and dX backward cross the boundary once per microbatch each;
// recompute swaps out only the stage input (x.2 on GPU 1; GPU 0's input is the data, already on the host) and no
// saved tensor. Only the order differs: GPU 0 starts its first backward before its last forward in 1F1B. 2BW Swap
// runs one iteration here (iterations = 1, the plan before its steady state).
TEST(GpipeSwapPlan, MovesFourMPlusTwoStageWeightsPerGpu)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const std::uint64_t stage_weight[2] = {total_weight(profile) - total_weight(profile, 2), total_weight(profile, 2)};
  const std::uint64_t X = kMicrobatch * kSample;
  const std::uint64_t m = 4;
  for (const std::string planner : {"gpipe-swap", "pipedream2bw-swap"})
    for (bool recompute : {false, true}) {
      nlohmann::json params = {{"minibatch", 8}, {"recompute", recompute}};
      if (planner == "pipedream2bw-swap")
        params["iterations"] = 1;
      const Plan plan = harmony_plan(planner, trace, machine, params);
      EXPECT_EQ(plan.params["configuration"]["stages"], "0-1,2-3");
      const Runs runs = simulate_both(trace, machine, plan);
      report(planner + (recompute ? " (R) N=2 R=4 D=8" : " N=2 R=4 D=8"), plan, runs);
      double first_backward = 1e9;
      double last_forward = 0;
      for (const StepRecord& record : runs.fast.timeline)
        if (record.device == 0 && record.kind == StepKind::compute) {
          if (record.label.rfind("bwd.", 0) == 0)
            first_backward = std::min(first_backward, record.start_s);
          if (record.label.rfind("fwd.", 0) == 0)
            last_forward = std::max(last_forward, record.start_s);
        }
      EXPECT_EQ(first_backward < last_forward, planner == "pipedream2bw-swap") << planner;
      for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
        for (int gpu = 0; gpu < 2; ++gpu) {
          const auto g = static_cast<std::size_t>(gpu);
          const std::uint64_t moved = weight_traffic(*run, 2)[g];
          EXPECT_EQ(moved, ((recompute ? 5 : 4) * m + 2) * stage_weight[g])
              << "recompute " << recompute << ", GPU " << gpu;
        }
        EXPECT_EQ(bytes_per_device(*run, StepKind::send, "x.2", 2), (std::vector<std::uint64_t>{m * X, 0}));
        EXPECT_EQ(bytes_per_device(*run, StepKind::send, "dx.2", 2), (std::vector<std::uint64_t>{0, m * X}));
        EXPECT_EQ(run->metrics.p2p_bytes, 2 * m * X);
        EXPECT_EQ(sum(bytes_per_device(*run, StepKind::offload, "s.", 2)) == 0, recompute);
        EXPECT_EQ(bytes_per_device(*run, StepKind::offload, "x.", 2),
                  (recompute ? std::vector<std::uint64_t>{0, m * X}
                             : std::vector<std::uint64_t>{2 * m * X, 2 * m * X}));
      }
      EXPECT_EQ(runs.fast.metrics.recomputed_bytes > 0, recompute);
    }
}

// 2BW Swap's 1F1B order never deadlocks: N = 1..4 stages over 8 layers, 6 microbatches, both engines.
TEST(GpipeSwapPlan, OneForwardOneBackwardNeverDeadlocks)
{
  const Trace trace = layer_chain_trace(uniform_profile(8), kMicrobatch);
  for (int gpus = 1; gpus <= 4; ++gpus) {
    const Machine machine = switched_machine(gpus);
    const Plan plan = harmony_plan("pipedream2bw-swap", trace, machine, {{"minibatch", 12}});
    const Runs runs = simulate_both(trace, machine, plan);
    EXPECT_GT(runs.fast.metrics.iteration_time_s, 0) << gpus;
  }
}

// 2BW Swap's steady state, N = 2 (stages 0-1 and 2-3), D = 4, u = 2: m = 2 microbatches per iteration, global
// microbatch k = 2t + i. With transfers made instant (links of 1e15 B/s), each stage runs F = 20 ms and B = 40 ms
// per microbatch and U = 2 x 5 ms per update. Stage 1 runs F0 [20, 40] B0 [40, 80] F1 [80, 100] B1 [100, 140]
// U0 [140, 150]; stage 0 F0 F1 [0, 40], B0 [80, 120], its warm-up F2 [120, 140], B1 [140, 180], U0 [180, 190]: the
// first iteration ends at 190 ms, as one iteration with a flush does ((m + N - 1)(F + B) + U). Then stage 0 runs
// F3 [190, 210] B2 [210, 250] F4 [250, 270] B3 [270, 310] U1 [310, 320], each B_k as soon as stage 1's B_k ends,
// stage 1 never waiting: every later iteration takes m (F + B) + U = 130 ms, the estimate's steady iteration.
// Versions: stage 0's warm-up forward of microbatch 2t runs before its update of minibatch t - 1, so it and its
// backward use the version before that update; all else of minibatch t uses the newer one. Bytes per iteration are
// one iteration's, (4m + 2)|W_s| of W and dW per GPU: the second version is a second host copy of W (per weighted
// layer, kind weight, placed on the host from the start), swapped like W. On the contended machine the plans also
// simulate feasible with equal results on both engines.
TEST(PipeDream2bwSwap, SteadyIterationsOverlapTheFillAndAlternateTwoWeightVersions)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  Machine instant = switched_machine(2);
  for (Link& link : instant.links)
    link.bandwidth = 1e15;
  const std::uint64_t stage_weight[2] = {total_weight(profile) - total_weight(profile, 2), total_weight(profile, 2)};
  const std::uint64_t m = 2;
  const double steady = 2 * 0.060 + 0.010;
  const double single = 3 * 0.060 + 0.010;
  const Plan one = harmony_plan("pipedream2bw-swap", trace, instant, {{"minibatch", 4}, {"iterations", 1}});
  EXPECT_TRUE(one.extra_tensors.empty());
  EXPECT_NEAR(simulate_both(trace, instant, one).fast.metrics.iteration_time_s, single, 1e-6);
  for (int iterations : {2, 3}) {
    const nlohmann::json params = {{"minibatch", 4}, {"iterations", iterations}};
    const Plan plan = harmony_plan("pipedream2bw-swap", trace, instant, params);
    EXPECT_EQ(plan.params["configuration"]["iterations"], iterations);
    EXPECT_NEAR(plan.estimate.iteration_time_s.value_or(-1), steady, 1e-12);
    const Runs runs = simulate_both(trace, instant, plan);
    const Runs contended = simulate_both(trace, switched_machine(2), plan);
    report(fmt::format("pipedream2bw-swap N=2 R=4 D=4, {} iterations", iterations), plan, contended);
    for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
      const std::vector<double>& times = run->metrics.iteration_times_s;
      ASSERT_EQ(times.size(), static_cast<std::size_t>(iterations));
      EXPECT_NEAR(times[0], single, 1e-6);
      for (std::size_t t = 1; t < times.size(); ++t)
        EXPECT_NEAR(times[t], steady, 1e-6) << "iteration " << t;
      EXPECT_NEAR(run->metrics.steady_iteration_time_s, steady, 1e-6);
    }
    for (const RunResult* run : {&runs.fast, &contended.fast, &contended.simgrid})
      for (int gpu = 0; gpu < 2; ++gpu)
        EXPECT_EQ(weight_traffic(*run, 2)[static_cast<std::size_t>(gpu)],
                  static_cast<std::uint64_t>(iterations) * (4 * m + 2) * stage_weight[gpu])
            << "GPU " << gpu;
    std::uint64_t second_version = 0;
    for (const Tensor& tensor : plan.extra_tensors) {
      EXPECT_EQ(tensor.kind, TensorKind::weight) << tensor.name;
      second_version += tensor.bytes;
    }
    EXPECT_EQ(second_version, total_weight(profile));
    // The version each compute used: `.v1` ops read the second.
    const Trace with_extras = trace_with_extras(trace, plan);
    for (const Step& step : plan.steps) {
      if (step.kind != StepKind::compute)
        continue;
      const std::string& name = with_extras.op(*step.op).name;
      if (name.rfind("upd.", 0) == 0) {
        // The update of minibatch t reads version t mod 2 and writes the other.
        EXPECT_NE(name.find(step.iteration % 2 == 0 ? ".to_v1" : ".v1.to_v0"), std::string::npos) << name;
        continue;
      }
      const int minibatch = step.instance / static_cast<int>(m);
      EXPECT_EQ(step.iteration, minibatch) << name;
      const bool warm_up = step.device == 0 && step.instance % static_cast<int>(m) == 0 && minibatch > 0;
      const int version = (warm_up ? minibatch - 1 : minibatch) % 2;
      EXPECT_EQ(name.size() > 3 && name.compare(name.size() - 3, 3, ".v1") == 0, version == 1)
          << name << " instance " << step.instance << " on GPU " << step.device;
    }
  }
}

// 2BW's steady state needs a microbatch per stage (m >= N): two weight versions then suffice.
TEST(PipeDream2bwSwap, SteadyStateNeedsAMicrobatchPerStage)
{
  const Trace trace = layer_chain_trace(uniform_profile(4), kMicrobatch);
  const Machine machine = switched_machine(4);
  EXPECT_THROW(harmony_plan("pipedream2bw-swap", trace, machine, {{"minibatch", 6}}), InputError);
  EXPECT_NO_THROW(harmony_plan("pipedream2bw-swap", trace, machine, {{"minibatch", 6}, {"iterations", 1}}));
  EXPECT_NO_THROW(harmony_plan("pipedream2bw-swap", trace, machine, {{"minibatch", 8}}));
}

// GP Swap (R), R = 8 (stages 0-3, 4-7), on 70 MB GPUs: a layer's input and saved tensors take 10-12 MB, so half
// the memory keeps the recomputed activations of the last three layers of each stage and the first layer's saved
// tensor goes out and back in once per microbatch; the weights still move (5m + 2)|W_s| per GPU.
TEST(GpipeSwapPlan, RecomputeSwapsWhatDoesNotFit)
{
  const LayerProfile profile = uniform_profile(8);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const auto bytes = [&](const std::string& name) {
    for (const Tensor& tensor : trace.tensors)
      if (tensor.name == name)
        return tensor.bytes;
    ADD_FAILURE() << name;
    return std::uint64_t{0};
  };
  Machine machine = switched_machine(2);
  for (Gpu& gpu : machine.gpus)
    gpu.memory = 70 * kMB;
  const std::uint64_t m = 4;
  const Plan plan = harmony_plan("gpipe-swap", trace, machine, {{"minibatch", 8}, {"recompute", true}});
  EXPECT_EQ(plan.params["configuration"]["stages"], "0-3,4-7");
  const Runs runs = simulate_both(trace, machine, plan);
  report("gpipe-swap (R) N=2 R=8 D=8, 70 MB GPUs", plan, runs);
  const std::vector<std::uint64_t> saved{m * bytes("s.0"), m * bytes("s.4")};
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    EXPECT_EQ(bytes_per_device(*run, StepKind::offload, "s.", 2), saved);
    EXPECT_EQ(bytes_per_device(*run, StepKind::prefetch, "s.", 2), saved);
    const std::uint64_t stage_weight = total_weight(profile) - total_weight(profile, 4);
    EXPECT_EQ(weight_traffic(*run, 2),
              (std::vector<std::uint64_t>{(5 * m + 2) * stage_weight, (5 * m + 2) * total_weight(profile, 4)}));
  }
}

// The swap baselines drop the host copy of every activation they swapped out, once, after the microbatch's backward
// on that GPU (LMS frees a swapped tensor with its last use), so host memory holds one microbatch's activations per
// GPU, not the minibatch's: on dp-swap, N = 2, u = 2, going from m = 2 to m = 4 microbatches per GPU adds only the
// data of the 2 x 2 extra microbatches (the inputs start on the host, one copy per instance, and stay).
TEST(SwapBaselines, DropEveryActivationHostCopyOnce)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  for (const std::string planner : {"dp-swap", "gpipe-swap", "pipedream2bw-swap"})
    for (bool recompute : {false, true}) {
      const Plan plan = harmony_plan(planner, trace, machine, {{"minibatch", 8}, {"recompute", recompute}});
      const Trace with_extras = trace_with_extras(trace, plan); // 2BW's second weight version
      std::map<std::pair<int, TensorId>, int> offloaded, dropped;
      for (const Step& step : plan.steps) {
        if (!step.tensor)
          continue;
        const TensorKind kind = with_extras.tensor(*step.tensor).kind;
        if (kind == TensorKind::weight || kind == TensorKind::weight_grad || kind == TensorKind::optimizer_state)
          continue;
        if (step.kind == StepKind::offload)
          offloaded[{step.instance, *step.tensor}] = 1;
        if (step.kind == StepKind::free && step.device == kHostDevice)
          ++dropped[{step.instance, *step.tensor}];
      }
      EXPECT_FALSE(offloaded.empty()) << planner;
      EXPECT_EQ(dropped, offloaded) << planner << " recompute " << recompute;
      simulate_both(trace, machine, plan);
    }
  const std::uint64_t data = kMicrobatch * kSample;
  std::uint64_t peak_host[2] = {0, 0};
  for (int m : {2, 4}) {
    const Plan plan = harmony_plan("dp-swap", trace, machine, {{"minibatch", 2 * kMicrobatch * m}});
    peak_host[m / 4] = simulate_both(trace, machine, plan).fast.metrics.peak_host_bytes;
  }
  EXPECT_EQ(peak_host[1] - peak_host[0], 2 * 2 * data);
}

// The swap baselines' estimates (swap_estimate.hpp: Harmony's estimator bandwidths, per layer max(compute,
// swap-in, swap-out), passes composed by the schedule), worked out by hand. bw_swap = 11.5 GiB/s shared by N GPUs,
// bw_p2p = 8.2 GiB/s.
constexpr double kGiB = 1024.0 * 1024 * 1024;

// The uniform chain is compute-bound (its largest per-layer transfer, 20 MB in, takes 3.2 ms at 5.75 GiB/s; a
// backward takes 20 ms), so the estimate is the schedule's composition of the op times: forward 10 ms, backward
// 20 ms, update 5 ms per layer. N = 2, D = 8, u = 2.
TEST(SwapBaselines, EstimatesComposeTheScheduleWhenComputeBound)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const auto estimate = [&](const std::string& planner, nlohmann::json params = nlohmann::json::object()) {
    params["minibatch"] = 8;
    const Plan plan = harmony_plan(planner, trace, machine, params);
    EXPECT_TRUE(plan.params.contains("estimate_model")) << planner;
    return plan.estimate.iteration_time_s.value_or(-1);
  };
  // dp-swap: m = 2 per GPU: 2 x (40 + 80) ms, 4 updates of 5 ms, and each layer's all-reduce 2 (N-1)/N |dW| over
  // p2p: 3 x 4 MB + 2 MB.
  EXPECT_NEAR(estimate("dp-swap"), 2 * (0.040 + 0.080) + 4 * 0.005 + 14e6 / (8.2 * kGiB), 1e-12);
  // Stages 0-1 and 2-3, m = 4. Stage 1's forward receives x.2 (2 MB) and stage 0's backward dx.2 over p2p (r).
  // GPipe: forwards (20) + (20 + r) + 3 (20 + r), backwards (40 + r) + 40 + 3 (40 + r), updates 2 x 5 ms.
  const double r = 2e6 / (8.2 * kGiB);
  EXPECT_NEAR(estimate("gpipe-swap"), (0.040 + r + 3 * (0.020 + r)) + (0.080 + r + 3 * (0.040 + r)) + 0.010, 1e-12);
  // 1F1B, one iteration: both stages take 60 ms + r per microbatch: 2 (0.060 + r) + 3 (0.060 + r) + updates.
  EXPECT_NEAR(estimate("pipedream2bw-swap", {{"iterations", 1}}), 5 * (0.060 + r) + 0.010, 1e-12);
  // 2BW's steady iteration (the default, 4 iterations): each stage's 4 forwards, 4 backwards and update, the
  // receives overlapped: 4 x 60 ms + 10 ms.
  EXPECT_NEAR(estimate("pipedream2bw-swap"), 4 * 0.060 + 0.010, 1e-12);
}

constexpr std::uint64_t kHeavy = 100 * kMB;

// Two layers of 100 MB weights (optimizer state 200 MB) and 100 MB inputs at u = 1: forward 10 ms, backward 20 ms,
// update 5 ms; the saved activations come to 300 MB (layer 0) and 400 MB - 4 B (layer 1, beside the 4-byte loss).
LayerProfile heavy_profile()
{
  LayerProfile profile;
  profile.model = "heavy";
  profile.sampled_forward = {1};
  profile.sampled_backward = {1};
  ProfiledMicrobatch sample;
  for (int l = 0; l < 2; ++l) {
    profile.layers.push_back({"layer" + std::to_string(l), kHeavy, 0, 2 * kHeavy, 0.005, kHeavy});
    sample.forward_time_s.push_back(0.010);
    sample.backward_time_s.push_back(0.030);
    sample.forward_peak_bytes.push_back(static_cast<std::int64_t>(4 * kHeavy));
    sample.backward_peak_bytes.push_back(static_cast<std::int64_t>(8 * kHeavy));
    sample.input_bytes.push_back(kHeavy);
  }
  profile.microbatches.emplace(1, sample);
  return profile;
}

// One GPU, one microbatch: the transfers bound most layers. Per layer, what LayerSwapEmitter moves (dp-swap, no
// recompute): forward l: in W.l (+ the data x.0), out s.l (+ x.l for l > 0, + the loss after the last layer);
// backward l: in W.l, x.l, its output, s.l, out dW.l; update l: in dW.l, W.l, K.l, out W.l, K.l.
TEST(SwapBaselines, EstimateTakesTheSlowerOfComputeAndEachDirection)
{
  const Trace trace = layer_chain_trace(heavy_profile(), 1);
  const LayerChainIds chain = layer_chain_ids(trace, "heavy");
  const auto bytes = [&](std::optional<TensorId> tensor) { return static_cast<double>(trace.tensor(*tensor).bytes); };
  const double s0 = bytes(chain.saved[0]);
  const double s1 = bytes(chain.saved[1]);
  const double loss = bytes(chain.loss);
  const double H = static_cast<double>(kHeavy);
  const double share = 11.5 * kGiB;
  const auto slowest = [&](double compute, double in, double out) {
    return std::max({compute, in / share, out / share});
  };
  const double forward = slowest(0.010, 2 * H, s0) + slowest(0.010, H, s1 + H + loss);
  const double backward = slowest(0.020, 3 * H + s0, H) + slowest(0.020, 2 * H + loss + s1, H);
  const double update = 2 * slowest(0.005, 4 * H, 3 * H);
  ASSERT_GT(2 * H / share, 0.010); // the data and W.0 outlast layer 0's forward
  const Plan plan = harmony_plan("dp-swap", trace, switched_machine(1), {{"minibatch", 1}});
  EXPECT_NEAR(plan.estimate.iteration_time_s.value_or(-1), forward + backward + update, 1e-12);
}

// Two stages of one heavy layer, m = 8: the host link, carrying both stages' swaps, bounds the pipelines (their
// compositions at the full link come to about 0.24 + 0.59 + 0.03 s for GPipe's phases and 0.99 s for 1F1B).
// Per microbatch, swapped in: forwards W.0 + x.0 and W.1 (x.1 comes by p2p); backwards W.1, x.1, the loss, s.1,
// dW.1 and W.0, x.0, x.1, s.0, dW.0 (no dW in the first microbatch). Swapped out: forwards s.0 + x.1 and s.1 +
// x.1 + the loss; backwards dW.1 and dW.0. The updates: dW, W, K in and W, K out of both layers. 1F1B (one
// iteration, or 2BW's steady iteration: the same bytes per iteration) overlaps
// everything: the link's busier direction over the iteration (in). GPipe's flush separates its phases: the
// forwards' out, then the backwards' in, then the updates' in.
TEST(SwapBaselines, PipelineEstimatesAreBoundedByTheHostLink)
{
  const Trace trace = layer_chain_trace(heavy_profile(), 1);
  const LayerChainIds chain = layer_chain_ids(trace, "heavy");
  const auto bytes = [&](std::optional<TensorId> tensor) { return static_cast<double>(trace.tensor(*tensor).bytes); };
  const double H = static_cast<double>(kHeavy);
  const double s0 = bytes(chain.saved[0]);
  const double s1 = bytes(chain.saved[1]);
  const double loss = bytes(chain.loss);
  const double forwards_in = 8 * 3 * H;
  const double forwards_out = 8 * ((s0 + H) + (s1 + H + loss));
  const double backwards_in = 8 * ((3 * H + loss + s1) + (4 * H + s0)) - 2 * H;
  const double updates_in = 2 * 4 * H;
  ASSERT_GT(forwards_out, forwards_in);
  const double link = 11.5 * kGiB;
  const auto estimate = [&](const std::string& planner, nlohmann::json params = nlohmann::json::object()) {
    params["minibatch"] = 8;
    return harmony_plan(planner, trace, switched_machine(2), params).estimate.iteration_time_s.value_or(-1);
  };
  EXPECT_NEAR(estimate("pipedream2bw-swap"), (forwards_in + backwards_in + updates_in) / link, 1e-12);
  EXPECT_NEAR(estimate("pipedream2bw-swap", {{"iterations", 1}}), (forwards_in + backwards_in + updates_in) / link,
              1e-12);
  EXPECT_NEAR(estimate("gpipe-swap"), (forwards_out + backwards_in + updates_in) / link, 1e-12);
}

TEST(HarmonyPlan, Deterministic)
{
  const Trace trace = layer_chain_trace(uniform_profile(4), kMicrobatch);
  const Machine machine = switched_machine(2);
  const nlohmann::json params = {{"minibatch", 8}, {"pack_fwd", "0-1"}, {"pack_bwd", "0-1,2-3"}};
  for (const char* planner : {"harmony-pp", "harmony-dp"})
    EXPECT_EQ(plan_to_json(harmony_plan(planner, trace, machine, params)).dump(),
              plan_to_json(harmony_plan(planner, trace, machine, params)).dump());
  const nlohmann::json swap = {{"minibatch", 8}, {"recompute", true}};
  for (const char* planner : {"dp-swap", "gpipe-swap", "pipedream2bw-swap"})
    EXPECT_EQ(plan_to_json(harmony_plan(planner, trace, machine, swap)).dump(),
              plan_to_json(harmony_plan(planner, trace, machine, swap)).dump());
}

// Bytes of all steps of `kind` whose tensor is named `prefix`..., per device.
std::uint64_t total_bytes(const RunResult& run, StepKind kind, const std::string& prefix)
{
  std::uint64_t bytes = 0;
  for (const StepRecord& record : run.timeline)
    if (record.kind == kind && record.label.rfind(prefix, 0) == 0)
      bytes += record.bytes;
  return bytes;
}

// ZeRO-Infinity, R = 4 (|W| = 14 MB), u = 2, m = 2 micro-steps on N = 2 and N = 4 GPUs (D = 2 N m): per micro-step
// every layer's W is gathered twice (forward, and the recompute before the backward), each GPU bringing its 1/N
// shard from the host, and every dW is reduce-scattered with only the own shard going out. Per GPU: 2m|W|/N of W
// in, m|W|/N of dW out, so 3m|W| host<->GPU in all, whatever N. On the GPU links: each gather's ring sends N - 1
// shards per GPU ((N - 1)|W_l| in all) and each reduce-scatter moves (N - 1)|W_l|: 3m(N - 1)|W|. Checkpoints at
// every layer boundary: x.1..x.3 out once per microbatch, back in once; the data x.0 in twice.
TEST(ZeroInfinityPlan, MovesThreeMWeightsThroughTheHost)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const std::uint64_t W = total_weight(profile);
  const std::uint64_t X = kMicrobatch * kSample;
  const std::uint64_t m = 2;
  for (int n : {2, 4}) {
    const auto N = static_cast<std::uint64_t>(n);
    const Machine machine = switched_machine(n);
    const Plan plan = harmony_plan("zero-infinity", trace, machine, {{"minibatch", 2 * n * m}});
    EXPECT_EQ(plan.params["configuration"]["micro_steps"], m);
    EXPECT_EQ(plan.params["configuration"]["pack_bwd"], "0-0,1-1,2-2,3-3");
    ASSERT_TRUE(plan.estimate.iteration_time_s.has_value());
    const Runs runs = simulate_both(trace, machine, plan);
    report(fmt::format("zero-infinity N={} R=4 D={}", n, 2 * n * m), plan, runs);
    for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
      EXPECT_EQ(bytes_per_device(*run, StepKind::prefetch, "w.", n), std::vector<std::uint64_t>(N, 2 * m * W / N));
      EXPECT_EQ(bytes_per_device(*run, StepKind::offload, "dw.", n), std::vector<std::uint64_t>(N, m * W / N));
      EXPECT_EQ(sum(weight_traffic(*run, n)), 3 * m * W);
      EXPECT_EQ(bytes_per_device(*run, StepKind::send, "w.", n),
                std::vector<std::uint64_t>(N, 2 * m * (N - 1) * W / N));
      EXPECT_EQ(total_bytes(*run, StepKind::reducescatter, "dw."), m * (N - 1) * W);
      EXPECT_EQ(run->metrics.p2p_bytes, 3 * m * (N - 1) * W);
      EXPECT_EQ(bytes_per_device(*run, StepKind::offload, "x.", n), std::vector<std::uint64_t>(N, 3 * m * X));
      EXPECT_EQ(bytes_per_device(*run, StepKind::prefetch, "x.", n), std::vector<std::uint64_t>(N, 5 * m * X));
      EXPECT_GT(run->metrics.recomputed_bytes, 0u);
    }
  }
}

// Packs 0-1,2-3: only x.2 is a checkpoint; each layer's W is still gathered twice per micro-step.
TEST(ZeroInfinityPlan, PacksCheckpointTheirInputs)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const Plan plan = harmony_plan("zero-infinity", trace, machine, {{"minibatch", 4}, {"pack_bwd", "0-1,2-3"}});
  const Runs runs = simulate_both(trace, machine, plan);
  const std::uint64_t X = kMicrobatch * kSample;
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    EXPECT_EQ(bytes_per_device(*run, StepKind::offload, "x.", 2), (std::vector<std::uint64_t>{X, X}));
    EXPECT_EQ(bytes_per_device(*run, StepKind::prefetch, "w.", 2),
              std::vector<std::uint64_t>(2, total_weight(profile)));
  }
}

// R = 12: |W| = 46 MB does not fit a 40 MB GPU, so every replicated-W scheme (zero-offload; dp-swap without
// swapping) is out, while ZeRO-Infinity, which holds one gathered pack of W at a time, runs within it on both
// engines. zero-offload says why, with the bytes.
TEST(ZeroPlans, InfinityFitsWhereTheWeightsDoNot)
{
  const LayerProfile profile = uniform_profile(12);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const std::uint64_t budget = 40 * kMB;
  ASSERT_GT(total_weight(profile), budget);
  PlanRequest request;
  request.devices = 2;
  request.budget_bytes = budget;
  request.params = {{"minibatch", 4}};
  Plan plan = make_plan("zero-infinity", trace, machine, request);
  plan.budget_bytes = budget;
  const Runs runs = simulate_both(trace, machine, plan);
  EXPECT_LE(runs.fast.metrics.peak_device_bytes, budget);
  try {
    make_plan("zero-offload", trace, machine, request);
    ADD_FAILURE() << "zero-offload fitted 46 MB of weights in 40 MB";
  } catch (const Infeasible& error) {
    EXPECT_NE(std::string(error.what()).find("46000000 bytes"), std::string::npos) << error.what();
  }
}

// ZeRO-Offload, R = 4, N = 2, m = 2: W stays on the GPUs, so only dW shards go out (m|W|/N per GPU) and the updated
// W shards come in once after the CPU step (|W|/N per GPU), all-gathered over the GPU links ((N - 1)|W|).
TEST(ZeroOffloadPlan, MovesGradientsOutAndTheUpdateIn)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  const std::uint64_t W = total_weight(profile);
  const Plan plan = harmony_plan("zero-offload", trace, machine, {{"minibatch", 8}});
  const Runs runs = simulate_both(trace, machine, plan);
  report("zero-offload N=2 R=4 D=8", plan, runs);
  for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
    EXPECT_EQ(bytes_per_device(*run, StepKind::prefetch, "w.", 2), std::vector<std::uint64_t>(2, W / 2));
    EXPECT_EQ(bytes_per_device(*run, StepKind::offload, "dw.", 2), std::vector<std::uint64_t>(2, 2 * W / 2));
    EXPECT_EQ(total_bytes(*run, StepKind::send, "w."), W);
    EXPECT_EQ(total_bytes(*run, StepKind::reducescatter, "dw."), 2 * W);
  }
}

TEST(ZeroPlans, ErrorsNameTheParameter)
{
  const Trace trace = layer_chain_trace(uniform_profile(4), kMicrobatch);
  const Machine machine = switched_machine(2);
  const auto where = [&](const std::string& planner, const nlohmann::json& params) {
    try {
      harmony_plan(planner, trace, machine, params);
    } catch (const InputError& error) {
      return error.where();
    }
    return std::string("no error");
  };
  for (const char* planner : {"zero-infinity", "zero-offload"}) {
    EXPECT_EQ(where(planner, {{"minibatch", 6}}), "minibatch"); // not 2 GPUs x microbatches of 2
    EXPECT_EQ(where(planner, {}), "minibatch");
    EXPECT_EQ(where(planner, {{"minibatch", 8}, {"gpus", 3}}), "gpus");
    EXPECT_EQ(where(planner, {{"minibatch", 8}, {"pack_bwd", "0-1"}}), "pack_bwd"); // layers 2-3 uncovered
    EXPECT_EQ(where(planner, {{"minibatch", 8}, {"pack_bwd", "0-1,3-2"}}), "pack_bwd");
  }
}

TEST(ZeroPlans, Deterministic)
{
  const Trace trace = layer_chain_trace(uniform_profile(4), kMicrobatch);
  const Machine machine = switched_machine(2);
  const nlohmann::json params = {{"minibatch", 8}, {"pack_bwd", "0-1,2-3"}};
  for (const char* planner : {"zero-infinity", "zero-offload"})
    EXPECT_EQ(plan_to_json(harmony_plan(planner, trace, machine, params)).dump(),
              plan_to_json(harmony_plan(planner, trace, machine, params)).dump());
}

// The uniform layers profiled at u = 1 and u = 2: forward 6 / 10 ms, backward (recompute + backward) 16 / 30 ms, peaks
// W + (2 + 2u) MB forward and 3W + (4 + 4u) MB backward (u = 2 as uniform_profile), X(u, l) = u MB. Written to a file
// because the planners read the profile a trace was generated from by its path.
LayerProfile two_size_profile(std::size_t layers)
{
  LayerProfile profile = uniform_profile(layers);
  profile.sampled_forward = {1, 2};
  profile.sampled_backward = {1, 2};
  ProfiledMicrobatch one;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::uint64_t weight = profile.layers[l].weight_bytes;
    one.forward_time_s.push_back(0.006);
    one.backward_time_s.push_back(0.016);
    one.forward_peak_bytes.push_back(static_cast<std::int64_t>(weight + 4 * kMB));
    one.backward_peak_bytes.push_back(static_cast<std::int64_t>(3 * weight + 8 * kMB));
    one.input_bytes.push_back(kSample);
  }
  profile.microbatches.emplace(1, one);
  return profile;
}

std::string saved_profile(const LayerProfile& profile, const std::string& name)
{
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("memsim-harmony-{}-{}.layers.json", name, ::getpid());
  save_layer_profile(profile, path);
  return path.string();
}

// Compute-stream time per device, and compute steps per device whose op is named `prefix`...
std::vector<double> busy_per_device(const RunResult& run, int gpus)
{
  std::vector<double> busy(static_cast<std::size_t>(gpus), 0);
  for (const StepRecord& record : run.timeline)
    if ((record.kind == StepKind::compute || record.kind == StepKind::recompute) && record.device >= 0)
      busy[static_cast<std::size_t>(record.device)] += record.end_s - record.start_s;
  return busy;
}

std::size_t computes_named(const RunResult& run, const std::string& prefix, int device)
{
  std::size_t count = 0;
  for (const StepRecord& record : run.timeline)
    if ((record.kind == StepKind::compute || record.kind == StepKind::recompute) && record.device == device &&
        record.label.rfind(prefix, 0) == 0)
      ++count;
  return count;
}

// pp, N = 2, R = 4, D = 8 with U_F = 2 and U_B = 1: FWD[0-1] on GPU 0 runs 4 microbatches of 2, the loss task
// BWD[2-3] on GPU 1 and BWD[0-1] on GPU 0 run 8 of 1. The forward's output and its stash of X(0) go through the host
// and are re-split there (4 x 2 MB out each); the backward brings in 8 x 1 MB of each, and the data comes in as 4 x
// 2 MB. Only dX crosses GPU to GPU (8 x 1 MB). Compute: GPU 0 runs 4 x 2 forwards of 10 ms and 8 x 2 (recompute 6 ms
// + backward 10 ms); GPU 1 8 x 2 x 16 ms. Weights move as with one size. The same plan, whichever size the trace was
// generated at, simulates identically on both engines.
TEST(HarmonyResplit, PipelineForwardAtTwoBackwardAtOne)
{
  const LayerProfile profile = two_size_profile(4);
  const std::string file = saved_profile(profile, "pp");
  const Machine machine = switched_machine(2);
  const nlohmann::json params = {{"minibatch", 8},        {"u_fwd", 2},     {"u_bwd", 1}, {"pack_fwd", "0-1"},
                                 {"pack_bwd", "0-1,2-3"}, {"profile", file}};
  const std::uint64_t W = total_weight(profile);
  const std::uint64_t last = total_weight(profile, 2);
  std::vector<double> times;
  for (const int trace_u : {1, 2}) {
    const Trace trace = layer_chain_trace(profile, trace_u);
    const Plan plan = harmony_plan("harmony-pp", trace, machine, params);
    EXPECT_EQ(plan.params["configuration"]["u_fwd"], 2);
    EXPECT_EQ(plan.params["configuration"]["u_bwd"], 1);
    EXPECT_EQ(plan.samples_per_iteration.value_or(0), 8);
    EXPECT_EQ(plan_to_json(plan).dump(), plan_to_json(harmony_plan("harmony-pp", trace, machine, params)).dump());
    const Runs runs = simulate_both(trace, machine, plan);
    report(fmt::format("harmony-pp U_F=2 U_B=1 (trace at u={})", trace_u), plan, runs);
    for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
      const std::vector<std::uint64_t> x_in = bytes_per_device(*run, StepKind::prefetch, "x.", 2);
      EXPECT_EQ(x_in[0], 4 * 2 * kSample + 8 * kSample); // the data, the re-split stash of X(0)
      EXPECT_EQ(x_in[1], 8 * kSample);                   // the re-split output of FWD[0-1]
      const std::vector<std::uint64_t> x_out = bytes_per_device(*run, StepKind::offload, "x.", 2);
      EXPECT_EQ(x_out[0], 2 * 4 * 2 * kSample);
      EXPECT_EQ(x_out[1], 0u);
      EXPECT_EQ(run->metrics.p2p_bytes, 8 * kSample);
      const std::vector<std::uint64_t> w_in = bytes_per_device(*run, StepKind::prefetch, "w.", 2);
      EXPECT_EQ(w_in[0], 2 * (W - last));
      EXPECT_EQ(w_in[1], last);
      EXPECT_EQ(sum(bytes_per_device(*run, StepKind::offload, "dw.", 2)), W);
      EXPECT_EQ(computes_named(*run, "fwd.", 0), 4 * 2 + 8 * 2u);
      EXPECT_EQ(computes_named(*run, "bwd.", 0), 8 * 2u);
      EXPECT_EQ(computes_named(*run, "fwd.", 1), 8 * 2u);
      EXPECT_EQ(computes_named(*run, "bwd.", 1), 8 * 2u);
      const std::vector<double> busy = busy_per_device(*run, 2);
      EXPECT_NEAR(busy[0], 4 * 2 * 0.010 + 8 * 2 * (0.006 + 0.010), 1e-12);
      EXPECT_NEAR(busy[1], 8 * 2 * 0.016, 1e-12);
      EXPECT_TRUE(run->metrics.feasible);
    }
    times.push_back(runs.fast.metrics.iteration_time_s);
  }
  EXPECT_NEAR(times[0], times[1], 1e-12);
  std::filesystem::remove(file);
}

// dp, N = 2, D = 8, U_F = 2, U_B = 1: each GPU runs its 4 samples as 2 forward and 4 backward microbatches; the
// loss task's input and the stash come back re-split (4 x 1 MB each) after going out as 2 x 2 MB each.
TEST(HarmonyResplit, DataParallelForwardAtTwoBackwardAtOne)
{
  const LayerProfile profile = two_size_profile(4);
  const std::string file = saved_profile(profile, "dp");
  const Machine machine = switched_machine(2);
  const Trace trace = layer_chain_trace(profile, 1);
  const Plan plan = harmony_plan(
      "harmony-dp", trace, machine,
      {{"minibatch", 8}, {"u_fwd", 2}, {"u_bwd", 1}, {"pack_fwd", "0-1"}, {"pack_bwd", "0-1,2-3"}, {"profile", file}});
  const Runs runs = simulate_both(trace, machine, plan);
  report("harmony-dp U_F=2 U_B=1", plan, runs);
  for (const RunResult* run : {&runs.fast, &runs.simgrid})
    for (std::size_t gpu = 0; gpu < 2; ++gpu) {
      EXPECT_EQ(bytes_per_device(*run, StepKind::prefetch, "x.", 2)[gpu], 2 * 2 * kSample + 2 * 4 * kSample);
      EXPECT_EQ(bytes_per_device(*run, StepKind::offload, "x.", 2)[gpu], 2 * 2 * 2 * kSample);
      EXPECT_NEAR(busy_per_device(*run, 2)[gpu], 2 * 2 * 0.010 + 4 * 2 * 0.016 + 4 * 2 * (0.006 + 0.010), 1e-12);
    }
  std::filesystem::remove(file);
}

// With the profile the planner's search runs over both sizes (here U_F >= U_B from {1, 2}) and emits what it finds;
// without it, sizes other than the trace's are refused, and so is a profile the trace was not generated from.
TEST(HarmonyResplit, SearchOverBothSizesAndChecks)
{
  const LayerProfile profile = two_size_profile(4);
  const std::string file = saved_profile(profile, "search");
  const Machine machine = switched_machine(2);
  const Trace trace = layer_chain_trace(profile, 1);
  for (const char* planner : {"harmony-pp", "harmony-dp"}) {
    const Plan found = harmony_plan(planner, trace, machine,
                                    {{"minibatch", 8}, {"search", true}, {"memory_cap", 60e6}, {"profile", file}});
    std::cout << planner << " search over u = 1, 2: " << found.params["configuration"].dump() << "\n";
    const harmony::Mode mode = std::string(planner) == "harmony-pp" ? harmony::Mode::pp : harmony::Mode::dp;
    harmony::SearchSettings settings;
    settings.memory_cap = 60e6;
    const auto expected = harmony::search(profile, 2, 8, mode, settings);
    ASSERT_TRUE(expected);
    EXPECT_EQ(found.params["configuration"]["u_fwd"], expected->best.u_forward) << planner;
    EXPECT_EQ(found.params["configuration"]["u_bwd"], expected->best.u_backward) << planner;
    EXPECT_DOUBLE_EQ(*found.estimate.iteration_time_s, expected->estimate.iteration_s) << planner;
    simulate_both(trace, machine, found);
    if (mode ==
        harmony::Mode::dp) { // here the search's best has U_F != U_B: the plan the planner could not emit before
      EXPECT_EQ(found.params["configuration"]["u_fwd"], 2);
      EXPECT_EQ(found.params["configuration"]["u_bwd"], 1);
    }
  }
  const nlohmann::json resplit = {
      {"minibatch", 8}, {"u_fwd", 2}, {"u_bwd", 1}, {"pack_fwd", "0-1"}, {"pack_bwd", "0-1,2-3"}};
  EXPECT_THROW(harmony_plan("harmony-pp", trace, machine, resplit), InputError);
  nlohmann::json other = resplit;
  other["profile"] = file;
  LayerProfile slower = profile;
  slower.microbatches.at(1).forward_time_s[0] = 0.007;
  EXPECT_THROW(harmony_plan("harmony-pp", layer_chain_trace(slower, 1), machine, other), InputError);
  std::filesystem::remove(file);
}

// p2p boundaries are a rendezvous (Harmony's runtime: NCCL broadcast, the receiver posting one receive ahead with
// prefetch, none without): a GPU holds at most two received and not yet used microbatches of a boundary (one without
// prefetch) whatever D. pp, N = 2, R = 4, P_F = {0-1}, P_B = {0-1, 2-3}: GPU 1's loss task sends dX to GPU 0 while
// GPU 0 still runs the whole forward task, so a send that only waited for the receiver's previous task would land
// every dX made meanwhile on GPU 0 at once. What GPU 0 cannot take yet waits on GPU 1: with grouping and wrap-around
// that wait grows with D on the producer (experiments/harmony/fig10/README.md gives the numbers).
std::map<int, int> most_received_unused(const Plan& plan, const RunResult& run)
{
  std::map<std::pair<TensorId, int>, std::pair<int, double>> arrived; // (tensor, instance) -> (device, send start)
  std::vector<std::tuple<double, int, int>> events;                   // (time, +1 / -1, device), frees first
  for (const StepRecord& record : run.timeline) {
    const Step& step = plan.steps.at(static_cast<std::size_t>(record.step));
    if (step.kind == StepKind::send)
      arrived[{*step.tensor, step.instance}] = {*step.peer, record.start_s};
  }
  for (const StepRecord& record : run.timeline) {
    const Step& step = plan.steps.at(static_cast<std::size_t>(record.step));
    const auto used = arrived.find({step.tensor.value_or(-1), step.instance});
    if (step.kind != StepKind::free || used == arrived.end() || used->second.first != step.device)
      continue;
    events.emplace_back(used->second.second, 1, step.device);
    events.emplace_back(record.end_s, -1, step.device);
  }
  std::sort(events.begin(), events.end());
  std::map<int, int> live, most;
  for (const auto& [time, change, device] : events)
    most[device] = std::max(most[device], live[device] += change);
  return most;
}

TEST(HarmonyP2pRendezvous, AGpuHoldsAtMostTwoIncomingMicrobatchesWhateverD)
{
  const LayerProfile profile = uniform_profile(4);
  const Trace trace = layer_chain_trace(profile, kMicrobatch);
  const Machine machine = switched_machine(2);
  for (const bool prefetch : {true, false}) {
    for (const int microbatches : {4, 16}) {
      SCOPED_TRACE(fmt::format("prefetch={} D={}u", prefetch, microbatches));
      const Plan plan = harmony_plan("harmony-pp", trace, machine,
                                     {{"minibatch", microbatches * kMicrobatch},
                                      {"pack_fwd", "0-1"},
                                      {"pack_bwd", "0-1,2-3"},
                                      {"prefetch", prefetch}});
      const Runs runs = simulate_both(trace, machine, plan);
      for (const RunResult* run : {&runs.fast, &runs.simgrid}) {
        // Both boundaries (Y of the forward into GPU 1, dX of the loss task into GPU 0) are received one or two at a
        // time, and every microbatch crosses each of them once.
        const std::map<int, int> most = most_received_unused(plan, *run);
        ASSERT_EQ(most.size(), 2u);
        for (const auto& [device, count] : most)
          EXPECT_LE(count, prefetch ? 2 : 1) << "GPU " << device;
        EXPECT_EQ(run->metrics.p2p_bytes, 2u * static_cast<std::uint64_t>(microbatches) * kMicrobatch * kSample);
      }
    }
  }
}

} // namespace
} // namespace memsim
