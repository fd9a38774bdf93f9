#include "memsim/traces/generators.hpp"

#include "trace_builder.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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
  TraceBuilder builder(fmt::format("{}{}-b{}-{}", spec.residual ? "resnet" : "vgg", spec.depth, spec.batch, spec.image),
                       spec.dtype, spec.batch, roofline);
  const SplitDims conv_split{"batch", "channel", "spatial"};
  std::int64_t channels = 3;
  std::int64_t size = spec.image;
  const std::int64_t batch = spec.batch;
  TensorId x = builder.input("images", {batch, channels, size, size});
  TensorId labels = builder.input("labels", {batch}, 8);
  // Five stages as in VGG/ResNet: widths 64..512 (times the scale), spatial size halved after each stage.
  const int stages = std::min(5, spec.depth);
  int layer = 0;
  for (int stage = 0; stage < stages; ++stage) {
    const int per_stage = spec.depth / stages + (stage < spec.depth % stages ? 1 : 0);
    const auto width = static_cast<std::int64_t>(
        std::max(1.0, std::round(64.0 * std::min(8.0, std::pow(2.0, stage)) * spec.channel_scale)));
    for (int i = 0; i < per_stage; ++i, ++layer) {
      const std::string prefix = fmt::format("l{}", layer);
      const double pixels = static_cast<double>(batch * size * size);
      const Shape act{batch, width, size, size};
      auto conv = [&](const std::string& name, TensorId input, std::int64_t in_channels, std::int64_t kernel) {
        TensorId w = builder.weight(prefix + "." + name + ".w", {width, in_channels, kernel, kernel}, layer);
        const double out_bytes = pixels * static_cast<double>(width) * e;
        return builder.forward(prefix + "." + name, "conv2d", layer, {input, w}, act,
                               2 * pixels * static_cast<double>(width * in_channels * kernel * kernel), conv_split,
                               std::min(out_bytes / 4, 256e6));
      };
      const double act_elements = pixels * static_cast<double>(width);
      if (!spec.residual) {
        TensorId y = conv("conv", x, channels, 3);
        x = builder.forward(prefix + ".relu", "relu", layer, {y}, act, act_elements, conv_split);
      } else {
        TensorId skip = x;
        if (channels != width)
          skip = conv("proj", x, channels, 1);
        TensorId a = conv("conv1", x, channels, 3);
        TensorId r = builder.forward(prefix + ".relu1", "relu", layer, {a}, act, act_elements, conv_split);
        TensorId b = conv("conv2", r, width, 3);
        TensorId sum = builder.forward(prefix + ".add", "add", layer, {b, skip}, act, act_elements, conv_split);
        x = builder.forward(prefix + ".relu2", "relu", layer, {sum}, act, act_elements, conv_split);
      }
      channels = width;
      if (i + 1 == per_stage && size >= 2) {
        size /= 2;
        x = builder.forward(prefix + ".pool", "maxpool2d", layer, {x}, {batch, channels, size, size},
                            static_cast<double>(batch * channels * size * size * 4), conv_split);
      }
    }
  }
  // Classifier: global average pool folded into the fc input, then one fc layer.
  const std::int64_t features = channels * size * size;
  TensorId w = builder.weight(fmt::format("l{}.fc.w", layer), {spec.classes, features}, layer);
  TensorId logits = builder.forward(fmt::format("l{}.fc", layer), "linear", layer, {x, w}, {batch, spec.classes},
                                    2.0 * static_cast<double>(batch * features * spec.classes), {"batch", "channel"});
  builder.loss({logits}, labels, layer, {"batch"});
  builder.backward_and_update();
  return builder.finish();
}

void check_transformer(const TransformerSpec& spec)
{
  check_positive(spec.layers, "layers");
  check_positive(spec.hidden, "hidden");
  check_positive(spec.heads, "heads");
  check_positive(spec.seq, "seq");
  check_positive(spec.batch, "batch");
  if (spec.hidden % spec.heads != 0)
    throw InputError("--heads", fmt::format("hidden ({}) must be a multiple of heads ({})", spec.hidden, spec.heads));
}

