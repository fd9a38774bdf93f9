#pragma once
// Small traces built in code for tests: exact sizes and times, so expected answers can be worked out by hand.
#include "memsim/traces/trace.hpp"

#include <algorithm>
#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

namespace memsim::test {

// An N-layer chain: layer l has one forward op (type `type`, reads the previous activation and weight w_l, writes
// activation a_l of `activation_bytes`) and one backward op (reads grad of a_l, a_{l-1} and w_l; writes grad of
// a_{l-1} and the weight gradient). A loss op between them. Forward ops take `forward_s`, backward `2*forward_s`.
inline Trace make_chain(int layers, std::uint64_t activation_bytes, double forward_s = 0.001,
                        const std::string& type = "conv2d", std::uint64_t weight_bytes = 1000)
{
  Trace trace;
  trace.name = fmt::format("chain{}", layers);
  trace.source = TraceSource{"test", "test-gpu", "fp32", 1, ""};
  auto tensor = [&](std::string name, std::uint64_t bytes, TensorKind kind) {
    trace.tensors.push_back(
        Tensor{static_cast<TensorId>(trace.tensors.size()), std::move(name), bytes, kind, {}, {}, {}});
    return trace.tensors.back().id;
  };
  auto op = [&](std::string name, std::string op_type, Phase phase, int layer, std::vector<TensorId> in,
                std::vector<TensorId> out, double time) {
    Op o;
    o.id = static_cast<OpId>(trace.ops.size());
    o.name = std::move(name);
    o.type = std::move(op_type);
    o.phase = phase;
    o.layer = layer;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.time_s = time;
    trace.ops.push_back(o);
  };
  TensorId x = tensor("x", activation_bytes, TensorKind::input);
  std::vector<TensorId> acts{x}, weights;
  for (int l = 0; l < layers; ++l) {
    TensorId w = tensor(fmt::format("w{}", l), weight_bytes, TensorKind::weight);
    TensorId a = tensor(fmt::format("a{}", l), activation_bytes, TensorKind::activation);
    op(fmt::format("f{}", l), type, Phase::forward, l, {acts.back(), w}, {a}, forward_s);
    acts.push_back(a);
    weights.push_back(w);
  }
  TensorId grad = tensor(fmt::format("g{}", layers - 1), activation_bytes, TensorKind::gradient);
  op("loss", "loss", Phase::loss, layers - 1, {acts.back()}, {grad}, forward_s);
  for (int l = layers - 1; l >= 0; --l) {
    TensorId wg = tensor(fmt::format("dw{}", l), weight_bytes, TensorKind::weight_grad);
    std::vector<TensorId> outs{wg};
    TensorId next_grad = -1;
    if (l > 0) {
      next_grad = tensor(fmt::format("g{}", l - 1), activation_bytes, TensorKind::gradient);
      outs.push_back(next_grad);
    }
    op(fmt::format("b{}", l), type + "_backward", Phase::backward, l,
       {grad, acts[static_cast<std::size_t>(l)], weights[static_cast<std::size_t>(l)]}, outs, 2 * forward_s);
    grad = next_grad;
  }
  validate_trace(trace, trace.name);
  return trace;
}

// A hand-made graph for policy tests: tensor 0 is x (an input, 1 MB), tensor i > 0 is activation a{i-1} of
// sizes[i-1] bytes; op i ("f{i}", a `linear` of layer i) reads and writes the given tensors in `time_ms`.
struct HandOp {
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  double time_ms = 1;
};

// What a test may change in hand_trace: the input's bytes and which activations are weights instead (constants a
// plan may start on the host).
struct HandTraceShape {
  std::uint64_t x_bytes = 1000000;
  std::vector<TensorId> weights;
};

inline Trace hand_trace(const std::vector<std::uint64_t>& sizes, const std::vector<HandOp>& ops,
                        const HandTraceShape& shape = {})
{
  Trace trace;
  trace.name = "hand";
  trace.source = TraceSource{"test", "test-gpu", "fp32", 1, ""};
  trace.tensors.push_back(Tensor{0, "x", shape.x_bytes, TensorKind::input, {}, {}, {}});
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto id = static_cast<TensorId>(i + 1);
    const bool weight = std::find(shape.weights.begin(), shape.weights.end(), id) != shape.weights.end();
    trace.tensors.push_back(
        Tensor{id, fmt::format("a{}", i), sizes[i], weight ? TensorKind::weight : TensorKind::activation, {}, {}, {}});
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    Op op;
    op.id = static_cast<OpId>(i);
    op.name = fmt::format("f{}", i);
    op.type = "linear";
    op.layer = static_cast<int>(i);
    op.inputs = ops[i].inputs;
    op.outputs = ops[i].outputs;
    op.time_s = ops[i].time_ms * 0.001;
    trace.ops.push_back(op);
  }
  validate_trace(trace, trace.name);
  return trace;
}

// Ops per iteration of a multi-iteration (dynamic) trace.
inline std::map<int, int> ops_per_iteration(const Trace& trace)
{
  std::map<int, int> count;
  for (const Op& op : trace.ops)
    ++count[op.iteration];
  return count;
}

} // namespace memsim::test
