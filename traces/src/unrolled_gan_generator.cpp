// unrolled-gan (Metz et al., DyNN-Offload Table II "UGAN"): the discriminator unrolled a drawn number of SGD steps
// inside the generator's graph.
#include "memsim/traces/dynamic_generators.hpp"

#include "dynamic_common.hpp"

#include <vector>

namespace memsim {
using namespace dynamic; // the dynamic generators' shared draws and checks

namespace {

constexpr std::int64_t kDataDims = 2; // the circular-gaussian toy data: points in the plane

struct Mlp {
  std::vector<Shape> shapes; // weight i: {in, out}
};

// An MLP's widths: `layers` hidden layers of `hidden`, from `in` to `out`.
Mlp mlp(std::int64_t in, std::int64_t hidden, std::int64_t out, int layers)
{
  Mlp net;
  std::int64_t width = in;
  for (int i = 0; i < layers; ++i) {
    net.shapes.push_back({width, hidden});
    width = hidden;
  }
  net.shapes.push_back({width, out});
  return net;
}

double elements(const Shape& shape)
{
  double count = 1;
  for (std::int64_t extent : shape)
    count *= static_cast<double>(extent);
  return count;
}

struct MlpForward {
  std::vector<TensorId> inputs;   // layer i's input: x, then the relu outputs
  std::vector<TensorId> pre_relu; // layer i's linear output (i < layers)
  TensorId output = 0;            // the last linear's
};

// linear, relu, ..., linear over `x` ({rows, in}) with `params` (one per layer).
MlpForward record_mlp(TraceBuilder& builder, const std::string& prefix, const Mlp& net,
                      const std::vector<TensorId>& params, TensorId x, std::int64_t rows)
{
  MlpForward run;
  const double r = static_cast<double>(rows);
  for (std::size_t i = 0; i < net.shapes.size(); ++i) {
    const Shape& shape = net.shapes[i];
    run.inputs.push_back(x);
    const TensorId linear = builder.forward(fmt::format("{}.l{}", prefix, i), "linear", static_cast<int>(i),
                                            {x, params[i]}, {rows, shape[1]}, 2 * r * elements(shape), kBatch);
    if (i + 1 == net.shapes.size()) {
      run.output = linear;
      break;
    }
    run.pre_relu.push_back(linear);
    x = builder.forward(fmt::format("{}.relu{}", prefix, i), "relu", static_cast<int>(i), {linear}, {rows, shape[1]},
                        r * static_cast<double>(shape[1]), kBatch);
  }
  return run;
}

} // namespace

Trace generate_unrolled_gan(const UnrolledGanSpec& spec, const Roofline& roofline)
{
  check_at_least(spec.iterations, 1, "iterations");
  check_at_least(spec.min_unroll, 1, "min-unroll");
  check_range(spec.min_unroll, spec.max_unroll, "min-unroll", "max-unroll");
  check_at_least(spec.layers, 0, "layers");
  check_positive({{spec.hidden, "hidden"}, {spec.noise, "noise"}, {spec.batch, "batch"}});
  const std::int64_t b = spec.batch;
  const double bd = static_cast<double>(b);
  TraceBuilder builder(fmt::format("unrolled-gan-l{}-h{}-b{}-unroll{}-{}-seed{}", spec.layers, spec.hidden, spec.batch,
                                   spec.min_unroll, spec.max_unroll, spec.seed),
                       spec.dtype, spec.batch, roofline);
  const Mlp generator = mlp(spec.noise, spec.hidden, kDataDims, spec.layers);
  const Mlp discriminator = mlp(kDataDims, spec.hidden, 1, spec.layers);
  std::vector<TensorId> generator_weights, discriminator_weights;
  for (std::size_t i = 0; i < generator.shapes.size(); ++i)
    generator_weights.push_back(builder.weight(fmt::format("g.l{}.w", i), generator.shapes[i], static_cast<int>(i)));
  for (std::size_t i = 0; i < discriminator.shapes.size(); ++i)
    discriminator_weights.push_back(builder.weight(fmt::format("d.l{}.w", i), discriminator.shapes[i],
                                                   static_cast<int>(i)));
  SeededDraws draws(spec.seed);
  for (int k = 0; k < spec.iterations; ++k) {
    const int unroll = draws.between(spec.min_unroll, spec.max_unroll);
    builder.begin_iteration(k);
    const TensorId noise = builder.input("noise", {b, spec.noise});
    const TensorId real = builder.input("real", {b, kDataDims});
    const TensorId labels = builder.input("labels", {b}, 8);
    const TensorId fake = record_mlp(builder, "g", generator, generator_weights, noise, b).output;
    // The discriminator's batch: the real points, then the generated ones.
    const TensorId both =
        builder.forward("d.batch", "concat", 0, {real, fake}, {2 * b, kDataDims}, 2 * bd * kDataDims, kBatch);
    std::vector<TensorId> params = discriminator_weights;
    for (int j = 0; j < unroll; ++j) {
      builder.decide(fmt::format("unroll{}", j));
      const std::string p = fmt::format("u{}", j);
      const MlpForward run = record_mlp(builder, p + ".d", discriminator, params, both, 2 * b);
      // Its loss's gradient, then back through the layers in the graph (create_graph=True), then an SGD step: the
      // next step's parameters are values of this graph, so the generator's loss differentiates through them.
      TensorId upstream = builder.forward(p + ".dloss", "bce_grad", 0, {run.output}, {2 * b, 1}, 4 * 2 * bd, kBatch);
      std::vector<TensorId> next(params.size());
      for (std::size_t i = params.size(); i-- > 0;) {
        const Shape& shape = discriminator.shapes[i];
        const TensorId grad =
            builder.forward_unbatched(fmt::format("{}.l{}.wgrad", p, i), "linear_wgrad", static_cast<int>(i),
                                      {run.inputs[i], upstream}, shape, 2 * 2 * bd * elements(shape), kBatch);
        if (i > 0)
          upstream = builder.forward(fmt::format("{}.l{}.dgrad", p, i), "linear_relu_dgrad", static_cast<int>(i),
                                     {upstream, params[i], run.pre_relu[i - 1]}, {2 * b, shape[0]},
                                     2 * 2 * bd * elements(shape), kBatch);
        next[i] = builder.forward_unbatched(fmt::format("{}.l{}.sgd", p, i), "sgd_step", static_cast<int>(i),
                                            {params[i], grad}, shape, 2 * elements(shape), {"channel"});
      }
      params = std::move(next);
    }
    // The generator's loss: the last unrolled discriminator on the generated points.
    const TensorId judged = record_mlp(builder, "d", discriminator, params, fake, b).output;
    builder.loss({judged}, labels, spec.layers, kBatch);
    builder.backward_and_update();
  }
  return builder.finish();
}

} // namespace memsim
