#include "memsim/traces/generators.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace memsim {

std::size_t dtype_bytes(const std::string& dtype)
{
  if (dtype == "fp32")
    return 4;
  if (dtype == "fp16" || dtype == "bf16")
    return 2;
  throw InputError("--dtype", fmt::format("unknown dtype '{}' (valid: fp32, fp16, bf16)", dtype));
}

namespace {

// Records forward ops, then derives the backward pass (reverse order, gradients accumulated with an add when an
// activation feeds several ops), the loss and an Adam update per weight.
class TraceBuilder {
public:
  TraceBuilder(std::string name, std::string dtype, int batch, const Roofline& roofline) : roofline_(roofline)
  {
    trace_.name = std::move(name);
    trace_.source = TraceSource{"memsim gen", roofline.device_model, std::move(dtype), batch, ""};
  }

  TensorId tensor(std::string name, double bytes, TensorKind kind)
  {
    Tensor tensor;
    tensor.id = static_cast<TensorId>(trace_.tensors.size());
    tensor.name = std::move(name);
    tensor.bytes = static_cast<std::uint64_t>(bytes);
    tensor.kind = kind;
    trace_.tensors.push_back(tensor);
    return tensor.id;
  }

  // A forward op: reads `inputs` (activations and weights), produces one output.
  TensorId forward(const std::string& name, const std::string& type, int layer, std::vector<TensorId> inputs,
                   double output_bytes, double flops, double workspace = 0)
  {
    TensorId output = tensor(name + ".out", output_bytes, TensorKind::activation);
    add_op(name, type, Phase::forward, layer, unique(inputs), {output}, flops, workspace);
    forward_ops_.push_back(trace_.ops.size() - 1);
    return output;
  }

  // The loss reads the prediction and the labels and produces the loss and its gradient.
  void loss(TensorId prediction, TensorId labels, int layer)
  {
    const double bytes = static_cast<double>(trace_.tensor(prediction).bytes);
    TensorId value = tensor("loss", 4, TensorKind::other);
    TensorId gradient = tensor("grad." + trace_.tensor(prediction).name, bytes, TensorKind::gradient);
    add_op("loss", "cross_entropy", Phase::loss, layer, {prediction, labels}, {value, gradient}, 4 * bytes, 0);
    grad_of_[prediction] = gradient;
  }

  void backward_and_update()
  {
    for (auto it = forward_ops_.rbegin(); it != forward_ops_.rend(); ++it) {
      const Op forward = trace_.ops[*it];
      TensorId output = forward.outputs.front();
      auto upstream = grad_of_.find(output);
      if (upstream == grad_of_.end())
        continue; // does not reach the loss
      std::vector<TensorId> inputs{upstream->second};
      std::vector<TensorId> outputs;
      std::vector<std::pair<TensorId, TensorId>> partials; // (activation, its new partial gradient)
      for (TensorId in : forward.inputs) {
        const Tensor& source = trace_.tensor(in);
        inputs.push_back(in);
        if (source.kind == TensorKind::weight) {
          TensorId grad = tensor("grad." + source.name, static_cast<double>(source.bytes), TensorKind::weight_grad);
          outputs.push_back(grad);
          weight_grads_.emplace_back(in, grad);
        } else if (source.kind == TensorKind::activation) {
          TensorId grad = tensor(fmt::format("grad{}.{}", grad_of_.count(in) ? ".part" : "", source.name),
                                 static_cast<double>(source.bytes), TensorKind::gradient);
          outputs.push_back(grad);
          partials.emplace_back(in, grad);
        }
      }
      add_op(forward.name + ".bwd", forward.type + "_backward", Phase::backward, forward.layer, unique(inputs), outputs,
             2 * forward.flops.value_or(0), forward.workspace_bytes);
      for (auto [activation, partial] : partials) {
        auto existing = grad_of_.find(activation);
        if (existing == grad_of_.end()) {
          grad_of_[activation] = partial;
          continue;
        }
        const double bytes = static_cast<double>(trace_.tensor(activation).bytes);
        TensorId sum = tensor("grad.sum." + trace_.tensor(activation).name, bytes, TensorKind::gradient);
        add_op("accumulate." + trace_.tensor(activation).name, "add", Phase::backward, forward.layer,
               {existing->second, partial}, {sum}, bytes / static_cast<double>(element_bytes()), 0);
        existing->second = sum;
      }
    }
    for (auto [weight, grad] : weight_grads_) {
      // Copies, not references: tensor() grows trace_.tensors and would leave a reference dangling.
      const std::string weight_name = trace_.tensor(weight).name;
      const double bytes = static_cast<double>(trace_.tensor(weight).bytes);
      TensorId m = tensor("adam.m." + weight_name, bytes, TensorKind::optimizer_state);
      TensorId v = tensor("adam.v." + weight_name, bytes, TensorKind::optimizer_state);
      // In-place update of the weight and its moments: reads only, no new tensor.
      add_op("adam." + weight_name, "adam", Phase::update, layer_of_weight_.at(weight), {weight, grad, m, v}, {},
             10 * bytes / static_cast<double>(element_bytes()), 0);
    }
  }

