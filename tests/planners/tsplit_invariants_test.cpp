// tsplit's invariants (issue 10) at budgets from 0.3 to 1.0 of each keep-all peak: every plan runs on the fast
// engine within its budget (or the planner says infeasible) -- with every split dim and recompute mode too --,
// split=false emits no split step, at the keep-all peak the plan is keep-all's, the plan's estimate is within 2 % of
// the simulated iteration time, and planning twice gives the same plan. The unlabelled binary runs small generated
// traces and one shipped trace; the `slow` one (MEMSIM_TSPLIT_ALL_WORKLOADS) adds every shipped trace and six model
// presets.
#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/simulator.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/generator_registry.hpp"
#include "planner_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

namespace memsim {
namespace {

using test::generated;

Machine one_gpu()
{
  Machine machine;
  machine.name = "pcie";
  machine.gpus.push_back(Gpu{"gpu0", "test-gpu", 1ull << 40, {{"fp32", 14e12}, {"fp16", 50e12}}, 900e9, 2e-6});
  machine.host.memory = 1ull << 42;
  machine.links.push_back(Link{"pcie", "gpu0", "host", 12e9, 1e-6, Duplex::split});
  return machine;
}

std::vector<std::pair<std::string, Trace>> workloads()
{
  std::vector<std::pair<std::string, Trace>> all;
  all.emplace_back("cnn", generated("cnn", {{"depth", 8}, {"batch", 16}, {"image", 64}, {"channel_scale", 0.5}}));
  all.emplace_back("resnet", generated("cnn", {{"depth", 4}, {"batch", 8}, {"image", 64}, {"residual", true}}));
  all.emplace_back("transformer",
                   generated("transformer", {{"layers", 3}, {"hidden", 128}, {"heads", 4}, {"seq", 64}, {"batch", 4}}));
  const std::filesystem::path data = std::filesystem::path(MEMSIM_SOURCE_DIR) / "traces" / "data";
  all.emplace_back("vgg16-b128-v100", load_trace(data / "vgg16-b128-v100.trace.json"));
#ifdef MEMSIM_TSPLIT_ALL_WORKLOADS
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(data))
    if (entry.path().string().find(".trace.json") != std::string::npos &&
        entry.path().filename() != "vgg16-b128-v100.trace.json")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files)
    all.emplace_back(file.filename().string(), load_trace(file));
  for (const char* model : {"vgg16", "vgg19", "resnet50", "resnet101", "inception-v4", "transformer-iwslt"})
    all.emplace_back(model, generated("preset", {{"model", model}, {"batch", 32}}));
#endif
  return all;
}

Plan keep_all_steps(const Trace& trace, std::uint64_t budget)
{
  PlanRequest request;
  request.budget_bytes = budget;
  return make_plan("keep-all", trace, one_gpu(), request);
}

TEST(TsplitInvariants, PlansRunWithinTheirBudgetAndEstimateTheirTime)
{
  const Machine machine = one_gpu();
  int feasible = 0;
  int split_plans = 0;
  int other_dim_plans = 0; // split along channel, spatial, sequence or heads
  for (const auto& [name, trace] : workloads()) {
    const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
    for (double fraction : {0.3, 0.4, 0.5, 0.6, 0.8, 1.0}) {
      const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
      for (const nlohmann::json& params :
           {nlohmann::json{{"split", true}}, nlohmann::json{{"split", false}},
            nlohmann::json{{"split_dead_inputs", true}},
            nlohmann::json{{"split_dead_inputs", true}, {"dims", "batch,channel,spatial,sequence,heads"}},
            nlohmann::json{{"recompute_mode", "speed"}}, nlohmann::json{{"recompute_mode", "lru"}}}) {
        const std::string where = fmt::format("{} at {} of the peak, {}", name, fraction, params.dump());
        PlanRequest request;
        request.budget_bytes = budget;
        request.params = params;
        Plan plan;
        try {
          plan = make_plan("tsplit", trace, machine, request);
        } catch (const Infeasible&) {
          EXPECT_LT(fraction, 1.0) << where << ": keep-all fits";
          continue;
        }
        validate_plan(plan, trace, 1, where);
        EXPECT_EQ(plan_to_json(plan).dump(), plan_to_json(make_plan("tsplit", trace, machine, request)).dump())
            << where << ": not deterministic";
        const std::size_t splits =
            static_cast<std::size_t>(std::count_if(plan.steps.begin(), plan.steps.end(),
                                                   [](const Step& s) { return s.kind == StepKind::split; }));
        if (!params.value("split", true)) {
          EXPECT_EQ(splits, 0u) << where;
        }
        split_plans += splits > 0 ? 1 : 0;
        other_dim_plans += std::any_of(plan.extra_ops.begin(), plan.extra_ops.end(), [](const Op& micro) {
          return micro.split_of && micro.split_of->dim != "batch";
        });
        if (fraction >= 1.0) {
          EXPECT_EQ(plan_to_json(plan).at("steps"), plan_to_json(keep_all_steps(trace, budget)).at("steps")) << where;
        }
        SimOptions options;
        options.engine = EngineKind::fast;
        options.record_timeline = false;
        const RunResult run = simulate(trace, machine, plan, options);
        ASSERT_TRUE(run.metrics.feasible) << where << ": " << run.error->message;
        ++feasible;
        EXPECT_LE(run.metrics.peak_device_bytes, budget) << where;
        EXPECT_NEAR(*plan.estimate.iteration_time_s, run.metrics.iteration_time_s, 0.02 * run.metrics.iteration_time_s)
            << where;
        EXPECT_LE(run.metrics.peak_device_bytes, *plan.estimate.peak_bytes) << where;
      }
    }
  }
  EXPECT_GT(feasible, 20);
  EXPECT_GT(split_plans, 0);
  EXPECT_GT(other_dim_plans, 0);
}

} // namespace
} // namespace memsim
