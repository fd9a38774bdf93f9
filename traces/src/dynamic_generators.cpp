#include "memsim/traces/dynamic_generators.hpp"

#include "dynamic_common.hpp"

#include <algorithm>
#include <vector>

namespace memsim {
using namespace dynamic; // the dynamic generators' shared draws and checks

Trace generate_var_lstm(const VarLstmSpec& spec, const Roofline& roofline)
{
  check_at_least(spec.iterations, 1, "iterations");
  check_at_least(spec.min_len, 1, "min-len");
  check_range(spec.min_len, spec.max_len, "min-len", "max-len");
  check_positive({{spec.batch, "batch"},
                  {spec.hidden, "hidden"},
                  {spec.embed, "embed"},
                  {spec.vocab, "vocab"},
                  {spec.classes, "classes"}});
  const std::int64_t b = spec.batch, h = spec.hidden, e = spec.embed;
  const double bd = static_cast<double>(b), hd = static_cast<double>(h), ed = static_cast<double>(e);
  TraceBuilder builder(fmt::format("var-lstm-h{}-b{}-len{}-{}-seed{}", spec.hidden, spec.batch, spec.min_len,
                                   spec.max_len, spec.seed),
                       spec.dtype, spec.batch, roofline);
  const TensorId embedding = builder.weight("embed.w", {spec.vocab, e}, 0);
  const TensorId lstm_w = builder.weight("lstm.w", {e + h, 4 * h}, 0);
  const TensorId lstm_b = builder.weight("lstm.b", {4 * h}, 0);
  const TensorId classifier = builder.weight("cls.w", {h, spec.classes}, 0);
  SeededDraws draws(spec.seed);
  for (int k = 0; k < spec.iterations; ++k) {
    const int length = draws.between(spec.min_len, spec.max_len);
    builder.begin_iteration(k);
    const TensorId tokens = builder.input("tokens", {b, length}, 8);
    // One lookup for the whole sequence, one select per step (as a PyTorch model indexes it): the lookup's
    // gradient is one dense embed.w gradient per iteration, each select's a sequence-sized partial.
    const TensorId embedded =
        builder.forward("embed", "embedding", 0, {tokens, embedding}, {b, length, e}, bd * length * ed, kBatch);
    const TensorId labels = builder.input("labels", {b}, 8);
    std::optional<TensorId> hidden, cell;
    for (int t = 0; t < length; ++t) {
      builder.decide(fmt::format("step{}", t));
      const std::string p = fmt::format("t{}", t);
      const TensorId x = builder.forward(p + ".select", "select", t, {embedded}, {b, e}, bd * ed, kBatch);
      std::vector<TensorId> gate_inputs{x, lstm_w, lstm_b};
      if (hidden)
        gate_inputs.push_back(*hidden);
      const double gate_in = hidden ? ed + hd : ed; // the first step's h_{-1} is zero
      const TensorId gates =
          builder.forward(p + ".gates", "lstm_gates", t, gate_inputs, {b, 4 * h}, 2 * bd * gate_in * 4 * hd, kBatch);
      std::vector<TensorId> cell_inputs{gates};
      if (cell)
        cell_inputs.push_back(*cell);
      cell = builder.forward(p + ".cell", "lstm_cell", t, cell_inputs, {b, h}, 5 * bd * hd, kBatch);
      hidden = builder.forward(p + ".hidden", "lstm_hidden", t, {gates, *cell}, {b, h}, 3 * bd * hd, kBatch);
    }
    const TensorId logits = builder.forward("cls", "linear", length, {*hidden, classifier}, {b, spec.classes},
                                            2 * bd * hd * spec.classes, kBatch);
    builder.loss({logits}, labels, length, kBatch);
    builder.backward_and_update();
  }
  return builder.finish();
}

Trace generate_tree_lstm(const TreeLstmSpec& spec, const Roofline& roofline)
{
  check_at_least(spec.iterations, 1, "iterations");
  check_at_least(spec.min_leaves, 2, "min-leaves");
  check_range(spec.min_leaves, spec.max_leaves, "min-leaves", "max-leaves");
  check_positive({{spec.batch, "batch"}, {spec.hidden, "hidden"}, {spec.vocab, "vocab"}, {spec.classes, "classes"}});
  const std::int64_t b = spec.batch, h = spec.hidden;
  const double bd = static_cast<double>(b), hd = static_cast<double>(h);
  TraceBuilder builder(fmt::format("tree-lstm-h{}-b{}-leaves{}-{}-seed{}", spec.hidden, spec.batch, spec.min_leaves,
                                   spec.max_leaves, spec.seed),
                       spec.dtype, spec.batch, roofline);
  const TensorId embedding = builder.weight("embed.w", {spec.vocab, h}, 0);
  const TensorId tree_w = builder.weight("tree.w", {2 * h, 5 * h}, 0);
  const TensorId tree_b = builder.weight("tree.b", {5 * h}, 0);
  const TensorId classifier = builder.weight("cls.w", {h, spec.classes}, 0);
  if (spec.shape_noise < 0 || spec.shape_noise > 1)
    throw InputError("--shape-noise", fmt::format("must be in [0, 1], found {}", spec.shape_noise));
  SeededDraws draws(spec.seed);
  // The grammar: a weight per boundary between leaves i and i+1, from its own stream so that it does not depend on
  // the iterations drawn before.
  SeededDraws grammar_draws(spec.seed ^ 0x5eedf00dLL);
  std::vector<double> grammar(static_cast<std::size_t>(spec.max_leaves));
  for (double& weight : grammar)
    weight = grammar_draws.unit();
  struct Node {
    int first = 0, end = 0;       // the leaves it spans
    TensorId hidden = 0;          // h
    std::optional<TensorId> cell; // c (leaves have none: their embedding is h, c = 0)
  };
  for (int k = 0; k < spec.iterations; ++k) {
    const int leaves = draws.between(spec.min_leaves, spec.max_leaves);
    builder.begin_iteration(k);
    const TensorId tokens = builder.input("tokens", {b, leaves}, 8);
    const TensorId embedded =
        builder.forward("embed", "embedding", 0, {tokens, embedding}, {b, leaves, h}, bd * leaves * hd, kBatch);
    const TensorId labels = builder.input("labels", {b}, 8);
    std::vector<Node> frontier;
    for (int i = 0; i < leaves; ++i) {
      const TensorId x =
          builder.forward(fmt::format("leaf{}.select", i), "select", 0, {embedded}, {b, h}, bd * hd, kBatch);
      frontier.push_back(Node{i, i + 1, x, std::nullopt});
    }
    // Merge the best-scoring pair of neighbours until one root is left: leaves - 1 internal nodes.
    for (int node = 0; frontier.size() > 1; ++node) {
      std::size_t pick = 0;
      double best = -1;
      for (std::size_t i = 0; i + 1 < frontier.size(); ++i) {
        const double boundary = grammar[static_cast<std::size_t>(frontier[i].end - 1)];
        const double score = (1 - spec.shape_noise) * boundary + spec.shape_noise * draws.unit();
        if (score > best) {
          best = score;
          pick = i;
        }
      }
      const Node left = frontier[pick], right = frontier[pick + 1];
      const std::string p = fmt::format("node[{},{})", left.first, right.end);
      builder.decide(p);
      const int layer = node + 1;
      const TensorId gates =
          builder.forward(p + ".gates", "tree_lstm_gates", layer, {left.hidden, right.hidden, tree_w, tree_b},
                          {b, 5 * h}, 2 * bd * 2 * hd * 5 * hd, kBatch);
      std::vector<TensorId> cell_inputs{gates};
      for (const Node& child : {left, right})
        if (child.cell)
          cell_inputs.push_back(*child.cell);
      const TensorId cell =
          builder.forward(p + ".cell", "tree_lstm_cell", layer, cell_inputs, {b, h}, 6 * bd * hd, kBatch);
      const TensorId hidden =
          builder.forward(p + ".hidden", "tree_lstm_hidden", layer, {gates, cell}, {b, h}, 3 * bd * hd, kBatch);
      frontier[pick] = Node{left.first, right.end, hidden, cell};
      frontier.erase(frontier.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
    }
    const TensorId logits = builder.forward("cls", "linear", leaves, {frontier.front().hidden, classifier},
                                            {b, spec.classes}, 2 * bd * hd * spec.classes, kBatch);
    builder.loss({logits}, labels, leaves, kBatch);
    builder.backward_and_update();
  }
  return builder.finish();
}

Trace generate_moe(const MoeSpec& spec, const Roofline& roofline)
{
  check_at_least(spec.iterations, 1, "iterations");
  check_positive({{spec.layers, "layers"},
                  {spec.experts, "experts"},
                  {spec.top_k, "top-k"},
                  {spec.groups, "groups"},
                  {spec.group_tokens, "group-tokens"},
                  {spec.hidden, "hidden"},
                  {spec.ffn, "ffn"},
                  {spec.classes, "classes"}});
  if (spec.top_k > spec.experts)
    throw InputError("--top-k", fmt::format("top-k ({}) must not exceed experts ({})", spec.top_k, spec.experts));
  const std::int64_t g = spec.groups, n = spec.group_tokens, h = spec.hidden, f = spec.ffn;
  const double tokens = static_cast<double>(g * n), nd = static_cast<double>(n), hd = static_cast<double>(h),
               fd = static_cast<double>(f);
  TraceBuilder builder(fmt::format("moe-l{}-e{}-top{}-g{}x{}-h{}-seed{}", spec.layers, spec.experts, spec.top_k,
                                   spec.groups, spec.group_tokens, spec.hidden, spec.seed),
                       spec.dtype, spec.groups, roofline);
  struct Expert {
    TensorId up = 0, down = 0;
  };
  std::vector<TensorId> routers;
  std::vector<std::vector<Expert>> experts(static_cast<std::size_t>(spec.layers));
  for (int l = 0; l < spec.layers; ++l) {
    routers.push_back(builder.weight(fmt::format("l{}.router.w", l), {h, spec.experts}, l));
    for (int e = 0; e < spec.experts; ++e)
      experts[static_cast<std::size_t>(l)].push_back(
          Expert{builder.weight(fmt::format("l{}.e{}.up.w", l, e), {h, f}, l),
                 builder.weight(fmt::format("l{}.e{}.down.w", l, e), {f, h}, l)});
  }
  const TensorId classifier = builder.weight("cls.w", {h, spec.classes}, spec.layers);
  SeededDraws draws(spec.seed);
  for (int k = 0; k < spec.iterations; ++k) {
    builder.begin_iteration(k);
    TensorId x = builder.input("x", {g, n, h});
    const TensorId labels = builder.input("labels", {g, n}, 8);
    for (int l = 0; l < spec.layers; ++l) {
      const std::string p = fmt::format("l{}", l);
      const TensorId scores = builder.forward(p + ".router", "linear", l, {x, routers[static_cast<std::size_t>(l)]},
                                              {g, n, spec.experts}, 2 * tokens * hd * spec.experts, kBatch);
      std::vector<TensorId> combine_inputs{x};
      for (int group = 0; group < spec.groups; ++group) {
        // top_k distinct experts: a partial Fisher-Yates shuffle of the expert indices.
        std::vector<int> order(static_cast<std::size_t>(spec.experts));
        for (int e = 0; e < spec.experts; ++e)
          order[static_cast<std::size_t>(e)] = e;
        for (int i = 0; i < spec.top_k; ++i)
          std::swap(order[static_cast<std::size_t>(i)],
                    order[static_cast<std::size_t>(draws.between(i, spec.experts - 1))]);
        std::sort(order.begin(), order.begin() + spec.top_k); // program order: by expert index
        for (int i = 0; i < spec.top_k; ++i) {
          const int e = order[static_cast<std::size_t>(i)];
          const std::string q = fmt::format("{}.g{}.e{}", p, group, e);
          builder.decide(q);
          const Expert& weights = experts[static_cast<std::size_t>(l)][static_cast<std::size_t>(e)];
          const TensorId up = builder.forward(q + ".up", "expert_ffn_up", l, {x, scores, weights.up}, {1, n, f},
                                              2 * nd * hd * fd, kBatch);
          combine_inputs.push_back(builder.forward(q + ".down", "expert_ffn_down", l, {up, weights.down}, {1, n, h},
                                                   2 * nd * fd * hd, kBatch));
        }
      }
      x = builder.forward(p + ".combine", "moe_combine", l, combine_inputs, {g, n, h}, tokens * hd * (spec.top_k + 1),
                          kBatch);
    }
    const TensorId logits = builder.forward("cls", "linear", spec.layers, {x, classifier}, {g, n, spec.classes},
                                            2 * tokens * hd * spec.classes, kBatch);
    builder.loss({logits}, labels, spec.layers, kBatch);
    builder.backward_and_update();
  }
  return builder.finish();
}

Trace generate_var_bert(const VarBertSpec& spec, const Roofline& roofline)
{
  check_at_least(spec.iterations, 1, "iterations");
  check_at_least(spec.min_seq, 1, "min-seq");
  check_range(spec.min_seq, spec.max_seq, "min-seq", "max-seq");
  TransformerSpec layers{spec.layers, spec.hidden, spec.heads, spec.min_seq, spec.batch, spec.vocab, spec.dtype};
  check_transformer(layers);
  check_at_least(spec.vocab, 1, "vocab");
  TraceBuilder builder(fmt::format("var-bert-l{}-h{}-b{}-seq{}-{}-seed{}", spec.layers, spec.hidden, spec.batch,
                                   spec.min_seq, spec.max_seq, spec.seed),
                       spec.dtype, spec.batch, roofline);
  SeededDraws draws(spec.seed);
  for (int k = 0; k < spec.iterations; ++k) {
    layers.seq = draws.between(spec.min_seq, spec.max_seq);
    builder.begin_iteration(k);
    for (int t = 0; t < layers.seq; ++t)
      builder.decide(fmt::format("pos{}", t));
    record_transformer_iteration(builder, layers);
    builder.backward_and_update();
  }
  return builder.finish();
}

} // namespace memsim
