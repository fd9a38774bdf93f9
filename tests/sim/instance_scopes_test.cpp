// Scoped residency (plan.instance_scopes, sim/README.md): an instance's weights and inputs are allocated when its
// scope's first step starts and everything it holds is released when the last one ends. Worked-out peaks and times
// on a hand plan, on both engines (the fast engine in process, SimGrid in a child), and the located validation errors.
#include "engine_comparison.hpp"

#include "memsim/common/error.hpp"
#include "memsim/planners/plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace memsim {
namespace {

using ::testing::HasSubstr;

constexpr double kTolerance = 1e-12;

Machine one_gpu()
{
  Machine machine;
  machine.name = "scopes-test";
  machine.host.memory = 1ull << 36;
  machine.host.flops = 1e12;
  machine.host.memory_bandwidth = 1e9;
  machine.gpus.push_back(Gpu{"gpu0", "test-gpu", 16ull << 30, {{"fp32", 10e12}}, 900e9, 0});
  machine.links.push_back(Link{"gpu0-host", "gpu0", "host", 16e9, 0, Duplex::split});
  validate_machine(machine, machine.name);
  return machine;
}

// f reads x (1 MB input) and w (4 MB weight) and writes y (2 MB) in 1 ms.
const Trace& trace()
{
  static const Trace parsed = trace_from_text(
      R"({"format": "memsim-trace", "version": 1, "name": "t", "source": {"device": "test-gpu"},
          "tensors": [{"id": 0, "name": "x", "bytes": 1000000, "kind": "input"},
                      {"id": 1, "name": "w", "bytes": 4000000, "kind": "weight"},
                      {"id": 2, "name": "y", "bytes": 2000000, "kind": "activation"}],
          "ops": [{"id": 0, "name": "f", "phase": "forward", "inputs": [0, 1], "outputs": [2], "time_s": 0.001}]})",
      "t.json");
  return parsed;
}

// Instance 0 runs f and keeps y (its scope's end releases it); instance 1 runs f after it and frees y.
std::string plan_text(const std::string& extra)
{
  return R"({"format": "memsim-plan", "version": 1, "trace": "t", "machine": "m", "planner": "hand", )" + extra +
         R"( "steps": [{"id": 0, "kind": "compute", "op": 0, "deps": []},
                       {"id": 1, "kind": "compute", "op": 0, "instance": 1, "deps": [0]},
                       {"id": 2, "kind": "free", "tensor": 2, "instance": 1, "deps": [1]}]})";
}

const std::string kScopes =
    R"("instance_scopes": [{"instance": 0, "first_step": 0, "last_step": 0},
                           {"instance": 1, "first_step": 1, "last_step": 2}],)";

using test::EngineRuns;

// The plan `text`, validated, on both engines.
EngineRuns run_both(const std::string& text)
{
  const Plan plan = plan_from_text(text, "p.json");
  validate_plan(plan, trace(), 1, "p.json");
  return test::run_on_both_engines(trace(), one_gpu(), plan);
}

std::string with_budget(const std::string& extra, std::uint64_t bytes)
{
  return R"("budget_bytes": )" + std::to_string(bytes) + ", " + extra;
}

TEST(InstanceScopes, WithoutScopesBothInstancesHoldTheirWeightsFromTheStart)
{
  // t = 0: x and w of both instances (10 MB); y of instance 0 (12 MB); y of instance 1 while instance 0's stays.
  const EngineRuns runs = run_both(plan_text(""));
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_EQ(result->metrics.peak_device_bytes, 14000000u);
    EXPECT_NEAR(result->metrics.iteration_time_s, 0.002, kTolerance);
  }
}

TEST(InstanceScopes, EachScopeHoldsOnlyItsInstanceWhileItRuns)
{
  // Instance 0: x + w + y = 7 MB, all released when step 0 ends; instance 1 then needs the same 7 MB.
  const EngineRuns runs = run_both(plan_text(kScopes));
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_FALSE(result->error) << result->error->message;
    EXPECT_EQ(result->metrics.peak_device_bytes, 7000000u);
    EXPECT_NEAR(result->metrics.iteration_time_s, 0.002, kTolerance);
    EXPECT_EQ(result->memory.front().bytes, 0u); // nothing at t = 0
    EXPECT_EQ(result->memory.back().bytes, 0u);  // nothing after the last scope
  }
}