  TensorId weight(const std::string& name, double bytes, int layer)
  {
    TensorId id = tensor(name, bytes, TensorKind::weight);
    layer_of_weight_[id] = layer;
    return id;
  }

  std::size_t element_bytes() const { return dtype_bytes(trace_.source.dtype); }
  Trace finish()
  {
    validate_trace(trace_, trace_.name);
    return std::move(trace_);
  }

private:
  static std::vector<TensorId> unique(std::vector<TensorId> ids)
  {
    std::vector<TensorId> result;
    for (TensorId id : ids)
      if (std::find(result.begin(), result.end(), id) == result.end())
        result.push_back(id);
    return result;
  }

  void add_op(const std::string& name, const std::string& type, Phase phase, int layer, std::vector<TensorId> inputs,
              std::vector<TensorId> outputs, double flops, double workspace)
  {
    Op op;
    op.id = static_cast<OpId>(trace_.ops.size());
    op.name = name;
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
    const double compute = roofline_.peak_flops > 0 ? flops / roofline_.peak_flops : 0;
    const double memory = roofline_.hbm_bandwidth > 0 ? bytes / roofline_.hbm_bandwidth : 0;
    op.time_s = std::max(compute, memory) + roofline_.launch_s;
    trace_.ops.push_back(std::move(op));
  }

  Trace trace_;
  Roofline roofline_;
  std::vector<std::size_t> forward_ops_;
  std::map<TensorId, TensorId> grad_of_;
  std::vector<std::pair<TensorId, TensorId>> weight_grads_;
  std::map<TensorId, int> layer_of_weight_;
};

void check_positive(int value, const char* name)
{
  if (value <= 0)
    throw InputError(fmt::format("--{}", name), fmt::format("must be positive, found {}", value));
}

} // namespace

Trace generate_cnn(const CnnSpec& spec, const Roofline& roofline)
{
  check_positive(spec.depth, "depth");
  check_positive(spec.image, "image");
  check_positive(spec.batch, "batch");
  check_positive(spec.classes, "classes");
  if (!(spec.channel_scale > 0))
    throw InputError("--channels", "channel scale must be positive");
  const double e = static_cast<double>(dtype_bytes(spec.dtype));
  const double batch = spec.batch;
  TraceBuilder builder(fmt::format("{}{}-b{}-{}", spec.residual ? "resnet" : "vgg", spec.depth, spec.batch, spec.image),
                       spec.dtype, spec.batch, roofline);
  double channels = 3;
  double size = spec.image;
  TensorId x = builder.tensor("images", batch * channels * size * size * e, TensorKind::input);
  TensorId labels = builder.tensor("labels", batch * 8, TensorKind::input);
  // Five stages as in VGG/ResNet: widths 64..512 (times the scale), spatial size halved after each stage.
  const int stages = std::min(5, spec.depth);
  int layer = 0;
  for (int stage = 0; stage < stages; ++stage) {
    const int per_stage = spec.depth / stages + (stage < spec.depth % stages ? 1 : 0);
    const double width = std::max(1.0, std::round(64.0 * std::min(8.0, std::pow(2.0, stage)) * spec.channel_scale));
    for (int i = 0; i < per_stage; ++i, ++layer) {
      const std::string prefix = fmt::format("l{}", layer);
      const double pixels = batch * size * size;
      auto conv = [&](const std::string& name, TensorId input, double in_channels, double kernel) {
        TensorId w = builder.weight(prefix + "." + name + ".w", in_channels * width * kernel * kernel * e, layer);
        const double out_bytes = pixels * width * e;
        return builder.forward(prefix + "." + name, "conv2d", layer, {input, w}, out_bytes,
                               2 * pixels * width * in_channels * kernel * kernel, std::min(out_bytes / 4, 256e6));
      };
      const double act_bytes = pixels * width * e;
      if (!spec.residual) {
        TensorId y = conv("conv", x, channels, 3);
        x = builder.forward(prefix + ".relu", "relu", layer, {y}, act_bytes, pixels * width);
      } else {
        TensorId skip = x;
        if (channels != width)
          skip = conv("proj", x, channels, 1);
        TensorId a = conv("conv1", x, channels, 3);
        TensorId r = builder.forward(prefix + ".relu1", "relu", layer, {a}, act_bytes, pixels * width);
        const double saved_channels = channels;
        channels = width;
        TensorId b = conv("conv2", r, width, 3);
        (void)saved_channels;
        TensorId sum = builder.forward(prefix + ".add", "add", layer, {b, skip}, act_bytes, pixels * width);
        x = builder.forward(prefix + ".relu2", "relu", layer, {sum}, act_bytes, pixels * width);
      }
      channels = width;
      if (i + 1 == per_stage && size >= 2) {
        size = std::floor(size / 2);
        x = builder.forward(prefix + ".pool", "maxpool2d", layer, {x}, batch * channels * size * size * e,
                            batch * channels * size * size * 4);
      }
    }
  }
  // Classifier: global average pool folded into the fc input, then one fc layer.
  const double features = channels * size * size;
  TensorId w = builder.weight(fmt::format("l{}.fc.w", layer), features * spec.classes * e, layer);
  TensorId logits = builder.forward(fmt::format("l{}.fc", layer), "linear", layer, {x, w}, batch * spec.classes * e,
                                    2 * batch * features * spec.classes);
  builder.loss(logits, labels, layer);
  builder.backward_and_update();
  return builder.finish();
}

