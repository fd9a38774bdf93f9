#include "weight_versions.hpp"

#include <optional>

namespace memsim::harmony {
namespace {

// Appends copies of the trace's tensors and ops to the plan, ids continuing after the trace's and the plan's.
class Copier {
public:
  Copier(const Trace& trace, Plan& plan) : trace_(trace), plan_(plan) {}

  TensorId tensor(TensorId original, const char* suffix)
  {
    Tensor copy = trace_.tensor(original);
    copy.id = static_cast<TensorId>(trace_.tensors.size() + plan_.extra_tensors.size());
    copy.name += suffix;
    copy.free_after.reset();
    plan_.extra_tensors.push_back(copy);
    return copy.id;
  }

  // The op reading `read` where the original reads `replaced`, writing `writes` as well when given.
  OpId op(OpId original, const char* suffix, TensorId replaced, TensorId read, std::optional<TensorId> writes = {})
  {
    Op copy = trace_.op(original);
    copy.id = static_cast<OpId>(trace_.ops.size() + plan_.extra_ops.size());
    copy.name += suffix;
    for (TensorId& input : copy.inputs)
      if (input == replaced)
        input = read;
    if (writes)
      copy.outputs.push_back(*writes);
    plan_.extra_ops.push_back(copy);
    return copy.id;
  }

private:
  const Trace& trace_;
  Plan& plan_;
};

} // namespace

std::array<LayerChainIds, 2> two_weight_versions(const Trace& trace, const LayerChainIds& chain, Plan& plan)
{
  std::array<LayerChainIds, 2> versions{chain, chain};
  Copier copy(trace, plan);
  for (std::size_t l = 0; l < chain.layers(); ++l) {
    if (!chain.w[l])
      continue;
    const TensorId w0 = *chain.w[l];
    const TensorId w1 = copy.tensor(w0, ".v1");
    LayerChainIds& second = versions[1];
    second.w[l] = w1;
    second.forward[l] = copy.op(chain.forward[l], ".v1", w0, w1);
    if (chain.save[l])
      second.save[l] = copy.op(*chain.save[l], ".v1", w0, w1);
    second.backward[l] = copy.op(chain.backward[l], ".v1", w0, w1);
    if (chain.update[l]) {
      versions[0].update[l] = copy.op(*chain.update[l], ".to_v1", w0, w0, w1);
      second.update[l] = copy.op(*chain.update[l], ".v1.to_v0", w0, w1, w0);
    }
  }
  return versions;
}

} // namespace memsim::harmony
