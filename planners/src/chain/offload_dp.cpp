// offload-dp: optimal offloading without rematerialization (Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2020), as the
// block DP of pofo.cpp restricted to F_all blocks: every layer keeps its abar, which it may offload during the next
// layer's forward and prefetch during the backward of the layer after next.
#include "chain_model.hpp"

namespace memsim::chain {
namespace {
Plan plan_offload_dp(const Trace& t, const Machine& m, const PlanRequest& r, const ChainOptions& o)
{
  return plan_chain(ChainAlgorithm::offload_dp, t, m, r, o);
}
} // namespace

MEMSIM_REGISTER_PLANNER(offload_dp, "offload-dp",
                        "Beaumont et al. 2020: optimal offloading of a chain's activations, no recomputation",
                        chain_params(), plan_offload_dp);

} // namespace memsim::chain
