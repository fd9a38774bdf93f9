#include "ring_trace.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace memsim::planning::mu_two {

Halves halves(const Trace& graph)
{
  Halves result;
  for (const Op& op : graph.ops) {
    const bool forward = op.phase == Phase::forward || op.phase == Phase::loss;
    if (forward && !result.backward.empty())
      throw InputError(graph.name, fmt::format("mu-two: forward op {} '{}' of '{}' comes after the backward started",
                                               op.id, op.name, graph.name));
    (forward ? result.forward : result.backward).push_back(op.id);
  }
  return result;
}

namespace {

class RingBuilder {
public:
  RingBuilder(const std::vector<const Trace*>& graphs, int cycles, RingNames names, RingTrace storage)
      : graphs_(graphs), cycles_(cycles), named_(names == RingNames::named), ring_(std::move(storage))
  {
    // Whatever `storage` held is overwritten: its vectors (and the ops' and tensors' own) only lend their capacity.
    ring_.cycles = cycles;
    ring_.op_origin.clear();
    ring_.tensor_origin.clear();
    ring_.op_graph.clear();
    ring_.cycle_first_op.clear();
    ring_.prologue_ops = 0;
    ring_.trace.decisions.clear();
    const std::size_t copies = static_cast<std::size_t>(cycles) + 1;
    ring_.tensor_copy.resize(graphs.size());
    ring_.op_copy.resize(graphs.size());
    for (std::size_t j = 0; j < graphs.size(); ++j) {
      const Trace* graph = graphs[j];
      halves_.push_back(halves(*graph));
      ring_.tensor_copy[j].resize(graph->tensors.size());
      for (std::vector<TensorId>& slots : ring_.tensor_copy[j])
        slots.assign(copies, -1);
      ring_.op_copy[j].resize(graph->ops.size());
      for (std::vector<OpId>& slots : ring_.op_copy[j])
        slots.assign(copies, -1);
      shared_.emplace_back(graph->tensors.size(), -1);
    }
    // One allocation each: the scheduler builds many rings, and growing these vectors of large ops was a fair share.
    std::size_t ops = 0, tensors = 0;
    for (const Trace* graph : graphs) {
      ops += graph->ops.size();
      tensors += graph->tensors.size();
    }
    ring_.trace.ops.reserve(ops * copies);
    ring_.op_origin.reserve(ops * copies);
    ring_.op_graph.reserve(ops * copies);
    ring_.trace.tensors.reserve(tensors * copies);
    ring_.tensor_origin.reserve(tensors * copies);
    ring_.trace.name = graphs.front()->name;
    ring_.trace.source = graphs.front()->source;
  }

  RingTrace build(const Placement& placement)
  {
    const int m = static_cast<int>(graphs_.size());
    graph_ = -1;
    for (OpId op : halves_[0].forward)
      add_op(0, 0, op, 0);
    ring_.prologue_ops = ops_;
    for (int c = 0; c < cycles_; ++c) {
      ring_.cycle_first_op.push_back(ops_);
      for (int j = 0; j < m; ++j) {
        graph_ = c * m + j;
        const int next = (j + 1) % m;
        const int next_copy = j + 1 < m ? c : c + 1;
        const std::vector<OpId>& backward = halves_[static_cast<std::size_t>(j)].backward;
        const std::vector<OpId>& forward = halves_[static_cast<std::size_t>(next)].forward;
        const std::vector<std::size_t>* before =
            static_cast<std::size_t>(j) < placement.size() ? &placement[static_cast<std::size_t>(j)] : nullptr;
        std::size_t placed = 0;
        for (std::size_t k = 0; k < backward.size(); ++k) {
          const std::size_t want = before && k < before->size() ? std::min((*before)[k], forward.size()) : 0;
          for (; placed < want; ++placed)
            add_op(next, next_copy, forward[placed], c);
          add_op(j, c, backward[k], c);
        }
        for (; placed < forward.size(); ++placed)
          add_op(next, next_copy, forward[placed], c);
      }
    }
    ring_.trace.ops.resize(ops_);
    ring_.trace.tensors.resize(tensors_);
    fix_free_after();
    return std::move(ring_);
  }

private:
  TensorId tensor_of(int j, int copy, TensorId id)
  {
    const Trace& graph = *graphs_[static_cast<std::size_t>(j)];
    const Tensor& source = graph.tensor(id);
    const auto index = static_cast<std::size_t>(id);
    TensorId& slot = is_initially_resident(source.kind)
                         ? shared_[static_cast<std::size_t>(j)][index]
                         : ring_.tensor_copy[static_cast<std::size_t>(j)][index][static_cast<std::size_t>(copy)];
    if (slot >= 0)
      return slot;
    if (tensors_ == ring_.trace.tensors.size())
      ring_.trace.tensors.emplace_back();
    Tensor& tensor = ring_.trace.tensors[tensors_];
    tensor = source; // an assignment: a reused tensor keeps its allocations
    tensor.id = static_cast<TensorId>(tensors_++);
    const bool shared = is_initially_resident(source.kind);
    if (named_)
      tensor.name = shared ? fmt::format("s{}.{}", j, source.name) : fmt::format("s{}.it{}.{}", j, copy, source.name);
    ring_.tensor_origin.push_back({j, shared ? -1 : copy, index});
    slot = tensor.id;
    if (shared)
      for (auto& copies : ring_.tensor_copy[static_cast<std::size_t>(j)][index])
        copies = slot;
    return slot;
  }