TensorId record_transformer_layer(TraceBuilder& builder, const TransformerSpec& spec, TensorId x, int layer,
                                  const std::string& op_prefix, const std::string& weight_prefix)
{
  const std::int64_t b = spec.batch, s = spec.seq, h = spec.hidden, a = spec.heads;
  const double tokens = static_cast<double>(b * s), hd = static_cast<double>(h), sd = static_cast<double>(s);
  const SplitDims token_split{"batch", "sequence"};
  const SplitDims attention_split{"batch", "sequence", "heads"};
  const std::string& p = op_prefix;
  auto weight = [&](const std::string& name, Shape shape) {
    return builder.shared_weight(weight_prefix + "." + name, std::move(shape), layer);
  };
  TensorId ln1 = builder.forward(p + ".ln1", "layernorm", layer, {x, weight("ln1.w", {2, h})}, {b, s, h},
                                 8 * tokens * hd, token_split);
  TensorId qkv = builder.forward(p + ".qkv", "matmul", layer, {ln1, weight("qkv.w", {h, 3 * h})}, {b, s, 3 * h},
                                 2 * tokens * hd * 3 * hd, token_split);
  TensorId scores =
      builder.forward(p + ".scores", "bmm", layer, {qkv}, {b, a, s, s}, 2 * tokens * sd * hd, attention_split);
  TensorId probs = builder.forward(p + ".softmax", "softmax", layer, {scores}, {b, a, s, s},
                                   5 * tokens * sd * static_cast<double>(a), attention_split);
  TensorId context =
      builder.forward(p + ".context", "bmm", layer, {probs, qkv}, {b, s, h}, 2 * tokens * sd * hd, attention_split);
  TensorId proj = builder.forward(p + ".proj", "matmul", layer, {context, weight("proj.w", {h, h})}, {b, s, h},
                                  2 * tokens * hd * hd, token_split);
  TensorId res1 = builder.forward(p + ".add1", "add", layer, {x, proj}, {b, s, h}, tokens * hd, token_split);
  TensorId ln2 = builder.forward(p + ".ln2", "layernorm", layer, {res1, weight("ln2.w", {2, h})}, {b, s, h},
                                 8 * tokens * hd, token_split);
  TensorId fc1 = builder.forward(p + ".fc1", "matmul", layer, {ln2, weight("fc1.w", {h, 4 * h})}, {b, s, 4 * h},
                                 2 * tokens * hd * 4 * hd, token_split);
  TensorId gelu = builder.forward(p + ".gelu", "gelu", layer, {fc1}, {b, s, 4 * h}, 8 * tokens * hd, token_split);
  TensorId fc2 = builder.forward(p + ".fc2", "matmul", layer, {gelu, weight("fc2.w", {4 * h, h})}, {b, s, h},
                                 2 * tokens * 4 * hd * hd, token_split);
  return builder.forward(p + ".add2", "add", layer, {res1, fc2}, {b, s, h}, tokens * hd, token_split);
}

void record_transformer_iteration(TraceBuilder& builder, const TransformerSpec& spec)
{
  const std::int64_t b = spec.batch, s = spec.seq, h = spec.hidden;
  const double tokens = static_cast<double>(b * s), hd = static_cast<double>(h);
  const SplitDims token_split{"batch", "sequence"};
  int layer = 0;
  TensorId labels = builder.input("labels", {b, s}, 8);
  TensorId x;
  if (spec.vocab > 0) {
    TensorId token_ids = builder.input("tokens", {b, s}, 8);
    TensorId embedding = builder.shared_weight("embedding.w", {spec.vocab, h}, layer);
    x = builder.forward("embedding", "embedding", layer, {token_ids, embedding}, {b, s, h}, tokens * hd, token_split);
    ++layer;
  } else {
    x = builder.input("hidden_states", {b, s, h});
  }
  for (int l = 0; l < spec.layers; ++l, ++layer) {
    const std::string p = fmt::format("l{}", layer);
    x = record_transformer_layer(builder, spec, x, layer, p, p);
  }
  if (spec.vocab > 0) {
    TensorId head = builder.shared_weight("lm_head.w", {h, spec.vocab}, layer);
    x = builder.forward("lm_head", "matmul", layer, {x, head}, {b, s, spec.vocab},
                        2 * tokens * hd * static_cast<double>(spec.vocab), token_split);
  }
  builder.loss({x}, labels, std::max(0, layer - (spec.vocab > 0 ? 0 : 1)), token_split);
}

Trace generate_transformer(const TransformerSpec& spec, const Roofline& roofline)
{
  check_transformer(spec);
  TraceBuilder builder(fmt::format("transformer-l{}-h{}-s{}-b{}", spec.layers, spec.hidden, spec.seq, spec.batch),
                       spec.dtype, spec.batch, roofline);
  record_transformer_iteration(builder, spec);
  builder.backward_and_update();
  return builder.finish();
}

} // namespace memsim
