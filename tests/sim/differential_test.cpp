// Differential test of the two engines (issue 8): random valid plans, seeded deterministically, run on the fast
// engine in process and on SimGrid (the reference) in a forked child, under both allocators; every step's times,
// the memory profile, peaks, bytes moved and the error must agree (engine_comparison.hpp). The case count comes
// from MEMSIM_DIFFERENTIAL_CASES: the `slow` binary runs 1000+, the unlabelled one a subset for the ASan build.
#include "engine_comparison.hpp"
#include "random_cases.hpp"
#include "simulate_in_child.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

#ifndef MEMSIM_DIFFERENTIAL_CASES
#define MEMSIM_DIFFERENTIAL_CASES 100
#endif

namespace memsim {
namespace {

using test::compare_runs;
using test::random_case;
using test::simulate_in_child;

std::set<std::string> v2_features_used(const Plan& plan)
{
  std::set<std::string> used;
  if (!plan.initial_placement.empty())
    used.insert("initial_placement");
  if (!plan.shared_across_instances.empty())
    used.insert("shared");
  if (!plan.instance_scopes.empty())
    used.insert("instance_scopes");
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::split)
      used.insert("split");
    if (step.device == kHostDevice)
      used.insert("host compute");
    if (is_collective(step.kind))
      used.insert("collective");
    if (step.iteration > 0)
      used.insert("iterations");
  }
  return used;
}

TEST(Differential, RandomPlansAgreeOnBothEngines)
{
  const std::uint64_t cases = MEMSIM_DIFFERENTIAL_CASES;
  std::map<std::string, int> outcomes;
  std::map<std::string, int> v2_feasible; // runs of plans using each v2 addition that ran to the end
  std::map<std::string, int> v2_failed;
  int mismatched = 0;
  for (std::uint64_t seed = 1; seed <= cases; ++seed) {
    test::PlanShape shape;
    shape.single_device = seed % 4 == 0;
    shape.single_stream = seed % 8 == 0;
    shape.v2 = seed % 2 == 1; // half the cases use the v2 plan additions
    shape.scopes = true;
    const test::RandomCase c = random_case(seed, shape);
    const std::set<std::string> features = v2_features_used(c.plan);
    for (AllocatorKind allocator : {AllocatorKind::bytes, AllocatorKind::pool}) {
      SimOptions options;
      options.allocator = allocator;
      options.engine = EngineKind::fast;
      const RunResult fast = simulate(c.trace, c.machine, c.plan, options);
      options.engine = EngineKind::simgrid;
      const RunResult reference = simulate_in_child(c.trace, c.machine, c.plan, options);
      ++outcomes[reference.error ? std::string(to_string(reference.error->kind)) : "feasible"];
      for (const std::string& feature : features)
        ++(reference.error ? v2_failed : v2_feasible)[feature];
      const std::vector<std::string> differences = compare_runs(reference, fast);
      if (differences.empty())
        continue;
      ++mismatched;
      std::string text;
      for (const std::string& line : differences)
        text += "\n  " + line;
      ADD_FAILURE() << "seed " << seed << ", allocator " << to_string(allocator) << " (" << c.plan.steps.size()
                    << " steps, " << c.machine.gpus.size() << " GPUs; " << c.notes << "): SimGrid vs fast:" << text;
      if (mismatched >= 10)
        return;
    }
  }
  std::string summary;
  for (const auto& [outcome, count] : outcomes)
    summary += fmt::format(" {} {}", outcome, count);
  std::printf("%llu random plans x 2 allocators:%s\n", static_cast<unsigned long long>(cases), summary.c_str());
  std::string v2_summary;
  for (const auto& [feature, count] : v2_feasible)
    v2_summary += fmt::format(" {} {}/{}", feature, count, count + v2_failed[feature]);
  std::printf("v2 additions (feasible runs / runs):%s\n", v2_summary.c_str());
  for (const char* feature :
       {"split", "host compute", "collective", "initial_placement", "iterations", "instance_scopes"})
    EXPECT_GT(v2_feasible[feature], 0) << feature;
  // The generator must exercise feasible plans and the failures (not all kinds appear in a small subset).
  EXPECT_GT(outcomes["feasible"], 0);
  EXPECT_GT(outcomes["out_of_memory"], 0);
  EXPECT_GT(outcomes["not_resident"], 0);
  if (cases >= 1000) {
    for (const char* kind : {"fragmentation", "double_allocation", "no_host_copy", "deadlock", "host_out_of_memory"})
      EXPECT_GT(outcomes[kind], 0) << kind;
  }
}

} // namespace
} // namespace memsim
