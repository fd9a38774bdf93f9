// VGG, ResNet (bottleneck) and Inception-v4 as analytic traces, layer by layer as torchvision (VGG, ResNet) and the
// Inception-v4 paper (Szegedy et al. 2016, Figs. 3-9) build them. One chain layer per VGG conv or fc, per ResNet
// block and per Inception module (its branches inside the layer), so that chain planners see a chain.
#include "memsim/traces/model_presets.hpp"

#include "memsim/common/error.hpp"
#include "trace_builder.hpp"

#include <fmt/format.h>

#include <numeric>

namespace memsim {

namespace {

const SplitDims kConvSplit{"batch", "channel"};
const SplitDims kMapSplit{"batch", "channel", "spatial"}; // ops on NCHW maps: H splits too (TSPLIT's "length")

// A feature map: the activation and its channels x height x width.
struct Map {
  TensorId id = 0;
  std::int64_t c = 0, h = 0, w = 0;
};

struct Conv {
  std::int64_t out = 0;
  std::int64_t kh = 1, kw = 1;
  std::int64_t stride = 1;
  std::int64_t ph = 0, pw = 0; // padding
};

// Conv(k, stride, "same" padding for odd kernels).
Conv same(std::int64_t out, std::int64_t kh, std::int64_t kw, std::int64_t stride = 1)
{
  return Conv{out, kh, kw, stride, kh / 2, kw / 2};
}
Conv valid(std::int64_t out, std::int64_t k, std::int64_t stride = 1) { return Conv{out, k, k, stride, 0, 0}; }

// CNN layers on a TraceBuilder; `layer` is the chain layer the next ops go to.
class CnnBuilder {
public:
  CnnBuilder(TraceBuilder& builder, std::int64_t batch) : b_(builder), batch_(batch) {}

  int layer = 0;

  Map conv(const std::string& name, const Map& x, const Conv& c, bool bias)
  {
    const std::int64_t h = (x.h + 2 * c.ph - c.kh) / c.stride + 1;
    const std::int64_t w = (x.w + 2 * c.pw - c.kw) / c.stride + 1;
    std::vector<TensorId> inputs{x.id, b_.weight(name + ".w", {c.out, x.c, c.kh, c.kw}, layer)};
    if (bias)
      inputs.push_back(b_.weight(name + ".b", {c.out}, layer));
    const double outputs = static_cast<double>(batch_ * c.out * h * w);
    const double out_bytes = outputs * static_cast<double>(b_.element_bytes());
    // Workspace as the cnn generator assumes it: a quarter of the output, at most 256 MB.
    return {b_.forward(name, "conv2d", layer, inputs, {batch_, c.out, h, w},
                       2 * outputs * static_cast<double>(x.c * c.kh * c.kw), kMapSplit, std::min(out_bytes / 4, 256e6)),
            c.out, h, w};
  }
  // Batch statistics: splits along channels only. Weight: scale and shift per channel (running stats are buffers).
  Map batchnorm(const std::string& name, const Map& x)
  {
    TensorId weight = b_.weight(name + ".w", {2, x.c}, layer);
    return like(x, b_.forward(name, "batchnorm", layer, {x.id, weight}, shape(x), 8 * elements(x), {"channel"}));
  }
  Map relu(const std::string& name, const Map& x)
  {
    return like(x, b_.forward(name, "relu", layer, {x.id}, shape(x), elements(x), kMapSplit));
  }
  // conv (no bias) - BN - ReLU, Inception's and ResNet's unit.
  Map conv_bn_relu(const std::string& name, const Map& x, const Conv& c)
  {
    return relu(name + ".relu", batchnorm(name + ".bn", conv(name, x, c, false)));
  }
  Map pool(const std::string& name, const std::string& type, const Map& x, std::int64_t k, std::int64_t stride,
           std::int64_t pad)
  {
    const Map out{0, x.c, (x.h + 2 * pad - k) / stride + 1, (x.w + 2 * pad - k) / stride + 1};
    return like(out, b_.forward(name, type, layer, {x.id}, shape(out), elements(out) * static_cast<double>(k * k),
                                kMapSplit));
  }
  Map add(const std::string& name, const Map& x, const Map& y)
  {
    return like(x, b_.forward(name, "add", layer, {x.id, y.id}, shape(x), elements(x), kMapSplit));
  }
  Map concat(const std::string& name, const std::vector<Map>& parts)
  {
    std::vector<TensorId> inputs;
    Map out{0, 0, parts.front().h, parts.front().w};
    for (const Map& part : parts) {
      inputs.push_back(part.id);
      out.c += part.c;
    }
    return like(out, b_.forward(name, "concat", layer, inputs, shape(out), elements(out), {"batch", "spatial"}));
  }
  // Global average pool to batch x channels.
  Map global_pool(const std::string& name, const Map& x)
  {
    return {b_.forward(name, "avgpool2d", layer, {x.id}, {batch_, x.c}, elements(x), kConvSplit), x.c, 1, 1};
  }
  // Fully connected with bias on batch x features (a feature map is flattened).
  Map linear(const std::string& name, const Map& x, std::int64_t out)
  {
    const std::int64_t in = x.c * x.h * x.w;
    TensorId w = b_.weight(name + ".w", {out, in}, layer);
    TensorId bias = b_.weight(name + ".b", {out}, layer);
    return {b_.forward(name, "linear", layer, {x.id, w, bias}, {batch_, out},
                       2.0 * static_cast<double>(batch_ * in * out), kConvSplit),
            out, 1, 1};
  }
  void loss(const Map& logits)
  {
    TensorId labels = b_.input("labels", {batch_}, 8);
    b_.loss({logits.id}, labels, layer, {"batch"});
  }
  Map images(std::int64_t size) { return {b_.input("images", {batch_, 3, size, size}), 3, size, size}; }

private:
  Shape shape(const Map& x) const { return {batch_, x.c, x.h, x.w}; }
  double elements(const Map& x) const { return static_cast<double>(batch_ * x.c * x.h * x.w); }
  static Map like(Map shape, TensorId id)
  {
    shape.id = id;
    return shape;
  }

