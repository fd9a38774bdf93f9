// Layer chains at microbatch sizes other than the trace's, as plan extras (microbatch_chain.hpp).
#include "microbatch_chain.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <map>

namespace memsim::harmony {
namespace {

bool per_model(TensorKind kind)
{
  return kind == TensorKind::weight || kind == TensorKind::weight_grad || kind == TensorKind::optimizer_state;
}

} // namespace

LayerChainIds chain_at_microbatch(const Trace& trace, const LayerChainIds& trace_chain, const LayerProfile& profile,
                                  int microbatch, Plan& plan)
{
  if (microbatch == trace.source.batch)
    return trace_chain;
  const Trace sized = layer_chain_trace(profile, microbatch);
  const LayerChainIds sized_chain = layer_chain_ids(sized, "layer profile");
  if (sized_chain.layers() != trace_chain.layers())
    throw InputError("profile", fmt::format("the profile has {} layers, the trace {}", sized_chain.layers(),
                                            trace_chain.layers()));
  // Weights, gradients and optimizer state map to the trace's tensors of the same name; the rest become extras.
  std::map<std::string, TensorId> trace_tensors;
  for (const Tensor& tensor : trace.tensors)
    trace_tensors.emplace(tensor.name, tensor.id);
  std::vector<TensorId> mapped(sized.tensors.size());
  for (const Tensor& tensor : sized.tensors) {
    if (per_model(tensor.kind)) {
      mapped[static_cast<std::size_t>(tensor.id)] = trace_tensors.at(tensor.name);
      continue;
    }
    Tensor extra = tensor;
    extra.id = static_cast<TensorId>(trace.tensors.size() + plan.extra_tensors.size());
    extra.name = fmt::format("{}@u{}", tensor.name, microbatch);
    mapped[static_cast<std::size_t>(tensor.id)] = extra.id;
    plan.extra_tensors.push_back(std::move(extra));
  }
  std::map<OpId, OpId> ops;
  for (const Op& op : sized.ops) {
    if (op.phase == Phase::update)
      continue; // the trace's update ops serve every size
    Op extra = op;
    extra.id = static_cast<OpId>(trace.ops.size() + plan.extra_ops.size());
    extra.name = fmt::format("{}@u{}", op.name, microbatch);
    for (TensorId& id : extra.inputs)
      id = mapped[static_cast<std::size_t>(id)];
    for (TensorId& id : extra.outputs)
      id = mapped[static_cast<std::size_t>(id)];
    ops.emplace(op.id, extra.id);
    plan.extra_ops.push_back(std::move(extra));
  }
  const auto tensor = [&](TensorId id) { return mapped[static_cast<std::size_t>(id)]; };
  const auto optional_tensor = [&](const std::optional<TensorId>& id) {
    return id ? std::optional{tensor(*id)} : std::nullopt;
  };
  LayerChainIds chain = trace_chain;
  chain.loss = tensor(sized_chain.loss);
  for (std::size_t l = 0; l < chain.layers(); ++l) {
    chain.x[l] = tensor(sized_chain.x[l]);
    chain.dx[l] = optional_tensor(sized_chain.dx[l]);
    chain.saved[l] = optional_tensor(sized_chain.saved[l]);
    chain.forward[l] = ops.at(sized_chain.forward[l]);
    chain.backward[l] = ops.at(sized_chain.backward[l]);
    chain.save[l] = sized_chain.save[l] ? std::optional{ops.at(*sized_chain.save[l])} : std::nullopt;
  }
  return chain;
}

void check_trace_of_profile(const Trace& trace, const LayerProfile& profile, const std::string& option)
{
  const int u = static_cast<int>(trace.source.batch);
  const Trace expected = layer_chain_trace(profile, u);
  const auto mismatch = [&](const std::string& what) {
    throw InputError(option, fmt::format("trace '{}' is not this profile's layer chain at its batch {} ({}); generate "
                                         "it with memsim gen layer-chain --profile <this profile> --microbatch {}",
                                         trace.name, u, what, u));
  };
  if (expected.tensors.size() != trace.tensors.size() || expected.ops.size() != trace.ops.size())
    mismatch(fmt::format("{} tensors and {} ops, expected {} and {}", trace.tensors.size(), trace.ops.size(),
                         expected.tensors.size(), expected.ops.size()));
  for (std::size_t i = 0; i < trace.tensors.size(); ++i)
    if (trace.tensors[i].name != expected.tensors[i].name || trace.tensors[i].bytes != expected.tensors[i].bytes)
      mismatch(fmt::format("tensor {} '{}' of {} bytes, expected '{}' of {}", i, trace.tensors[i].name,
                           trace.tensors[i].bytes, expected.tensors[i].name, expected.tensors[i].bytes));
  for (std::size_t i = 0; i < trace.ops.size(); ++i)
    if (trace.ops[i].name != expected.ops[i].name || trace.ops[i].time_s != expected.ops[i].time_s)
      mismatch(fmt::format("op {} '{}' of {} s, expected '{}' of {} s", i, trace.ops[i].name, trace.ops[i].time_s,
                           expected.ops[i].name, expected.ops[i].time_s));
}

} // namespace memsim::harmony
