// memsim-cuda's CPU-side program builder (the `--dry-run` path, no GPU) against the simulator on random single-GPU
// plans. The builder decides memory in list order, the simulator in simulated time order; where the simulated run
// is sequential in list order (each step starts when the one before it ended), both must agree exactly: feasible
// or not, the failure (kind, step, tensor, bytes, largest free block, and the message at the simulated time) and
// the device's peak. Under `bytes` the builder gets an arena far larger than the budget (only the byte cap
// counts); under `pool` an arena of exactly the budget, and plans on one stream, where every release is ordered
// before the next allocation (the simulators' pool reuses immediately, memsim-cuda only after the release's
// event). The same holds for v2 plans on one GPU (views, host compute, initial_placement, shared weights and
// gradients, iterations; no collectives): the builder uses the core's ledger and placement rules.
#include "random_cases.hpp"

#include "memsim/common/error.hpp"
#include "memsim/runtime/execution_program.hpp"
#include "memsim/sim/simulator.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <set>

namespace memsim {
namespace {

// Whether the run executed steps 0..k-1 one after another and stopped (if it failed) at step k.
bool sequential_in_list_order(const RunResult& result)
{
  for (std::size_t i = 0; i < result.timeline.size(); ++i) {
    if (result.timeline[i].step != static_cast<StepId>(i))
      return false;
    if (i > 0 && result.timeline[i].start_s < result.timeline[i - 1].end_s)
      return false;
  }
  if (!result.error)
    return true;
  const auto executed = static_cast<StepId>(result.timeline.size());
  return result.error->step == -1 ? executed == 0
                                  : result.error->step == executed &&
                                        (executed == 0 || result.error->time_s >= result.timeline.back().end_s);
}

std::string compare(const RunResult& simulated, const runtime::Program& program, AllocatorKind allocator)
{
  std::string text;
  const std::uint64_t peak = simulated.metrics.peak_device_bytes; // the ledger's peak of gpu0, the only device
  if (program.failure.has_value() != simulated.error.has_value())
    return fmt::format("\n  failure: '{}' vs '{}'", simulated.error ? simulated.error->message : "none",
                       program.failure ? program.failure->what : "none");
  if (simulated.error) {
    const ExecutionError& e = *simulated.error;
    const runtime::ProgramFailure& f = *program.failure;
    const std::string message = f.message(e.time_s);
    if (e.kind != f.kind || e.step != f.step || e.tensor != f.tensor || e.bytes_in_use != f.bytes_in_use ||
        e.bytes_requested != f.bytes_requested ||
        (allocator == AllocatorKind::pool && e.largest_free_block != f.largest_free_block) || e.message != message)
      text += fmt::format("\n  failure: '{}' vs '{}'", e.message, message);
  }
  if (peak != program.peak_bytes)
    text += fmt::format("\n  peak {} vs {}", peak, program.peak_bytes);
  return text;
}

struct Compared {
  int plans = 0;
  int failures = 0;
  std::map<std::string, int> features; // compared plans per v2 addition they use
};

std::set<std::string> v2_additions(const Plan& plan)
{
  std::set<std::string> used;
  if (!plan.initial_placement.empty())
    used.insert("initial_placement");
  if (!plan.shared_across_instances.empty())
    used.insert("shared_across_instances");
  for (const Step& step : plan.steps) {
    if (is_view(step.kind))
      used.insert("split/merge");
    if (step.device == kHostDevice)
      used.insert("host compute");
    if (step.iteration != 0)
      used.insert("iterations");
  }
  return used;
}

// Builds and simulates the random single-GPU plans of `seeds` (v2: with the v2 additions a single GPU allows:
// views, host compute, initial_placement, shared weights and gradients, iterations) and compares them.
Compared compare_random_plans(std::uint64_t first_seed, std::uint64_t last_seed, bool v2)
{
  Compared counts;
  int& compared = counts.plans;
  int& failures_compared = counts.failures;
  for (std::uint64_t seed = first_seed; seed <= last_seed; ++seed) {
    test::PlanShape shape;
    shape.single_device = true;
    shape.single_stream = seed % 2 == 0;
    shape.v2 = v2;
    test::RandomCase c = test::random_case(seed, shape);
    c.machine.host.memory = 0; // memsim-cuda does not model host memory: neither does the simulator here
    try {
      runtime::check_runtime_supports(c.plan, "random plan");
    } catch (const InputError&) {
      continue; // a dep on a later step: memsim-cuda refuses such plans
    }
    for (AllocatorKind allocator : {AllocatorKind::bytes, AllocatorKind::pool}) {
      if (allocator == AllocatorKind::pool && !shape.single_stream)
        continue;
      SimOptions options;
      options.engine = EngineKind::fast;
      options.allocator = allocator;
      const RunResult simulated = simulate(c.trace, c.machine, c.plan, options);
      if (!sequential_in_list_order(simulated))
        continue;
      const std::uint64_t memory = c.machine.gpus[0].memory;
      runtime::PoolConfig pool;
      pool.budget_bytes = c.plan.budget_bytes == 0 ? memory : std::min(c.plan.budget_bytes, memory);
      pool.arena_bytes = allocator == AllocatorKind::pool ? pool.budget_bytes : 4 * pool.budget_bytes;
      const runtime::Program program =
          runtime::build_program(c.plan, trace_with_extras(c.trace, c.plan), pool, c.machine);
      ++compared;
      for (const std::string& feature : v2_additions(c.plan))
        ++counts.features[feature];
      failures_compared += simulated.error ? 1 : 0;
      const std::string text = compare(simulated, program, allocator);
      EXPECT_TRUE(text.empty()) << (v2 ? "v2 " : "") << "seed " << seed << ", allocator " << to_string(allocator)
                                << " (" << c.plan.steps.size() << " steps; " << c.notes
                                << "): simulator vs memsim-cuda:" << text;
    }
  }
  return counts;
}

TEST(DifferentialRuntime, ProgramBuilderAgreesWithTheSimulatorWhereListOrderIsTimeOrder)
{
  const Compared v1 = compare_random_plans(1, 1500, false);
  std::printf("%d plans compared with memsim-cuda's program builder, %d of them infeasible\n", v1.plans, v1.failures);
  EXPECT_GT(v1.plans, 300);
  EXPECT_GT(v1.failures, 50);
}

TEST(DifferentialRuntime, ProgramBuilderAgreesWithTheSimulatorOnV2PlansWhereListOrderIsTimeOrder)
{
  Compared v2 = compare_random_plans(1, 1500, true);
  std::printf("%d v2 plans compared with memsim-cuda's program builder, %d of them infeasible\n", v2.plans,
              v2.failures);
  EXPECT_GT(v2.plans, 300);
  EXPECT_GT(v2.failures, 50);
  for (const char* feature :
       {"initial_placement", "shared_across_instances", "split/merge", "host compute", "iterations"}) {
    std::printf("  %d of them use %s\n", v2.features[feature], feature);
    EXPECT_GT(v2.features[feature], 20) << feature;
  }
}

} // namespace
} // namespace memsim