  TraceBuilder& b_;
  std::int64_t batch_;
};

struct Sizes {
  std::int64_t batch = 0;
  std::int64_t image = 0;
};

Sizes sizes(const PresetSpec& spec, const ModelPreset& preset, std::int64_t default_image)
{
  return {spec.batch > 0 ? spec.batch : preset.batch, spec.image > 0 ? spec.image : default_image};
}

std::string knob_suffix(const PresetSpec& spec)
{
  std::string suffix;
  if (spec.width != 1.0)
    suffix += fmt::format("-w{}", spec.width);
  if (spec.depth != 1.0)
    suffix += fmt::format("-d{}", spec.depth);
  return suffix;
}

TraceBuilder builder_for(const PresetSpec& spec, const ModelPreset& preset, std::int64_t batch, std::int64_t size,
                         const Roofline& roofline)
{
  return TraceBuilder(fmt::format("{}{}-b{}-{}", preset.name, knob_suffix(spec), batch, size), spec.dtype,
                      static_cast<int>(batch), roofline);
}

} // namespace

Trace generate_vgg(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline)
{
  const auto [batch, size] = sizes(spec, preset, 224);
  TraceBuilder builder = builder_for(spec, preset, batch, size, roofline);
  CnnBuilder net(builder, batch);
  Map x = net.images(size);
  const std::int64_t widths[] = {64, 128, 256, 512, 512};
  for (std::size_t stage = 0; stage < preset.blocks.size(); ++stage) {
    const std::int64_t convs = scaled(preset.blocks[stage], spec.depth);
    for (std::int64_t i = 0; i < convs; ++i, ++net.layer) {
      const std::string name = fmt::format("l{}.conv", net.layer);
      x = net.conv(name, x, same(scaled(widths[stage], spec.width), 3, 3), true);
      if (preset.batchnorm)
        x = net.batchnorm(name + ".bn", x);
      x = net.relu(name + ".relu", x);
      if (i + 1 == convs)
        x = net.pool(name + ".pool", "maxpool2d", x, 2, 2, 0);
    }
  }
  const std::int64_t hidden = scaled(4096, spec.width);
  for (int fc = 0; fc < 2; ++fc, ++net.layer)
    x = net.relu(fmt::format("l{}.fc.relu", net.layer), net.linear(fmt::format("l{}.fc", net.layer), x, hidden));
  net.loss(net.linear(fmt::format("l{}.fc", net.layer), x, 1000));
  builder.backward_and_update();
  return builder.finish();
}

Trace generate_resnet(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline)
{
  const auto [batch, size] = sizes(spec, preset, 224);
  TraceBuilder builder = builder_for(spec, preset, batch, size, roofline);
  CnnBuilder net(builder, batch);
  Map x = net.conv_bn_relu("l0.stem", net.images(size), same(scaled(64, spec.width), 7, 7, 2));
  x = net.pool("l0.stem.pool", "maxpool2d", x, 3, 2, 1);
  ++net.layer;
  for (std::size_t stage = 0; stage < preset.blocks.size(); ++stage) {
    const std::int64_t width = scaled(64 << stage, spec.width);
    const std::int64_t blocks = scaled(preset.blocks[stage], spec.depth);
    for (std::int64_t i = 0; i < blocks; ++i, ++net.layer) {
      // torchvision's v1.5 bottleneck: the stride sits on the 3x3 conv; the first block of a stage projects.
      const std::string p = fmt::format("l{}", net.layer);
      const std::int64_t stride = i == 0 && stage > 0 ? 2 : 1;
      Map y = net.conv_bn_relu(p + ".conv1", x, same(width, 1, 1));
      y = net.conv_bn_relu(p + ".conv2", y, same(width, 3, 3, stride));
      y = net.batchnorm(p + ".conv3.bn", net.conv(p + ".conv3", y, same(4 * width, 1, 1), false));
      Map skip = x; // projected after the main path, in torchvision's order
      if (i == 0)
        skip = net.batchnorm(p + ".down.bn", net.conv(p + ".down", x, Conv{4 * width, 1, 1, stride, 0, 0}, false));
      x = net.relu(p + ".relu", net.add(p + ".add", y, skip));
    }
  }
  const std::string p = fmt::format("l{}", net.layer);
  net.loss(net.linear(p + ".fc", net.global_pool(p + ".pool", x), 1000));
  builder.backward_and_update();
  return builder.finish();
}

namespace {

// Inception-v4's modules (Szegedy et al. 2016, Figs. 3-8), widths times `k` (the width knob).
class Inception {
public:
  Inception(CnnBuilder& net, double width) : net_(net), k_(width) {}

