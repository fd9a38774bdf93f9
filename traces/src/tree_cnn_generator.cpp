// tree-cnn (DyNN-Offload Fig. 1): a greedy bottom-up parse per iteration whose nodes run their grammar type's CNN.
#include "memsim/traces/dynamic_generators.hpp"

#include "dynamic_common.hpp"

#include <algorithm>
#include <vector>

namespace memsim {
using namespace dynamic; // the dynamic generators' shared draws and checks

namespace {

// Type g's CNN: a (2g + 1)-wide conv from the children's 2C channels to its own inner width, a relu, and a 1x1 conv
// back to C channels, so that any type's output can be any type's child.
struct TypeCnn {
  std::int64_t kernel = 1, inner = 1;
  TensorId conv = 0, project = 0;
};

std::vector<TypeCnn> type_cnns(TraceBuilder& builder, const TreeCnnSpec& spec)
{
  std::vector<TypeCnn> cnns;
  const std::int64_t c = spec.channels;
  for (int g = 0; g < spec.types; ++g) {
    TypeCnn cnn;
    cnn.kernel = 2 * g + 1;
    cnn.inner = std::max<std::int64_t>(1, c * (g + 1) / 2);
    cnn.conv = builder.weight(fmt::format("g{}.conv.w", g), {cnn.inner, 2 * c, cnn.kernel}, 1);
    cnn.project = builder.weight(fmt::format("g{}.project.w", g), {c, cnn.inner, 1}, 1);
    cnns.push_back(cnn);
  }
  return cnns;
}

} // namespace

Trace generate_tree_cnn(const TreeCnnSpec& spec, const Roofline& roofline)
{
  check_at_least(spec.iterations, 1, "iterations");
  check_at_least(spec.min_leaves, 2, "min-leaves");
  check_range(spec.min_leaves, spec.max_leaves, "min-leaves", "max-leaves");
  check_positive({{spec.types, "types"},
                  {spec.batch, "batch"},
                  {spec.channels, "channels"},
                  {spec.width, "width"},
                  {spec.vocab, "vocab"},
                  {spec.classes, "classes"}});
  const std::int64_t b = spec.batch, c = spec.channels, w = spec.width;
  const double positions = static_cast<double>(b * w), cd = static_cast<double>(c);
  TraceBuilder builder(fmt::format("tree-cnn-t{}-c{}-w{}-b{}-leaves{}-{}-seed{}", spec.types, spec.channels, spec.width,
                                   spec.batch, spec.min_leaves, spec.max_leaves, spec.seed),
                       spec.dtype, spec.batch, roofline);
  const TensorId embedding = builder.weight("embed.w", {spec.vocab, c * w}, 0);
  const std::vector<TypeCnn> cnns = type_cnns(builder, spec);
  const TensorId classifier = builder.weight("cls.w", {c * w, spec.classes}, 0);
  SeededDraws draws(spec.seed);
  struct Node {
    int first = 0, end = 0; // the leaves it spans
    TensorId features = 0;  // {batch, channels, width}
  };
  const SplitDims conv_split{"batch", "channel"};
  for (int k = 0; k < spec.iterations; ++k) {
    const int leaves = draws.between(spec.min_leaves, spec.max_leaves);
    builder.begin_iteration(k);
    const TensorId tokens = builder.input("tokens", {b, leaves}, 8);
    const TensorId embedded = builder.forward("embed", "embedding", 0, {tokens, embedding}, {b, leaves, c, w},
                                              positions * leaves * cd, kBatch);
    const TensorId labels = builder.input("labels", {b}, 8);
    std::vector<Node> frontier;
    for (int i = 0; i < leaves; ++i)
      frontier.push_back(Node{i, i + 1,
                              builder.forward(fmt::format("leaf{}.select", i), "select", 0, {embedded}, {b, c, w},
                                              positions * cd, kBatch)});
    // The score of each neighbouring pair, drawn when the pair forms (the proposal's score in Fig. 1); the best
    // pair (the first on a tie) becomes a node.
    std::vector<std::uint64_t> pair_scores;
    for (int i = 0; i + 1 < leaves; ++i)
      pair_scores.push_back(draws.next());
    for (int node = 0; frontier.size() > 1; ++node) {
      const auto pick =
          static_cast<std::size_t>(std::max_element(pair_scores.begin(), pair_scores.end()) - pair_scores.begin());
      const Node left = frontier[pick], right = frontier[pick + 1];
      const int type = draws.between(0, spec.types - 1);
      const TypeCnn& cnn = cnns[static_cast<std::size_t>(type)];
      const std::string p = fmt::format("node[{},{})", left.first, right.end);
      builder.decide(fmt::format("{}:g{}", p, type));
      const int layer = node + 1;
      const double inner = static_cast<double>(cnn.inner);
      const TensorId stacked = builder.forward(p + ".concat", "concat", layer, {left.features, right.features},
                                               {b, 2 * c, w}, 2 * positions * cd, conv_split);
      const TensorId conv =
          builder.forward(p + ".conv", "conv1d", layer, {stacked, cnn.conv}, {b, cnn.inner, w},
                          2 * positions * inner * 2 * cd * static_cast<double>(cnn.kernel), conv_split);
      const TensorId relu =
          builder.forward(p + ".relu", "relu", layer, {conv}, {b, cnn.inner, w}, positions * inner, conv_split);
      const TensorId features = builder.forward(p + ".project", "conv1d", layer, {relu, cnn.project}, {b, c, w},
                                                2 * positions * cd * inner, conv_split);
      frontier[pick] = Node{left.first, right.end, features};
      frontier.erase(frontier.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
      // The merged pair's score goes; the new node's pairs with its neighbours get fresh scores.
      pair_scores.erase(pair_scores.begin() + static_cast<std::ptrdiff_t>(pick));
      if (pick > 0)
        pair_scores[pick - 1] = draws.next();
      if (pick < pair_scores.size())
        pair_scores[pick] = draws.next();
    }
    const TensorId logits = builder.forward("cls", "linear", leaves, {frontier.front().features, classifier},
                                            {b, spec.classes}, 2 * positions * cd * spec.classes, kBatch);
    builder.loss({logits}, labels, leaves, kBatch);
    builder.backward_and_update();
  }
  return builder.finish();
}

} // namespace memsim
