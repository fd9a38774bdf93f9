#pragma once
// Builds an analytic training iteration: the caller records forward ops; the builder derives the loss, the backward
// pass (reverse order, gradients accumulated with an add when a tensor feeds several ops, a tied weight included)
// and an Adam update per weight. Every tensor gets its shape (batch axis 0 for batch-proportional ones), every op
// its flops, bytes, roofline time and the dimensions it may be split along.
#include "memsim/traces/generators.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace memsim {

using Shape = std::vector<std::int64_t>;
using SplitDims = std::vector<std::string>;

class TraceBuilder {
public:
  TraceBuilder(std::string name, std::string dtype, int batch, const Roofline& roofline);

  // A tensor of `shape` whose elements take `element_bytes` (0: the trace's dtype).
  TensorId tensor(std::string name, Shape shape, std::optional<int> batch_axis, TensorKind kind,
                  std::size_t element_bytes = 0);
  // A batch-proportional input (batch axis 0).
  TensorId input(std::string name, Shape shape, std::size_t element_bytes = 0)
  {
    return tensor(std::move(name), std::move(shape), 0, TensorKind::input, element_bytes);
  }
  // A weight (no batch axis) updated by Adam; `layer` is the layer of its update op.
  TensorId weight(const std::string& name, Shape shape, int layer);
  // The weight named `name`, made by the first call (as weight()); later calls (other iterations) get the same one.
  TensorId shared_weight(const std::string& name, Shape shape, int layer);

  // A forward op: reads `inputs` (activations and weights), produces one activation of `output_shape` (batch axis 0).
  TensorId forward(const std::string& name, const std::string& type, int layer, const std::vector<TensorId>& inputs,
                   Shape output_shape, double flops, SplitDims split, double workspace = 0);
  // A forward op whose output has no batch axis (a parameter-shaped value computed in the graph, e.g. an unrolled
  // optimizer step's parameters).
  TensorId forward_unbatched(const std::string& name, const std::string& type, int layer,
                             const std::vector<TensorId>& inputs, Shape output_shape, double flops, SplitDims split);
  // From now on no gradient flows into `activation` (PyTorch's detach): ops that reach the loss only through it
  // get no backward op.
  void stop_gradient(TensorId activation) { stopped_.insert(activation); }

  // The loss reads the predictions and the labels, produces the loss and each prediction's gradient.
  void loss(const std::vector<TensorId>& predictions, TensorId labels, int layer, SplitDims split);
  void backward_and_update();

  // Multi-iteration traces (dynamic networks): ops recorded from now on belong to iteration `iteration`, their
  // names and those of the tensors they make (not weights or optimizer state) start with "it<k>.". Weights and
  // Adam moments are one tensor each, shared by every iteration; gradients are per iteration.
  void begin_iteration(int iteration);
  // A control-flow decision taken in the current iteration (the trace's `decisions`).
  void decide(std::string choice);

  const Tensor& tensor_at(TensorId id) const { return trace_.tensor(id); }
  std::size_t element_bytes() const { return element_bytes_; }
  Trace finish();

private:
  TensorId record_forward(const std::string& name, const std::string& type, int layer,
                          const std::vector<TensorId>& inputs, Shape output_shape, std::optional<int> batch_axis,
                          double flops, SplitDims split, double workspace);
  void add_op(const std::string& name, const std::string& type, Phase phase, int layer, std::vector<TensorId> inputs,
              std::vector<TensorId> outputs, double flops, double workspace, SplitDims split);
  // `name` without the current iteration's prefix (names made from other tensors' names get it once).
  std::string base_name(const std::string& name) const;
  // The name of the next partial gradient of `of`: "grad.X", then "grad.part.X", "grad.part2.X", ...
  std::string partial_name(TensorId of);
  // A gradient for `of` (same shape and batch axis), named after it.
  TensorId gradient_like(const std::string& name, TensorId of, TensorKind kind);
  // Adds `partial` into the gradient already recorded for `of` (an add op) or records it as the first one.
  void accumulate(std::map<TensorId, TensorId>& gradients, TensorId of, TensorId partial, int layer,
                  const SplitDims& split);

  Trace trace_;
  Roofline roofline_;
  std::size_t element_bytes_ = 4;
  std::vector<std::size_t> forward_ops_;
  std::map<TensorId, TensorId> grad_of_;        // activation -> its gradient so far
  std::map<TensorId, TensorId> weight_grad_of_; // weight -> its gradient so far
  std::vector<TensorId> updated_weights_;       // in the order their first gradient appears: the updates' order
  std::map<TensorId, int> layer_of_weight_;
  std::set<TensorId> stopped_; // activations no gradient flows into
  std::map<std::string, TensorId> shared_weights_;
  std::map<TensorId, std::pair<TensorId, TensorId>> adam_moments_; // weight -> (m, v), made at its first update
  std::map<TensorId, int> partials_of_;                            // partial gradients made so far, per tensor (names)
  std::map<TensorId, int> sums_of_;                                // gradient sums made so far, per tensor (names)
  int iteration_ = 0;
  std::string prefix_; // "it<k>." in a multi-iteration trace
};

// One training iteration's forward pass and loss of the transformer stack (generate_transformer; var-bert records
// one per iteration with its own sequence length, the weights shared). Checks: check_transformer.
void check_transformer(const TransformerSpec& spec);
void record_transformer_iteration(TraceBuilder& builder, const TransformerSpec& spec);
// One pre-norm encoder layer (layernorm, attention, projection, residual, layernorm, 4x MLP, residual) over `x`
// ({batch, seq, hidden} of `spec`): its ops are named "<op_prefix>.<op>", its weights "<weight_prefix>.<name>"
// (shared: a second call with the same weight prefix reuses them). Returns the layer's output.
TensorId record_transformer_layer(TraceBuilder& builder, const TransformerSpec& spec, TensorId x, int layer,
                                  const std::string& op_prefix, const std::string& weight_prefix);

} // namespace memsim
