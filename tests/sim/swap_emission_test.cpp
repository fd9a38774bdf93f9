// The shared swap emitter (planners/src/async_account.hpp) on the 3-layer test chain, sequence f0 f1 f2 loss b2 b1
// b0 with a0 moved (last forward use f1, first backward use b1, prefetch after b2): handing it the sequence's
// generation_ends, as μ-TWO's exact check does, gives the same plan as letting it compute them; ends of another
// sequence are refused.
#include "test_traces.hpp"

#include "../../planners/src/async_account.hpp"
#include "../../planners/src/sequence.hpp"

#include "memsim/planners/plan.hpp"
#include "memsim/sim/trace_analysis.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace memsim {
namespace {

constexpr std::uint64_t MB = 1000000;

struct Chain {
  Trace trace = test::make_chain(3, MB);
  TraceAnalysis analysis{trace};
  std::vector<planning::SequenceEntry> sequence;
  std::vector<planning::MovedTensor> moved;
  planning::SwapEmission emission;

  Chain()
  {
    for (const Op& op : trace.ops)
      sequence.push_back({op.id, false});
    TensorId a0 = -1;
    for (const Tensor& tensor : trace.tensors)
      if (tensor.name == "a0")
        a0 = tensor.id;
    moved.push_back({a0, 1, 5, 4}); // positions: f1, b1, b2
    emission.planner = "test";
    emission.budget_bytes = 100 * MB;
  }
};

std::size_t count(const Plan& plan, StepKind kind)
{
  return static_cast<std::size_t>(std::count_if(plan.steps.begin(), plan.steps.end(),
                                                [&](const Step& step) { return step.kind == kind; }));
}

TEST(SwapEmission, GivenGenerationEndsGiveTheSamePlan)
{
  Chain chain;
  Plan computed;
  planning::emit_with_swaps(chain.analysis, chain.sequence, chain.moved, chain.emission, computed);
  ASSERT_EQ(count(computed, StepKind::offload), 1u); // the swap is really emitted
  ASSERT_EQ(count(computed, StepKind::prefetch), 1u);

  const auto ends = planning::generation_ends(chain.analysis, chain.sequence);
  chain.emission.generation_ends = &ends;
  Plan given;
  planning::emit_with_swaps(chain.analysis, chain.sequence, chain.moved, chain.emission, given);
  EXPECT_EQ(plan_to_json(given).dump(), plan_to_json(computed).dump());
}

TEST(SwapEmission, GenerationEndsOfAnotherSequenceAreRefused)
{
  Chain chain;
  std::vector<planning::SequenceEntry> shorter(chain.sequence.begin(), chain.sequence.end() - 1);
  const auto ends = planning::generation_ends(chain.analysis, shorter);
  chain.emission.generation_ends = &ends;
  Plan plan;
  EXPECT_THROW(planning::emit_with_swaps(chain.analysis, chain.sequence, chain.moved, chain.emission, plan),
               std::logic_error);
}

} // namespace
} // namespace memsim
