#include "memsim/traces/views.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace memsim {

std::vector<TensorLifetime> default_lifetimes(const Trace& trace)
{
  std::vector<TensorLifetime> lifetimes(trace.tensors.size());
  for (const Op& op : trace.ops) {
    for (TensorId id : op.inputs)
      lifetimes[static_cast<std::size_t>(id)].last_use = op.id;
    for (TensorId id : op.outputs)
      lifetimes[static_cast<std::size_t>(id)].produced_by = op.id;
  }
  for (const Tensor& tensor : trace.tensors) {
    TensorLifetime& lifetime = lifetimes[static_cast<std::size_t>(tensor.id)];
    if (is_initially_resident(tensor.kind))
      continue; // lives throughout
    if (tensor.free_after) {
      lifetime.released_after = std::max(*tensor.free_after, lifetime.last_use.value_or(*tensor.free_after));
    } else if (lifetime.last_use) {
      lifetime.released_after = lifetime.last_use;
    } else if (tensor.kind != TensorKind::weight_grad && lifetime.produced_by) {
      // Produced and never read: the framework drops it right away. Weight gradients are the iteration's
      // result and stay until the end.
      lifetime.released_after = lifetime.produced_by;
    }
  }
  return lifetimes;
}

ChainView chain_view(const Trace& trace)
{
  ChainView view;
  std::vector<int> producer_layer(trace.tensors.size(), -1);
  std::vector<Phase> producer_phase(trace.tensors.size(), Phase::forward);
  int max_layer = -1;
  int previous_forward_layer = 0;
  for (const Op& op : trace.ops) {
    if (op.phase != Phase::forward)
      continue;
    if (op.layer < previous_forward_layer)
      throw Infeasible(fmt::format("not a chain: forward op {} '{}' of layer {} comes after layer {}", op.id, op.name,
                                   op.layer, previous_forward_layer));
    if (op.layer > max_layer + 1)
      throw Infeasible(fmt::format("not a chain: forward op {} '{}' starts layer {} but layer {} has no forward op",
                                   op.id, op.name, op.layer, max_layer + 1));
    previous_forward_layer = op.layer;
    max_layer = std::max(max_layer, op.layer);
  }
  if (max_layer < 0)
    throw Infeasible("not a chain: the trace has no forward op");
  view.layers.resize(static_cast<std::size_t>(max_layer + 1));
  for (std::size_t l = 0; l < view.layers.size(); ++l)
    view.layers[l].layer = static_cast<int>(l);

  std::vector<std::set<TensorId>> crossing(view.layers.size()); // tensors of layer l read by layer l+1
  for (const Tensor& tensor : trace.tensors)
    if (is_initially_resident(tensor.kind))
      view.resident_bytes += tensor.bytes;
  std::set<TensorId> network_inputs;
  for (const Op& op : trace.ops) {
    const bool in_range = op.layer >= 0 && op.layer <= max_layer;
    switch (op.phase) {
    case Phase::forward: {
      ChainLayer& layer = view.layers[static_cast<std::size_t>(op.layer)];
      layer.forward_ops.push_back(op.id);
      layer.forward_time_s += op.time_s;
      for (TensorId id : op.inputs) {
        const Tensor& tensor = trace.tensor(id);
        if (tensor.kind == TensorKind::input && op.layer == 0)
          network_inputs.insert(id);
        int from = producer_layer[static_cast<std::size_t>(id)];
        if (from < 0 || from == op.layer)
          continue;
        if (from != op.layer - 1)
          throw Infeasible(fmt::format("not a chain: op {} '{}' (layer {}) reads {} {} '{}' of layer {} (an edge that "
                                       "skips layers)",
                                       op.id, op.name, op.layer, to_string(tensor.kind), id, tensor.name, from));
        crossing[static_cast<std::size_t>(from)].insert(id);
      }
      for (TensorId id : op.outputs) {
        producer_layer[static_cast<std::size_t>(id)] = op.layer;
        producer_phase[static_cast<std::size_t>(id)] = Phase::forward;
      }
      break;
    }
    case Phase::loss: view.loss_ops.push_back(op.id); break;
    case Phase::update: view.update_ops.push_back(op.id); break;
    case Phase::backward:
      if (!in_range)
        throw Infeasible(fmt::format("not a chain: backward op {} '{}' has layer {} but the forward has layers 0..{}",
                                     op.id, op.name, op.layer, max_layer));
      view.layers[static_cast<std::size_t>(op.layer)].backward_ops.push_back(op.id);
      view.layers[static_cast<std::size_t>(op.layer)].backward_time_s += op.time_s;
      break;
    }
    if (op.phase != Phase::forward)
      for (TensorId id : op.outputs)
        producer_phase[static_cast<std::size_t>(id)] = op.phase;
  }
  for (TensorId id : network_inputs)
    view.input_bytes += trace.tensor(id).bytes;

  // Which forward-produced tensors are read after the forward phase (saved for backward or read by the loss)?
  std::vector<bool> read_later(trace.tensors.size(), false);
  for (const Op& op : trace.ops)
    if (op.phase != Phase::forward)
      for (TensorId id : op.inputs)
        read_later[static_cast<std::size_t>(id)] = true;

  for (std::size_t l = 0; l < view.layers.size(); ++l) {
    ChainLayer& layer = view.layers[l];
    if (crossing[l].size() > 1)
      throw Infeasible(fmt::format("not a chain: layer {} passes {} tensors to layer {} (a chain passes one)", l + 1,
                                   crossing[l].size(), l));
    if (!crossing[l].empty()) {
      layer.output_tensor = *crossing[l].begin();
    } else if (l + 1 == view.layers.size()) {
      // The last layer's output is what the loss reads: its last forward-produced tensor read later.
      for (auto it = layer.forward_ops.rbegin(); it != layer.forward_ops.rend() && layer.output_tensor < 0; ++it)
        for (TensorId id : trace.op(*it).outputs)
          if (read_later[static_cast<std::size_t>(id)]) {
            layer.output_tensor = id;
            break;
          }
    } else {
      throw Infeasible(fmt::format("not a chain: layer {} reads nothing produced by layer {}", l + 1, l));
    }
    if (layer.output_tensor >= 0)
      layer.output_bytes = trace.tensor(layer.output_tensor).bytes;
    std::uint64_t transient = 0;
    std::uint64_t forward_workspace = 0;
    for (OpId id : layer.forward_ops) {
      const Op& op = trace.op(id);
      forward_workspace = std::max(forward_workspace, op.workspace_bytes);
      for (TensorId out : op.outputs) {
        if (read_later[static_cast<std::size_t>(out)] || out == layer.output_tensor) {
          layer.saved_tensors.push_back(out);
          layer.saved_bytes += trace.tensor(out).bytes;
        } else {
          transient += trace.tensor(out).bytes;
        }
      }
    }
    if (layer.output_tensor >= 0 && std::find(layer.saved_tensors.begin(), layer.saved_tensors.end(),
                                              layer.output_tensor) == layer.saved_tensors.end()) {
      layer.saved_tensors.push_back(layer.output_tensor);
      layer.saved_bytes += layer.output_bytes;
    }
    layer.forward_overhead = transient + forward_workspace;
    std::uint64_t backward_transient = 0;
    std::uint64_t backward_workspace = 0;
    for (OpId id : layer.backward_ops) {
      const Op& op = trace.op(id);
      backward_workspace = std::max(backward_workspace, op.workspace_bytes);
      for (TensorId out : op.outputs)
        if (trace.tensor(out).kind != TensorKind::weight_grad)
          backward_transient += trace.tensor(out).bytes;
    }
    layer.backward_overhead = backward_transient + backward_workspace;
  }
  return view;
}

} // namespace memsim
