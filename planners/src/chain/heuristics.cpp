// The two heuristics of Beaumont, Eyraud-Dubois, Shilova 2021 (§5.1), as we read them:
//   autocapper  - the block DP with offloads allowed only when the transfer is fully hidden by compute (capped to
//                 what the bandwidth absorbs at no idle cost);
//   opportunist - offload the abar of a prefix of layers while the forward hides it, then rotor on the rest with the
//                 memory the offloads left (best prefix kept).
#include "chain_model.hpp"

namespace memsim::chain {
namespace {
Plan plan_autocapper(const Trace& t, const Machine& m, const PlanRequest& r, const ChainOptions& o)
{
  return plan_chain(ChainAlgorithm::autocapper, t, m, r, o);
}
Plan plan_opportunist(const Trace& t, const Machine& m, const PlanRequest& r, const ChainOptions& o)
{
  return plan_chain(ChainAlgorithm::opportunist, t, m, r, o);
}
} // namespace

MEMSIM_REGISTER_PLANNER(autocapper, "autocapper",
                        "chain heuristic: rematerialization plus only the offloads the compute hides", chain_params(),
                        plan_autocapper);
MEMSIM_REGISTER_PLANNER(opportunist, "opportunist", "chain heuristic: offload a prefix of layers, rotor on the rest",
                        chain_params(), plan_opportunist);

} // namespace memsim::chain