Trace generate_transformer(const TransformerSpec& spec, const Roofline& roofline)
{
  check_positive(spec.layers, "layers");
  check_positive(spec.hidden, "hidden");
  check_positive(spec.heads, "heads");
  check_positive(spec.seq, "seq");
  check_positive(spec.batch, "batch");
  if (spec.hidden % spec.heads != 0)
    throw InputError("--heads", fmt::format("hidden ({}) must be a multiple of heads ({})", spec.hidden, spec.heads));
  const double e = static_cast<double>(dtype_bytes(spec.dtype));
  const double b = spec.batch, s = spec.seq, h = spec.hidden, a = spec.heads;
  const double tokens = b * s;
  TraceBuilder builder(fmt::format("transformer-l{}-h{}-s{}-b{}", spec.layers, spec.hidden, spec.seq, spec.batch),
                       spec.dtype, spec.batch, roofline);
  int layer = 0;
  TensorId labels = builder.tensor("labels", tokens * 8, TensorKind::input);
  TensorId x;
  if (spec.vocab > 0) {
    TensorId token_ids = builder.tensor("tokens", tokens * 8, TensorKind::input);
    TensorId embedding = builder.weight("embedding.w", spec.vocab * h * e, layer);
    x = builder.forward("embedding", "embedding", layer, {token_ids, embedding}, tokens * h * e, tokens * h);
    ++layer;
  } else {
    x = builder.tensor("hidden_states", tokens * h * e, TensorKind::input);
  }
  for (int l = 0; l < spec.layers; ++l, ++layer) {
    const std::string p = fmt::format("l{}", layer);
    auto weight = [&](const std::string& name, double elements) { return builder.weight(p + "." + name, elements * e, layer); };
    TensorId ln1 = builder.forward(p + ".ln1", "layernorm", layer, {x, weight("ln1.w", 2 * h)}, tokens * h * e, 8 * tokens * h);
    TensorId qkv = builder.forward(p + ".qkv", "matmul", layer, {ln1, weight("qkv.w", 3 * h * h)}, 3 * tokens * h * e,
                                   2 * tokens * h * 3 * h);
    TensorId scores = builder.forward(p + ".scores", "bmm", layer, {qkv}, b * a * s * s * e, 2 * b * s * s * h);
    TensorId probs = builder.forward(p + ".softmax", "softmax", layer, {scores}, b * a * s * s * e, 5 * b * a * s * s);
    TensorId context = builder.forward(p + ".context", "bmm", layer, {probs, qkv}, tokens * h * e, 2 * b * s * s * h);
    TensorId proj = builder.forward(p + ".proj", "matmul", layer, {context, weight("proj.w", h * h)}, tokens * h * e,
                                    2 * tokens * h * h);
    TensorId res1 = builder.forward(p + ".add1", "add", layer, {x, proj}, tokens * h * e, tokens * h);
    TensorId ln2 = builder.forward(p + ".ln2", "layernorm", layer, {res1, weight("ln2.w", 2 * h)}, tokens * h * e, 8 * tokens * h);
    TensorId fc1 = builder.forward(p + ".fc1", "matmul", layer, {ln2, weight("fc1.w", 4 * h * h)}, 4 * tokens * h * e,
                                   2 * tokens * h * 4 * h);
    TensorId gelu = builder.forward(p + ".gelu", "gelu", layer, {fc1}, 4 * tokens * h * e, 8 * tokens * h);
    TensorId fc2 = builder.forward(p + ".fc2", "matmul", layer, {gelu, weight("fc2.w", 4 * h * h)}, tokens * h * e,
                                   2 * tokens * 4 * h * h);
    x = builder.forward(p + ".add2", "add", layer, {res1, fc2}, tokens * h * e, tokens * h);
  }
  if (spec.vocab > 0) {
    TensorId head = builder.weight("lm_head.w", h * spec.vocab * e, layer);
    x = builder.forward("lm_head", "matmul", layer, {x, head}, tokens * spec.vocab * e, 2 * tokens * h * spec.vocab);
  }
  builder.loss(x, labels, std::max(0, layer - (spec.vocab > 0 ? 0 : 1)));
  builder.backward_and_update();
  return builder.finish();
}

} // namespace memsim
