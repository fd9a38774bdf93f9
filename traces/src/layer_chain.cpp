// A layer profile at one microbatch size as a trace of fused per-layer ops (layer_chain.hpp).
#include "memsim/traces/layer_chain.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

namespace memsim {
namespace {

class ChainBuilder {
public:
  explicit ChainBuilder(Trace& trace) : trace_(&trace) {}

  TensorId tensor(std::string name, std::uint64_t bytes, TensorKind kind)
  {
    Tensor tensor;
    tensor.id = static_cast<TensorId>(trace_->tensors.size());
    tensor.name = std::move(name);
    tensor.bytes = bytes;
    tensor.kind = kind;
    trace_->tensors.push_back(std::move(tensor));
    return trace_->tensors.back().id;
  }

  Op& op(std::string name, Phase phase, int layer, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
         double time_s)
  {
    Op op;
    op.id = static_cast<OpId>(trace_->ops.size());
    op.name = std::move(name);
    op.type = "layer";
    op.phase = phase;
    op.layer = layer;
    op.inputs = std::move(inputs);
    op.outputs = std::move(outputs);
    op.time_s = time_s;
    trace_->ops.push_back(std::move(op));
    return trace_->ops.back();
  }

  std::uint64_t bytes(const std::vector<TensorId>& ids) const
  {
    std::uint64_t total = 0;
    for (TensorId id : ids)
      total += trace_->tensor(id).bytes;
    return total;
  }

private:
  Trace* trace_;
};

std::uint64_t workspace(std::int64_t peak, std::uint64_t resident)
{
  return peak > 0 && static_cast<std::uint64_t>(peak) > resident ? static_cast<std::uint64_t>(peak) - resident : 0;
}

std::vector<TensorId> present(std::initializer_list<std::optional<TensorId>> ids)
{
  std::vector<TensorId> result;
  for (const auto& id : ids)
    if (id)
      result.push_back(*id);
  return result;
}

} // namespace

Trace layer_chain_trace(const LayerProfile& profile, int microbatch)
{
  const std::size_t R = profile.num_layers();
  if (R == 0)
    throw InputError(profile.model, "the layer profile has no layers");
  const int u = microbatch;
  // Evaluated first so that an unsampled u fails before anything is built.
  (void)profile.time_s(LayerPass::forward, u, 0);
  (void)profile.time_s(LayerPass::backward, u, 0);

  Trace trace;
  trace.name = profile.model;
  trace.source.tool = "memsim gen layer-chain";
  trace.source.device = "profile";
  trace.source.dtype = "fp32";
  trace.source.batch = u;
  ChainBuilder build(trace);

  std::vector<TensorId> x;
  std::vector<std::optional<TensorId>> w(R), dw(R), k(R), dx(R);
  for (std::size_t l = 0; l < R; ++l) {
    const ProfiledLayer& layer = profile.layers[l];
    x.push_back(build.tensor(fmt::format("x.{}", l), profile.input_bytes(u, l),
                             l == 0 ? TensorKind::input : TensorKind::activation));
    const std::uint64_t weights = layer.weight_bytes + layer.buffer_bytes;
    if (weights > 0)
      w[l] = build.tensor(fmt::format("w.{}", l), weights, TensorKind::weight);
    if (layer.weight_bytes > 0) {
      dw[l] = build.tensor(fmt::format("dw.{}", l), weights, TensorKind::weight_grad);
      if (layer.optimizer_state_bytes > 0)
        k[l] = build.tensor(fmt::format("k.{}", l), layer.optimizer_state_bytes, TensorKind::optimizer_state);
    }
    if (l > 0)
      dx[l] = build.tensor(fmt::format("dx.{}", l), profile.input_bytes(u, l), TensorKind::gradient);
  }
  // The loss: what the last layer writes (Harmony's X after the last layer is 0 bytes; a scalar here).
  const TensorId loss = build.tensor("loss", 4, TensorKind::activation);
  const auto output = [&](std::size_t l) { return l + 1 < R ? x[l + 1] : loss; };
  const auto output_gradient = [&](std::size_t l) { return l + 1 < R ? dx[l + 1] : std::optional<TensorId>{}; };

  // The activations autograd saves in layer l: the rest of its backward peak once X, W, Y, dY, dX and dW are
  // counted. A zero-time op of the backward (save.l) makes them, so the forward alone (Harmony's FWD task) does not
  // hold them, and a backward pack holds every layer's peak at once, as Harmony's pack memory assumes.
  std::vector<std::optional<TensorId>> saved(R);
  for (std::size_t l = 0; l < R; ++l) {
    const std::uint64_t resident = build.bytes(present({x[l], w[l], output(l), output_gradient(l), dx[l], dw[l]}));
    const std::uint64_t bytes = workspace(profile.peak_bytes(LayerPass::backward, u, l), resident);
    if (bytes > 0)
      saved[l] = build.tensor(fmt::format("s.{}", l), bytes, TensorKind::activation);
  }
  for (std::size_t l = 0; l < R; ++l) {
    const std::vector<TensorId> inputs = present({x[l], w[l]});
    const std::vector<TensorId> outputs{output(l)};
    Op& op = build.op(fmt::format("fwd.{}", l), Phase::forward, static_cast<int>(l), inputs, outputs,
                      profile.time_s(LayerPass::forward, u, l));
    op.workspace_bytes =
        workspace(profile.peak_bytes(LayerPass::forward, u, l), build.bytes(inputs) + build.bytes(outputs));
  }
  for (std::size_t back = 0; back < R; ++back) {
    const std::size_t l = R - 1 - back;
    const std::vector<TensorId> inputs = present({x[l], w[l], output(l), saved[l], output_gradient(l)});
    const std::vector<TensorId> outputs = present({dx[l], dw[l]});
    const double time = profile.time_s(LayerPass::backward, u, l) - profile.time_s(LayerPass::forward, u, l);
    if (saved[l])
      build.op(fmt::format("save.{}", l), Phase::backward, static_cast<int>(l), present({x[l], w[l]}), {*saved[l]}, 0);
    build.op(fmt::format("bwd.{}", l), Phase::backward, static_cast<int>(l), inputs, outputs, std::max(0.0, time));
  }
  for (std::size_t l = 0; l < R; ++l) {
    if (!dw[l])
      continue;
    Op& op = build.op(fmt::format("upd.{}", l), Phase::update, static_cast<int>(l), present({w[l], dw[l], k[l]}), {},
                      profile.layers[l].cpu_update_s);
    op.cpu_time_s = profile.layers[l].cpu_update_s;
  }
  validate_trace(trace, "layer-chain");
  return trace;
}

} // namespace memsim

