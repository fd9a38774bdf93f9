// lru-swap: when a step's allocations do not fit on a GPU, offload the least recently used resident activation,
// gradient or weight gradient that no running step uses, and free it once copied; repeat until the freed bytes
// cover the shortfall. A step that reads an offloaded tensor fetches it on demand and waits for it.
#include "memsim/common/policy_registry.hpp"
#include "memsim/sim/memory_policy.hpp"

#include <map>
#include <memory>
#include <set>
#include <utility>

namespace memsim {
namespace {

struct LruSwapOptions {
  std::int64_t min_bytes = 0;
};

bool swappable(TensorKind kind)
{
  return kind == TensorKind::activation || kind == TensorKind::gradient || kind == TensorKind::weight_grad;
}

class LruSwap final : public MemoryPolicy {
public:
  explicit LruSwap(const LruSwapOptions& options) : options_(options) {}

  void on_access(const TensorAccess& access, const PolicyView&) override
  {
    auto [found, added] = last_use_.try_emplace(access.tensor, 0);
    if (!added)
      by_age_.erase({found->second, access.tensor});
    found->second = ++clock_;
    by_age_.insert({found->second, access.tensor});
  }

  std::vector<PolicyAction> on_allocation_denied(const AllocationDemand& demand, const PolicyView& view) override
  {
    // With the pool allocator the bytes may suffice and the arena still be fragmented: free one more then.
    const std::uint64_t wanted = std::max<std::uint64_t>(demand.shortfall(), 1);
    std::uint64_t freed = 0;
    std::vector<PolicyAction> actions;
    for (const auto& [age, slot] : by_age_) {
      if (freed >= wanted)
        break;
      const Tensor& tensor = view.trace().tensor(slot.tensor);
      if (slot.space != demand.device || !swappable(tensor.kind) ||
          tensor.bytes < static_cast<std::uint64_t>(options_.min_bytes) || !view.resident(slot) || view.pinned(slot))
        continue;
      actions.push_back(PolicyAction::offload(slot));
      freed += tensor.bytes;
    }
    return actions;
  }

  std::vector<PolicyAction> on_missing_tensor(const MissingTensor& missing, const PolicyView& view) override
  {
    if (!view.has_host_copy(missing.tensor.instance, missing.tensor.tensor))
      return {};
    return {PolicyAction::fetch(missing.tensor)};
  }

private:
  LruSwapOptions options_;
  std::uint64_t clock_ = 0;
  std::map<TensorSlot, std::uint64_t> last_use_;
  std::set<std::pair<std::uint64_t, TensorSlot>> by_age_; // least recently used first
};

} // namespace

MEMSIM_REGISTER_POLICY(lru_swap, "lru-swap",
                       "when an allocation does not fit, offload the least recently used activation or gradient that "
                       "no running step uses (freed once copied); fetch an offloaded tensor on demand when read",
                       {param("min_bytes", &LruSwapOptions::min_bytes, "never offload tensors smaller than this",
                              {.min = 0})},
                       [](const LruSwapOptions& options) { return std::make_unique<LruSwap>(options); });

} // namespace memsim
