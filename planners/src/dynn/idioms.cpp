#include "memsim/planners/dynn/idioms.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace memsim::dynn {
namespace {

// One class of op types: the idiom counts of the forward op and of its backward.
struct IdiomClass {
  std::vector<std::string_view> types;
  IdiomCounts forward;
  IdiomCounts backward;
};

// Counts in the order transpose, gather, scatter, reduction, stream, stencil. Where the paper gives a value (Fig. 3,
// Table V of the authors' repository, as the spec reads it) the class takes it; the others follow the same logic:
// count the loop nests of a straightforward implementation.
const std::vector<IdiomClass>& idiom_classes()
{
  static const std::vector<IdiomClass> classes{
      // A matrix product reads one operand transposed, multiplies-and-adds (stream) and sums (reduction): Fig. 3.
      // Its backward is two such products (the gradients of both operands).
      {{"matmul", "linear", "bmm", "mm", "addmm", "lstm_gates", "tree_lstm_gates", "expert_ffn_up", "expert_ffn_down",
        "attention_qkv", "attention_scores", "attention_context", "attention_out", "ffn_up", "ffn_down", "lm_head",
        "outer_product_mean", "linear_wgrad"},
       {1, 0, 0, 1, 1, 0},
       {2, 0, 0, 2, 2, 0}},
      // The unrolled GAN's inner steps: dx = (dy W^T) masked by relu' is a product and one more stream; through it
      // the outer backward runs the product's two and the mask.
      {{"linear_relu_dgrad"}, {1, 0, 0, 1, 2, 0}, {2, 0, 0, 2, 3, 0}},
      // Its inner SGD step w - lr g is one stream, and the gradient passes back through it as one.
      {{"sgd_step"}, {0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 1, 0}},
      // Element-wise maps (Table V: maximum, elu, dropout); their backward also reduces (sigmoid/tanh/gelu backward).
      {{"relu", "gelu", "sigmoid", "tanh", "elu", "dropout", "maximum", "lstm_cell", "lstm_hidden", "tree_lstm_cell",
        "tree_lstm_hidden", "neg", "log", "sqrt", "exp", "div", "where", "threshold"},
       {0, 0, 0, 0, 1, 0},
       {0, 0, 0, 1, 1, 0}},
      // Sums and products of equal shapes: the gradient passes through as a stream.
      {{"add", "mul", "sub", "outer_sum", "layernorm_add", "residual_add"}, {0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 1, 0}},
      // Normalizations and softmax: two reductions (max or mean, then a sum) and a stream; backward one more of each.
      {{"softmax", "log_softmax", "layernorm", "batchnorm", "groupnorm"}, {0, 0, 0, 2, 1, 0}, {0, 0, 0, 3, 2, 0}},
      // Plain reductions.
      {{"sum", "mean", "sum_dim_IntList", "amax"}, {0, 0, 0, 1, 0, 0}, {0, 0, 0, 0, 1, 0}},
      // Losses: gather the label's logit, reduce; the gradient (bce_grad included) is a reduction and a stream.
      {{"cross_entropy", "nll_loss", "mse_loss", "bce"}, {0, 1, 0, 2, 1, 0}, {0, 1, 1, 1, 1, 0}},
      {{"bce_grad"}, {0, 0, 0, 1, 1, 0}, {0, 0, 0, 1, 1, 0}},
      // Layout changes.
      {{"transpose", "t", "permute"}, {1, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0}},
      // Copies and views move no data through an idiom (Table V: cat, clone); a select's backward scatters the rows.
      {{"view", "reshape", "expand", "split", "concat", "cat", "clone", "zeros_like", "ones_like", "contiguous"},
       {0, 0, 0, 0, 0, 0},
       {0, 0, 0, 0, 0, 0}},
      {{"select", "index", "slice"}, {0, 0, 0, 0, 0, 0}, {0, 0, 1, 0, 0, 0}},
      // Lookups gather; their backward (Table V: embedding backward) gathers, scatters, reduces and streams.
      {{"embedding", "gather", "index_select"}, {0, 1, 0, 0, 0, 0}, {0, 1, 1, 1, 1, 0}},
      // A router's combine gathers each token's expert outputs and sums them with weights.
      {{"moe_combine"}, {0, 1, 0, 1, 1, 0}, {0, 1, 1, 1, 1, 0}},
      // Convolutions (Table V), forward and cudnn backward.
      {{"conv1d", "conv2d", "convolution"}, {0, 1, 0, 1, 1, 2}, {0, 1, 0, 1, 2, 2}},
      // Pooling (Table V); its backward scatters the gradient into the window.
      {{"maxpool2d", "avgpool2d", "max_pool2d", "avg_pool2d", "adaptive_avgpool2d"},
       {0, 0, 0, 1, 0, 1},
       {0, 0, 1, 0, 1, 1}},
      // Adam updates the two moments and the weight element-wise.
      {{"adam", "sgd"}, {0, 0, 0, 0, 3, 0}, {0, 0, 0, 0, 3, 0}},
  };
  return classes;
}

struct TableEntry {
  IdiomCounts forward;
  IdiomCounts backward;
};

const std::map<std::string, TableEntry, std::less<>>& idiom_table()
{
  static const std::map<std::string, TableEntry, std::less<>> table = [] {
    std::map<std::string, TableEntry, std::less<>> built;
    for (const IdiomClass& idiom_class : idiom_classes())
      for (std::string_view type : idiom_class.types)
        built.emplace(std::string(type), TableEntry{idiom_class.forward, idiom_class.backward});
    // Backward ops that the DTR logs name as such.
    built.emplace("threshold_backward", TableEntry{{0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 1, 0}});
    return built;
  }();
  return table;
}

constexpr std::string_view kBackwardSuffix = "_backward";

double element_count(const Tensor& tensor, std::uint64_t element_bytes)
{
  return static_cast<double>(tensor.bytes) / static_cast<double>(element_bytes == 0 ? 1 : element_bytes);
}

} // namespace

