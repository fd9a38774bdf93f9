// `memsim plan` with the chain planners: a trace without a chain view is bad input (exit 2, the reason named), a
// budget below the minimum is a result (exit 1, "no plan fits: minimum memory is ...").
#include "memsim/traces/trace.hpp"
#include "test_files.hpp"
#include "test_traces.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

using ::testing::HasSubstr;

const std::string kMemsim = MEMSIM_EXECUTABLE;

std::string plan_command(const std::filesystem::path& trace, const std::string& planner, const std::string& budget,
                         const std::filesystem::path& out)
{
  return kMemsim + " plan --trace '" + trace.string() + "' --machine v100-32gb-pcie3 --planner " + planner +
         " --budget " + budget + " --out '" + out.string() + "'";
}

TEST(ChainPlannersCli, TraceWithoutChainViewExits2WithTheReason)
{
  const test::ScratchDir scratch;
  Trace trace = test::make_chain(3, 1000);
  for (Op& op : trace.ops)
    if (op.phase == Phase::forward && op.layer == 2)
      op.inputs.push_back(trace.ops[0].outputs[0]); // a skip edge from layer 0 to layer 2
  save_trace(trace, scratch / "skip.trace.json");
  for (const char* planner : {"rotor", "pofo", "offload-dp", "autocapper", "opportunist"}) {
    const auto result =
        test::run_command(plan_command(scratch / "skip.trace.json", planner, "1GB", scratch / "p.json"));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output, HasSubstr("no chain view: not a chain"));
    EXPECT_THAT(result.output, HasSubstr("skips layers"));
  }
}

TEST(ChainPlannersCli, BudgetBelowTheMinimumIsInfeasible)
{
  const test::ScratchDir scratch;
  save_trace(test::make_chain(4, 1000000), scratch / "chain.trace.json");
  // Weights 4 kB, input 1 MB resident; the backward of a layer alone needs 4 MB.
  const auto refused = test::run_command(plan_command(scratch / "chain.trace.json", "pofo", "3MB", scratch / "p.json"));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("no plan fits: minimum memory is"));
  const auto planned = test::run_command(plan_command(scratch / "chain.trace.json", "pofo", "8MB", scratch / "p.json"));
  EXPECT_EQ(planned.exit_code, 0) << planned.output;
}

} // namespace
} // namespace memsim