  void add_op(int j, int copy, OpId id, int cycle)
  {
    const Op& source = graphs_[static_cast<std::size_t>(j)]->op(id);
    if (ops_ == ring_.trace.ops.size())
      ring_.trace.ops.emplace_back();
    Op& op = ring_.trace.ops[ops_];
    op = source; // an assignment: a reused op keeps its allocations
    op.id = static_cast<OpId>(ops_++);
    if (named_)
      op.name = fmt::format("s{}.it{}.{}", j, copy, source.name);
    op.iteration = cycle;
    for (TensorId& input : op.inputs)
      input = tensor_of(j, copy, input);
    for (TensorId& output : op.outputs)
      output = tensor_of(j, copy, output);
    auto remap = [&](OpId target) {
      const OpId mapped =
          ring_.op_copy[static_cast<std::size_t>(j)][static_cast<std::size_t>(target)][static_cast<std::size_t>(copy)];
      if (mapped < 0)
        throw InputError(source.name,
                         fmt::format("mu-two: op '{}' is derived from op {}, which runs later", source.name, target));
      return mapped;
    };
    if (op.split_of)
      op.split_of->op = remap(op.split_of->op);
    if (op.fused_from)
      op.fused_from->op = remap(op.fused_from->op);
    ring_.op_copy[static_cast<std::size_t>(j)][static_cast<std::size_t>(id)][static_cast<std::size_t>(copy)] = op.id;
    ring_.op_origin.push_back({j, copy, static_cast<std::size_t>(id)});
    ring_.op_graph.push_back(graph_);
  }

  // A tensor's `free_after` names an op of its own iteration; a copy whose op does not run (FW_0's last copy has no
  // backward) drops it. Weight gradients nothing reads (a graph without update ops) are the iteration's result: they
  // live to the end of their iteration's backward, not to the end of the unrolled trace.
  void fix_free_after()
  {
    std::vector<bool> read(ring_.trace.tensors.size(), false);
    for (const Op& op : ring_.trace.ops)
      for (TensorId id : op.inputs)
        read[static_cast<std::size_t>(id)] = true;
    for (Tensor& tensor : ring_.trace.tensors) {
      const Origin& origin = ring_.tensor_origin[static_cast<std::size_t>(tensor.id)];
      const int copy = std::max(origin.copy, 0);
      if (tensor.kind == TensorKind::weight_grad && !tensor.free_after && !read[static_cast<std::size_t>(tensor.id)]) {
        const std::vector<OpId>& backward = halves_[static_cast<std::size_t>(origin.sub_array)].backward;
        const OpId last =
            backward.empty() ? OpId{-1}
                             : ring_.op_copy[static_cast<std::size_t>(origin.sub_array)]
                                            [static_cast<std::size_t>(backward.back())][static_cast<std::size_t>(copy)];
        if (last >= 0)
          tensor.free_after = last;
        continue;
      }
      if (!tensor.free_after)
        continue;
      const OpId mapped = ring_.op_copy[static_cast<std::size_t>(origin.sub_array)]
                                       [static_cast<std::size_t>(*tensor.free_after)][static_cast<std::size_t>(copy)];
      if (mapped >= 0)
        tensor.free_after = mapped;
      else
        tensor.free_after.reset();
    }
  }

  const std::vector<const Trace*>& graphs_;
  int cycles_;
  bool named_;
  RingTrace ring_;
  std::vector<Halves> halves_;
  std::vector<std::vector<TensorId>> shared_;
  int graph_ = -1;          // the merged graph ops are being added to
  std::size_t ops_ = 0;     // ops of ring_.trace.ops built so far (the rest is storage)
  std::size_t tensors_ = 0; // tensors of ring_.trace.tensors built so far
};

} // namespace

RingTrace build_ring_trace(const std::vector<const Trace*>& graphs, int cycles, const Placement& placement,
                           RingNames names, RingTrace storage)
{
  if (graphs.empty() || cycles < 1)
    throw InputError("", "mu-two: a ring needs at least one sub-array and one cycle");
  return RingBuilder(graphs, cycles, names, std::move(storage)).build(placement);
}

} // namespace memsim::planning::mu_two