  std::int64_t c(std::int64_t channels) const { return scaled(channels, k_); }

  Map unit(const std::string& name, const Map& x, const Conv& conv) { return net_.conv_bn_relu(name, x, conv); }

  Map stem(Map x)
  {
    const std::string p = prefix();
    x = unit(p + ".c1", x, valid(c(32), 3, 2));
    x = unit(p + ".c2", x, valid(c(32), 3));
    x = unit(p + ".c3", x, same(c(64), 3, 3));
    x = net_.concat(p + ".cat1",
                    {net_.pool(p + ".p1", "maxpool2d", x, 3, 2, 0), unit(p + ".c4", x, valid(c(96), 3, 2))});
    Map left = unit(p + ".c5b", unit(p + ".c5a", x, same(c(64), 1, 1)), valid(c(96), 3));
    Map right = unit(p + ".c6a", x, same(c(64), 1, 1));
    right = unit(p + ".c6b", right, same(c(64), 7, 1));
    right = unit(p + ".c6c", right, same(c(64), 1, 7));
    right = unit(p + ".c6d", right, valid(c(96), 3));
    x = net_.concat(p + ".cat2", {left, right});
    x = net_.concat(p + ".cat3",
                    {unit(p + ".c7", x, valid(c(192), 3, 2)), net_.pool(p + ".p2", "maxpool2d", x, 3, 2, 0)});
    return next(x);
  }
  Map block_a(const Map& x)
  {
    const std::string p = prefix();
    Map pool = unit(p + ".b0", net_.pool(p + ".pool", "avgpool2d", x, 3, 1, 1), same(c(96), 1, 1));
    Map one = unit(p + ".b1", x, same(c(96), 1, 1));
    Map two = unit(p + ".b2b", unit(p + ".b2a", x, same(c(64), 1, 1)), same(c(96), 3, 3));
    Map three = unit(p + ".b3a", x, same(c(64), 1, 1));
    three = unit(p + ".b3c", unit(p + ".b3b", three, same(c(96), 3, 3)), same(c(96), 3, 3));
    return next(net_.concat(p + ".cat", {pool, one, two, three}));
  }
  Map reduction_a(const Map& x)
  {
    const std::string p = prefix();
    Map pool = net_.pool(p + ".pool", "maxpool2d", x, 3, 2, 0);
    Map one = unit(p + ".b1", x, valid(c(384), 3, 2));
    Map two = unit(p + ".b2b", unit(p + ".b2a", x, same(c(192), 1, 1)), same(c(224), 3, 3));
    two = unit(p + ".b2c", two, valid(c(256), 3, 2));
    return next(net_.concat(p + ".cat", {pool, one, two}));
  }
  Map block_b(const Map& x)
  {
    const std::string p = prefix();
    Map pool = unit(p + ".b0", net_.pool(p + ".pool", "avgpool2d", x, 3, 1, 1), same(c(128), 1, 1));
    Map one = unit(p + ".b1", x, same(c(384), 1, 1));
    Map two = unit(p + ".b2a", x, same(c(192), 1, 1));
    two = unit(p + ".b2c", unit(p + ".b2b", two, same(c(224), 1, 7)), same(c(256), 7, 1));
    Map three = unit(p + ".b3a", x, same(c(192), 1, 1));
    three = unit(p + ".b3c", unit(p + ".b3b", three, same(c(192), 1, 7)), same(c(224), 7, 1));
    three = unit(p + ".b3e", unit(p + ".b3d", three, same(c(224), 1, 7)), same(c(256), 7, 1));
    return next(net_.concat(p + ".cat", {pool, one, two, three}));
  }
  Map reduction_b(const Map& x)
  {
    const std::string p = prefix();
    Map pool = net_.pool(p + ".pool", "maxpool2d", x, 3, 2, 0);
    Map one = unit(p + ".b1b", unit(p + ".b1a", x, same(c(192), 1, 1)), valid(c(192), 3, 2));
    Map two = unit(p + ".b2a", x, same(c(256), 1, 1));
    two = unit(p + ".b2c", unit(p + ".b2b", two, same(c(256), 1, 7)), same(c(320), 7, 1));
    two = unit(p + ".b2d", two, valid(c(320), 3, 2));
    return next(net_.concat(p + ".cat", {pool, one, two}));
  }
  Map block_c(const Map& x)
  {
    const std::string p = prefix();
    Map pool = unit(p + ".b0", net_.pool(p + ".pool", "avgpool2d", x, 3, 1, 1), same(c(256), 1, 1));
    Map one = unit(p + ".b1", x, same(c(256), 1, 1));
    Map two = unit(p + ".b2", x, same(c(384), 1, 1));
    Map three = unit(p + ".b3a", x, same(c(384), 1, 1));
    three = unit(p + ".b3c", unit(p + ".b3b", three, same(c(448), 3, 1)), same(c(512), 1, 3));
    return next(net_.concat(
        p + ".cat", {pool, one, unit(p + ".b2x", two, same(c(256), 1, 3)), unit(p + ".b2y", two, same(c(256), 3, 1)),
                     unit(p + ".b3x", three, same(c(256), 1, 3)), unit(p + ".b3y", three, same(c(256), 3, 1))}));
  }

private:
  std::string prefix() const { return fmt::format("l{}", net_.layer); }
  Map next(const Map& x)
  {
    ++net_.layer;
    return x;
  }

  CnnBuilder& net_;
  double k_;
};

} // namespace

Trace generate_inception_v4(const PresetSpec& spec, const ModelPreset& preset, const Roofline& roofline)
{
  const auto [batch, size] = sizes(spec, preset, 299);
  TraceBuilder builder = builder_for(spec, preset, batch, size, roofline);
  CnnBuilder net(builder, batch);
  Inception inception(net, spec.width);
  Map x = inception.stem(net.images(size));
  for (std::int64_t i = 0; i < scaled(preset.blocks[0], spec.depth); ++i)
    x = inception.block_a(x);
  x = inception.reduction_a(x);
  for (std::int64_t i = 0; i < scaled(preset.blocks[1], spec.depth); ++i)
    x = inception.block_b(x);
  x = inception.reduction_b(x);
  for (std::int64_t i = 0; i < scaled(preset.blocks[2], spec.depth); ++i)
    x = inception.block_c(x);
  const std::string p = fmt::format("l{}", net.layer);
  net.loss(net.linear(p + ".fc", net.global_pool(p + ".pool", x), 1000));
  builder.backward_and_update();
  return builder.finish();
}

} // namespace memsim
