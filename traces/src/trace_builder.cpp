#include "trace_builder.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace memsim {

namespace {

// "grad.sum" for the first, then "grad.sum2", "grad.sum3", ...: unique names for tensors read many times.
std::string numbered(const std::string& stem, int count) { return count > 1 ? fmt::format("{}{}", stem, count) : stem; }

std::vector<TensorId> unique(const std::vector<TensorId>& ids)
{
  std::vector<TensorId> result;
  for (TensorId id : ids)
    if (std::find(result.begin(), result.end(), id) == result.end())
      result.push_back(id);
  return result;
}

} // namespace

TraceBuilder::TraceBuilder(std::string name, std::string dtype, int batch, const Roofline& roofline)
    : roofline_(roofline), element_bytes_(dtype_bytes(dtype))
{
  trace_.name = std::move(name);
  trace_.source = TraceSource{"memsim gen", roofline.device_model, std::move(dtype), batch, ""};
}

TensorId TraceBuilder::tensor(std::string name, Shape shape, std::optional<int> batch_axis, TensorKind kind,
                              std::size_t element_bytes)
{
  Tensor tensor;
  tensor.id = static_cast<TensorId>(trace_.tensors.size());
  const bool shared = kind == TensorKind::weight || kind == TensorKind::optimizer_state;
  tensor.name = shared ? std::move(name) : prefix_ + name;
  std::uint64_t elements = 1;
  for (std::int64_t extent : shape)
    elements *= static_cast<std::uint64_t>(extent);
  tensor.bytes = elements * (element_bytes > 0 ? element_bytes : element_bytes_);
  tensor.kind = kind;
  tensor.shape = std::move(shape);
  tensor.batch_axis = batch_axis;
  trace_.tensors.push_back(std::move(tensor));
  return trace_.tensors.back().id;
}

TensorId TraceBuilder::weight(const std::string& name, Shape shape, int layer)
{
  TensorId id = tensor(name, std::move(shape), std::nullopt, TensorKind::weight);
  layer_of_weight_[id] = layer;
  return id;
}

TensorId TraceBuilder::shared_weight(const std::string& name, Shape shape, int layer)
{
  auto known = shared_weights_.find(name);
  if (known != shared_weights_.end())
    return known->second;
  const TensorId id = weight(name, std::move(shape), layer);
  shared_weights_.emplace(name, id);
  return id;
}

TensorId TraceBuilder::forward(const std::string& name, const std::string& type, int layer,
                               const std::vector<TensorId>& inputs, Shape output_shape, double flops, SplitDims split,
                               double workspace)
{
  return record_forward(name, type, layer, inputs, std::move(output_shape), 0, flops, std::move(split), workspace);
}

TensorId TraceBuilder::forward_unbatched(const std::string& name, const std::string& type, int layer,
                                         const std::vector<TensorId>& inputs, Shape output_shape, double flops,
                                         SplitDims split)
{
  return record_forward(name, type, layer, inputs, std::move(output_shape), std::nullopt, flops, std::move(split), 0);
}

TensorId TraceBuilder::record_forward(const std::string& name, const std::string& type, int layer,
                                      const std::vector<TensorId>& inputs, Shape output_shape,
                                      std::optional<int> batch_axis, double flops, SplitDims split, double workspace)
{
  TensorId output = tensor(name + ".out", std::move(output_shape), batch_axis, TensorKind::activation);
  add_op(name, type, Phase::forward, layer, unique(inputs), {output}, flops, workspace, std::move(split));
  forward_ops_.push_back(trace_.ops.size() - 1);
  return output;
}

void TraceBuilder::loss(const std::vector<TensorId>& predictions, TensorId labels, int layer, SplitDims split)
{
  std::vector<TensorId> inputs = predictions;
  inputs.push_back(labels);
  std::vector<TensorId> outputs{tensor("loss", {1}, std::nullopt, TensorKind::other, 4)};
  double bytes = 0;
  for (TensorId prediction : predictions) {
    bytes += static_cast<double>(trace_.tensor(prediction).bytes);
    outputs.push_back(gradient_like("grad." + base_name(trace_.tensor(prediction).name), prediction,
                                    TensorKind::gradient));
    grad_of_[prediction] = outputs.back();
    ++partials_of_[prediction];
  }
  add_op("loss", "cross_entropy", Phase::loss, layer, inputs, outputs, 4 * bytes, 0, std::move(split));
}

TensorId TraceBuilder::gradient_like(const std::string& name, TensorId of, TensorKind kind)
{
  const Tensor source = trace_.tensor(of); // a copy: tensor() grows trace_.tensors
  return tensor(name, source.shape, source.batch_axis, kind);
}

void TraceBuilder::accumulate(std::map<TensorId, TensorId>& gradients, TensorId of, TensorId partial, int layer,
                              const SplitDims& split)
{
  auto existing = gradients.find(of);
  if (existing == gradients.end()) {
    gradients[of] = partial;
    return;
  }
  const std::string name = base_name(trace_.tensor(of).name);
  const TensorKind kind = trace_.tensor(partial).kind;
  TensorId sum = gradient_like(numbered("grad.sum", ++sums_of_[of]) + "." + name, of, kind);
  const double elements = static_cast<double>(trace_.tensor(of).bytes) / static_cast<double>(element_bytes_);
  add_op("accumulate." + name, "add", Phase::backward, layer, {existing->second, partial}, {sum}, elements, 0, split);
  existing->second = sum;
}