std::optional<IdiomCounts> idiom_counts(std::string_view op_type)
{
  const auto& table = idiom_table();
  if (auto found = table.find(op_type); found != table.end())
    return found->second.forward;
  if (op_type.ends_with(kBackwardSuffix)) {
    const std::string_view forward_type = op_type.substr(0, op_type.size() - kBackwardSuffix.size());
    if (auto found = table.find(forward_type); found != table.end())
      return found->second.backward;
  }
  return std::nullopt;
}

SignedOp op_signature(const Trace& trace, const Op& op)
{
  SignedOp signed_op;
  const std::optional<IdiomCounts> counts = idiom_counts(op.type);
  signed_op.known_type = counts.has_value();
  if (counts)
    std::copy(counts->begin(), counts->end(), signed_op.signature.begin());
  double* dims = signed_op.signature.data() + kIdiomCount;
  const bool shaped =
      std::all_of(op.inputs.begin(), op.inputs.end(), [&](TensorId id) { return !trace.tensor(id).shape.empty(); });
  if (shaped) {
    for (TensorId id : op.inputs) {
      const std::vector<std::int64_t>& shape = trace.tensor(id).shape;
      double trailing = shape.size() > 2 ? 1 : 0; // axes 2.. folded into one (their product)
      for (std::size_t axis = 2; axis < shape.size(); ++axis)
        trailing *= static_cast<double>(shape[axis]);
      dims[0] += static_cast<double>(shape[0]);
      dims[1] += shape.size() > 1 ? static_cast<double>(shape[1]) : 0;
      dims[2] += trailing;
    }
    return signed_op;
  }
  const std::uint64_t element_bytes = dtype_bytes(trace.source.dtype);
  for (TensorId id : op.inputs)
    dims[0] += element_count(trace.tensor(id), element_bytes) / 1e6;
  for (TensorId id : op.outputs)
    dims[1] += element_count(trace.tensor(id), element_bytes) / 1e6;
  dims[2] = static_cast<double>(op.inputs.size());
  return signed_op;
}

FeatureMatrix feature_matrix(const Trace& trace, const std::vector<OpId>& ops)
{
  FeatureMatrix matrix;
  matrix.rows.reserve(ops.size());
  for (OpId id : ops) {
    const SignedOp signed_op = op_signature(trace, trace.op(id));
    matrix.rows.push_back(signed_op.signature);
    if (!signed_op.known_type)
      ++matrix.unknown_types;
  }
  return matrix;
}

std::vector<OpSignature> static_architecture(const Trace& trace, const std::vector<OpId>& ops, std::size_t max_rows)
{
  std::vector<OpSignature> rows;
  std::set<std::string, std::less<>> seen;
  for (OpId id : ops) {
    const Op& op = trace.op(id);
    if (op.phase != Phase::forward || !seen.insert(op.type).second)
      continue;
    if (rows.size() == max_rows)
      break;
    OpSignature row{};
    if (const std::optional<IdiomCounts> counts = idiom_counts(op.type))
      std::copy(counts->begin(), counts->end(), row.begin());
    rows.push_back(row);
  }
  return rows;
}

} // namespace memsim::dynn