TEST(InstanceScopes, APlanThatRunsOutOfMemoryWithoutScopesFitsWithThem)
{
  const EngineRuns unscoped = run_both(plan_text(with_budget("", 9000000)));
  ASSERT_TRUE(unscoped.fast.error);
  EXPECT_EQ(unscoped.fast.error->kind, FailureKind::out_of_memory);
  const EngineRuns scoped = run_both(plan_text(with_budget(kScopes, 9000000)));
  EXPECT_FALSE(scoped.fast.error);
  EXPECT_EQ(scoped.fast.metrics.peak_device_bytes, 7000000u);
}

TEST(InstanceScopes, AScopeThatDoesNotFitFailsAtItsFirstStep)
{
  // 4.5 MB: x (1 MB) fits, w (4 MB) does not, when instance 0's scope opens at step 0.
  const EngineRuns runs = run_both(plan_text(with_budget(kScopes, 4500000)));
  for (const RunResult* result : {&runs.fast, &runs.simgrid}) {
    ASSERT_TRUE(result->error);
    EXPECT_EQ(result->error->kind, FailureKind::out_of_memory);
    EXPECT_EQ(result->error->step, 0);
    EXPECT_EQ(result->error->tensor, 1);
    EXPECT_THAT(result->error->message, HasSubstr("step 0"));
  }
}

TEST(InstanceScopes, PlanJsonRoundTripsTheScopes)
{
  const Plan plan = plan_from_text(plan_text(kScopes), "p.json");
  ASSERT_EQ(plan.instance_scopes.size(), 2u);
  EXPECT_EQ(plan.instance_scopes[1].instance, 1);
  EXPECT_EQ(plan.instance_scopes[1].first_step, 1);
  EXPECT_EQ(plan.instance_scopes[1].last_step, 2);
  EXPECT_EQ(v2_feature(plan), "instance_scopes");
  EXPECT_EQ(plan_to_json(plan_from_json(plan_to_json(plan), "again.json")), plan_to_json(plan));
}

std::string validation_error(const std::string& scopes)
{
  try {
    validate_plan(plan_from_text(plan_text(R"("instance_scopes": )" + scopes + ","), "p.json"), trace(), 1, "p.json");
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(InstanceScopes, ValidationNamesTheScopeAndWhatIsWrong)
{
  EXPECT_EQ(validation_error(R"([{"instance": 3, "first_step": 0, "last_step": 0}])"),
            "p.json: at /instance_scopes/0/instance: no step runs instance 3");
  EXPECT_EQ(validation_error(R"([{"instance": 1, "first_step": 1, "last_step": 7}])"),
            "p.json: at /instance_scopes/0/last_step: step 7 does not exist (the plan has steps 0..2)");
  EXPECT_EQ(validation_error(R"([{"instance": 1, "first_step": 0, "last_step": 2}])"),
            "p.json: at /instance_scopes/0/first_step: step 0 runs instance 0, not the scope's instance 1");
  EXPECT_EQ(validation_error(R"([{"instance": 1, "first_step": 2, "last_step": 1}])"),
            "p.json: at /instance_scopes/0/last_step: the scope ends at step 1, before its first step 2");
  EXPECT_EQ(validation_error(R"([{"instance": 1, "first_step": 1, "last_step": 2},
                                 {"instance": 1, "first_step": 2, "last_step": 2}])"),
            "p.json: at /instance_scopes/1: scope of instance 1 (steps 2..2) overlaps its scope 0 (steps 1..2)");
  EXPECT_EQ(validation_error(R"([{"instance": 1, "first_step": 1, "last_step": 1}])"),
            "p.json: at /steps/2/instance: step 2 of instance 1 lies outside every scope of that instance");
  EXPECT_EQ(validation_error(R"([{"instance": 1, "first_step": 1, "last_step": 2}])"), "");
}

} // namespace
} // namespace memsim
