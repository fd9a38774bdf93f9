#include "tsplit_dims.hpp"

#include "memsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <sstream>

namespace memsim::tsplit {
namespace {

constexpr std::array<const char*, 5> kDims{"batch", "channel", "spatial", "sequence", "heads"};

bool type_has(const std::string& type, std::initializer_list<const char*> kinds)
{
  return std::any_of(kinds.begin(), kinds.end(),
                     [&](const char* kind) { return type.find(kind) != std::string::npos; });
}

bool is_feature_map(TensorKind kind) { return kind == TensorKind::activation || kind == TensorKind::gradient; }

// For traces that declare no split dimensions (the recorded ones), the spec's aten op-type table (§8.4).
bool allowed_by_type(const Op& op, const std::string& dim)
{
  if (dim == "batch")
    return !type_has(op.type, {"batch_norm"}) && // batch statistics
           type_has(op.type, {"conv", "relu", "threshold", "pool", "add", "mm", "dropout", "layer_norm", "gelu",
                              "scaled_dot_product", "linear", "matmul", "bmm"});
  if (dim == "channel")
    return type_has(op.type, {"batch_norm"}) && op.phase == Phase::forward;
  if (dim == "spatial") // BN forward reduces over N, H and W: as under batch, no norm op splits
    return !type_has(op.type, {"batch_norm"}) &&
           type_has(op.type, {"conv", "pool", "relu", "threshold", "add", "dropout"});
  return false;
}

// The axis `dim` has in a tensor whose shape puts the batch first; none when the trace does not say. Channel is
// axis 1 of NCHW and [batch, features]; a token tensor's hidden axis is no channel (layer norm reduces over it).
// Spatial is H, axis 2 of NCHW.
std::optional<std::size_t> axis_of(const Tensor& tensor, const std::string& dim)
{
  if (tensor.shape.empty() || tensor.batch_axis != 0)
    return std::nullopt;
  const std::size_t rank = tensor.shape.size();
  if ((dim == "channel" && (rank == 2 || rank == 4)) || (dim == "sequence" && rank == 3) ||
      (dim == "heads" && rank == 4))
    return 1;
  if (dim == "spatial" && rank == 4)
    return 2;
  return std::nullopt;
}

std::vector<TensorId> unique_feature_map_inputs(const Trace& trace, const Op& op)
{
  std::vector<TensorId> inputs;
  for (TensorId x : op.inputs)
    if (is_feature_map(trace.tensor(x).kind) && std::find(inputs.begin(), inputs.end(), x) == inputs.end())
      inputs.push_back(x);
  return inputs;
}

// Batch: every feature map laid out along the batch is partitioned; weights are read whole, weight gradients
// reduced. Without shapes, "laid out along the batch" is "bytes divide by the batch" (§8.4).
std::optional<SplitAxis> batch_axis(const Trace& trace, const Op& op, std::int64_t batch)
{
  if (batch < 2)
    return std::nullopt;
  SplitAxis axis{"batch", batch, {}};
  for (TensorId x : unique_feature_map_inputs(trace, op))
    if (trace.tensor(x).bytes % static_cast<std::uint64_t>(batch) == 0)
      axis.partitioned_inputs.push_back(x);
  return axis;
}

// Channel, spatial, sequence, heads: the extent and the partitioned tensors come from shapes; a trace without them gets
// no such split. Roles (§2): a conv / linear / matmul split along channel is an output-channel split -- the weight and
// the output are partitioned, the input activation is read whole by every micro-op. Its backward would reduce the
// input gradient (a feature map) over the micro-ops, and the trace does not mark which input is the incoming
// gradient: refused. Attention along the sequence reads k and v whole for each query block, a role the trace does
// not give either: refused. Elementwise, normalisation and pooling ops partition every activation. Spatial needs
// every feature map's H equal (a strided conv or pool changes it: not split). A conv or pool over a band of output
// rows reads its input band plus halo rows of the neighbouring bands; the trace has no kernel sizes, so the halo is
// taken at part granularity (parts u-1 and u+1): exact about which parts must be resident while a part is at least
// as tall as the halo ((k-1)/2 rows of a k x k kernel: 1 for 3 x 3), conservative by the rest of each neighbour part.
std::optional<SplitAxis> shaped_axis(const Trace& trace, const Op& op, const std::string& dim)
{
  const bool output_channel = dim == "channel" && type_has(op.type, {"conv", "linear", "mm", "matmul"});
  if (output_channel && op.phase != Phase::forward)
    return std::nullopt;
  if (dim == "sequence" && type_has(op.type, {"attention", "scaled_dot_product", "bmm"}))
    return std::nullopt;
  SplitAxis axis{dim, 0, {}};
  const auto agrees = [&](const Tensor& tensor) {
    const std::optional<std::size_t> at = axis_of(tensor, dim);
    if (!at)
      return false;
    const std::int64_t extent = tensor.shape[*at];
    if (axis.extent == 0)
      axis.extent = extent;
    return extent == axis.extent;
  };
  for (TensorId y : op.outputs)
    if (is_feature_map(trace.tensor(y).kind) && !agrees(trace.tensor(y)))
      return std::nullopt;
  if (!output_channel)
    for (TensorId x : unique_feature_map_inputs(trace, op)) {
      if (!agrees(trace.tensor(x)))
        return std::nullopt;
      axis.partitioned_inputs.push_back(x);
    }
  if (axis.extent < 2)
    return std::nullopt;
  if (dim == "spatial" && type_has(op.type, {"conv", "pool"}))
    axis.halo = 1;
  return axis;
}

} // namespace

std::vector<std::string> parse_dims(const std::string& list)
{
  std::vector<std::string> named;
  std::stringstream stream(list);
  for (std::string item; std::getline(stream, item, ',');) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (std::find(kDims.begin(), kDims.end(), item) == kDims.end())
      throw InputError("tsplit.dims",
                       fmt::format("'{}' is not a split dimension (batch, channel, spatial, sequence, heads)", item));
    named.push_back(item);
  }
  std::vector<std::string> ordered;
  for (const char* dim : kDims)
    if (std::find(named.begin(), named.end(), dim) != named.end())
      ordered.emplace_back(dim);
  if (ordered.empty())
    throw InputError("tsplit.dims", "names no split dimension");
  return ordered;
}

std::vector<SplitAxis> split_axes(const Trace& trace, const Op& op, const std::vector<std::string>& dims,
                                  std::int64_t batch, bool splits_declared)
{
  std::vector<SplitAxis> axes;
  for (const std::string& dim : dims) {
    const bool allowed =
        splits_declared ? std::find(op.split.begin(), op.split.end(), dim) != op.split.end() : allowed_by_type(op, dim);
    if (!allowed)
      continue;
    std::optional<SplitAxis> axis = dim == "batch" ? batch_axis(trace, op, batch) : shaped_axis(trace, op, dim);
    if (axis)
      axes.push_back(std::move(*axis));
  }
  return axes;
}

} // namespace memsim::tsplit
