// Differential test of the two engines on what the planners produce: generated traces (the generator registry) and
// small shipped traces, through every registered planner at two budgets, on a split-duplex and a shared-duplex
// machine, under both allocators. SimGrid (in a forked child) and the fast engine must agree exactly
// (engine_comparison.hpp).
#include "engine_comparison.hpp"
#include "planner_test_support.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/planner.hpp"
#include "memsim/sim/trace_analysis.hpp"
#include "memsim/traces/generator_registry.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace memsim {
namespace {

using test::generated;

Machine one_gpu(Duplex duplex)
{
  Machine machine;
  machine.name = duplex == Duplex::split ? "pcie-split" : "pcie-shared";
  machine.gpus.push_back(Gpu{"gpu0", "test-gpu", 1ull << 36, {{"fp32", 14e12}, {"fp16", 50e12}}, 900e9, 2e-6});
  machine.host.memory = 1ull << 38;
  machine.links.push_back(Link{"pcie", "gpu0", "host", 12e9, 1e-6, duplex});
  return machine;
}

std::vector<std::pair<std::string, Trace>> traces()
{
  std::vector<std::pair<std::string, Trace>> all;
  all.emplace_back("cnn", generated("cnn", {{"depth", 6}, {"batch", 8}, {"image", 32}, {"channel_scale", 0.25}}));
  all.emplace_back("resnet",
                   generated("cnn",
                             {{"depth", 3}, {"batch", 4}, {"image", 32}, {"channel_scale", 0.25}, {"residual", true}}));
  all.emplace_back("transformer",
                   generated("transformer", {{"layers", 3}, {"hidden", 128}, {"heads", 4}, {"seq", 64}, {"batch", 2}}));
  const std::filesystem::path data = std::filesystem::path(MEMSIM_SOURCE_DIR) / "traces" / "data";
  for (const char* file : {"vgg16-b384-h100.trace.json.gz", "vgg16-b128-v100.trace.json"})
    all.emplace_back(file, load_trace(data / file));
  return all;
}

TEST(DifferentialPlanners, EveryPlannersPlansAgreeOnBothEngines)
{
  int compared = 0;
  int planned = 0;
  for (const auto& [name, trace] : traces()) {
    const std::uint64_t peak = default_memory_profile(trace).peak_bytes;
    for (const PlannerInfo* planner : planner_registry().all()) {
      for (double fraction : {1.0, 0.6}) {
        for (Duplex duplex : {Duplex::split, Duplex::shared}) {
          const Machine machine = one_gpu(duplex);
          PlanRequest request;
          request.budget_bytes = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
          Plan plan;
          try {
            plan = make_plan(planner->name, trace, machine, request);
          } catch (const Infeasible&) {
            continue;
          } catch (const InputError&) {
            continue; // a planner that cannot read this trace (e.g. not a chain) says so; nothing to run
          }
          ++planned;
          for (AllocatorKind allocator : {AllocatorKind::bytes, AllocatorKind::pool}) {
            SimOptions options;
            options.allocator = allocator;
            SCOPED_TRACE(fmt::format("{}, {} at {} of the peak, {}, allocator {}", name, planner->name, fraction,
                                     machine.name, to_string(allocator)));
            (void)test::run_on_both_engines(trace, machine, plan, options);
            ++compared;
          }
        }
      }
    }
  }
  std::printf("%d planner plans, %d comparisons\n", planned, compared);
  EXPECT_GT(planned, 20);
}

} // namespace
} // namespace memsim