namespace memsim {

LayerChainIds layer_chain_ids(const Trace& trace, const std::string& source)
{
  std::map<std::string, TensorId> tensors;
  for (const Tensor& tensor : trace.tensors)
    tensors.emplace(tensor.name, tensor.id);
  std::map<std::string, OpId> ops;
  for (const Op& op : trace.ops)
    ops.emplace(op.name, op.id);
  const auto find = [](const auto& names, const std::string& name) {
    const auto it = names.find(name);
    return it == names.end() ? std::nullopt : std::optional{it->second};
  };
  LayerChainIds ids;
  for (std::size_t l = 0;; ++l) {
    const auto x = find(tensors, fmt::format("x.{}", l));
    if (!x)
      break;
    const auto forward = find(ops, fmt::format("fwd.{}", l));
    const auto backward = find(ops, fmt::format("bwd.{}", l));
    if (!forward || !backward)
      throw InputError(source, fmt::format("not a layer-chain trace (memsim gen layer-chain): layer {} lacks its "
                                           "fwd.{} or bwd.{} op",
                                           l, l, l));
    ids.x.push_back(*x);
    ids.forward.push_back(*forward);
    ids.backward.push_back(*backward);
    ids.w.push_back(find(tensors, fmt::format("w.{}", l)));
    ids.dw.push_back(find(tensors, fmt::format("dw.{}", l)));
    ids.k.push_back(find(tensors, fmt::format("k.{}", l)));
    ids.dx.push_back(l > 0 ? find(tensors, fmt::format("dx.{}", l)) : std::nullopt);
    ids.update.push_back(find(ops, fmt::format("upd.{}", l)));
    ids.saved.push_back(find(tensors, fmt::format("s.{}", l)));
    ids.save.push_back(find(ops, fmt::format("save.{}", l)));
    if (ids.saved.back().has_value() != ids.save.back().has_value())
      throw InputError(source, fmt::format("not a layer-chain trace: s.{} and save.{} come together", l, l));
  }
  const auto loss = find(tensors, "loss");
  if (ids.x.empty() || !loss)
    throw InputError(source, "not a layer-chain trace (memsim gen layer-chain): no x.0 or no loss tensor");
  ids.loss = *loss;
  for (std::size_t l = 1; l < ids.layers(); ++l)
    if (!ids.dx[l])
      throw InputError(source, fmt::format("not a layer-chain trace: no gradient dx.{}", l));
  return ids;
}

} // namespace memsim