void TraceBuilder::backward_and_update()
{
  for (auto it = forward_ops_.rbegin(); it != forward_ops_.rend(); ++it) {
    const Op forward = trace_.ops[*it];
    auto upstream = grad_of_.find(forward.outputs.front());
    if (upstream == grad_of_.end())
      continue; // does not reach the loss
    std::vector<TensorId> inputs{upstream->second};
    std::vector<TensorId> outputs;
    std::vector<std::pair<TensorId, TensorId>> partials;        // (activation, its new partial gradient)
    std::vector<std::pair<TensorId, TensorId>> weight_partials; // (weight, its new partial gradient)
    for (TensorId in : forward.inputs) {
      const Tensor& source = trace_.tensor(in);
      inputs.push_back(in);
      if (source.kind == TensorKind::weight) {
        const bool tied = weight_grad_of_.count(in) > 0;
        TensorId grad = gradient_like(partial_name(in), in, TensorKind::weight_grad);
        outputs.push_back(grad);
        weight_partials.emplace_back(in, grad);
        if (!tied)
          updated_weights_.push_back(in);
      } else if (source.kind == TensorKind::activation && stopped_.count(in) == 0) {
        TensorId grad = gradient_like(partial_name(in), in, TensorKind::gradient);
        outputs.push_back(grad);
        partials.emplace_back(in, grad);
      }
    }
    add_op(base_name(forward.name) + ".bwd", forward.type + "_backward", Phase::backward, forward.layer, unique(inputs),
           outputs, 2 * forward.flops.value_or(0), static_cast<double>(forward.workspace_bytes), forward.split);
    for (auto [activation, partial] : partials)
      accumulate(grad_of_, activation, partial, forward.layer, forward.split);
    for (auto [weight, partial] : weight_partials)
      accumulate(weight_grad_of_, weight, partial, forward.layer, forward.split);
  }
  for (TensorId weight : updated_weights_) {
    const std::string weight_name = trace_.tensor(weight).name;
    auto moments = adam_moments_.find(weight);
    if (moments == adam_moments_.end()) {
      TensorId m = gradient_like("adam.m." + weight_name, weight, TensorKind::optimizer_state);
      TensorId v = gradient_like("adam.v." + weight_name, weight, TensorKind::optimizer_state);
      moments = adam_moments_.emplace(weight, std::pair{m, v}).first;
    }
    const auto [m, v] = moments->second;
    const double elements = static_cast<double>(trace_.tensor(weight).bytes) / static_cast<double>(element_bytes_);
    // In-place update of the weight and its moments: reads only, no new tensor. Elementwise: any axis splits it,
    // the first (output channels) is the one named.
    add_op("adam." + weight_name, "adam", Phase::update, layer_of_weight_.at(weight),
           {weight, weight_grad_of_.at(weight), m, v}, {}, 10 * elements, 0, {"channel"});
  }
}

void TraceBuilder::add_op(const std::string& name, const std::string& type, Phase phase, int layer,
                          std::vector<TensorId> inputs, std::vector<TensorId> outputs, double flops, double workspace,
                          SplitDims split)
{
  Op op;
  op.id = static_cast<OpId>(trace_.ops.size());
  op.name = prefix_ + name;
  op.iteration = iteration_;
  op.type = type;
  op.phase = phase;
  op.layer = layer;
  double bytes = 0;
  for (TensorId id : inputs)
    bytes += static_cast<double>(trace_.tensor(id).bytes);
  for (TensorId id : outputs)
    bytes += static_cast<double>(trace_.tensor(id).bytes);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.flops = flops;
  op.bytes_accessed = bytes;
  op.workspace_bytes = static_cast<std::uint64_t>(workspace);
  op.split = std::move(split);
  const double compute = roofline_.peak_flops > 0 ? flops / roofline_.peak_flops : 0;
  const double memory = roofline_.hbm_bandwidth > 0 ? bytes / roofline_.hbm_bandwidth : 0;
  op.time_s = std::max(compute, memory) + roofline_.launch_s;
  trace_.ops.push_back(std::move(op));
}

std::string TraceBuilder::partial_name(TensorId of)
{
  const int made = partials_of_[of]++;
  const std::string name = base_name(trace_.tensor(of).name);
  return made == 0 ? "grad." + name : numbered("grad.part", made) + "." + name;
}

std::string TraceBuilder::base_name(const std::string& name) const
{
  return name.starts_with(prefix_) ? name.substr(prefix_.size()) : name;
}

void TraceBuilder::begin_iteration(int iteration)
{
  iteration_ = iteration;
  prefix_ = fmt::format("it{}.", iteration);
  forward_ops_.clear();
  grad_of_.clear();
  weight_grad_of_.clear();
  updated_weights_.clear();
  partials_of_.clear();
  sums_of_.clear();
  trace_.decisions.resize(static_cast<std::size_t>(iteration) + 1);
}

void TraceBuilder::decide(std::string choice)
{
  if (trace_.decisions.empty())
    trace_.decisions.resize(1);
  trace_.decisions.back().push_back(std::move(choice));
}

Trace TraceBuilder::finish()
{
  validate_trace(trace_, trace_.name);
  return std::move(trace_);
}

} // namespace memsim
