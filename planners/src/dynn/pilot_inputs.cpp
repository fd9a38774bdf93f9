#include "memsim/planners/dynn/pilot_inputs.hpp"

#include <algorithm>
#include <array>
#include <set>

namespace memsim::dynn {
namespace {

constexpr std::array<std::string_view, kNetworkTypes> kTypeNames{"cnn", "lstm", "transformer"};

void append_tensor(std::vector<double>& features, const Trace& trace, const Tensor& tensor)
{
  const std::uint64_t element_bytes = std::max<std::uint64_t>(1, dtype_bytes(trace.source.dtype));
  const std::vector<std::int64_t>& shape = tensor.shape;
  double rest = shape.size() > 2 ? 1 : 0;
  for (std::size_t axis = 2; axis < shape.size(); ++axis)
    rest *= static_cast<double>(shape[axis]);
  double elements = static_cast<double>(tensor.bytes) / static_cast<double>(element_bytes);
  if (!shape.empty()) { // the shape's count: an input's own element size may differ from the trace's dtype
    elements = 1;
    for (std::int64_t extent : shape)
      elements *= static_cast<double>(extent);
  }
  features.push_back(elements);
  features.push_back(shape.empty() ? 0 : static_cast<double>(shape[0]));
  features.push_back(shape.size() > 1 ? static_cast<double>(shape[1]) : 0);
  features.push_back(rest);
}

} // namespace

std::string_view to_string(NetworkType type) { return kTypeNames[static_cast<std::size_t>(type)]; }

std::optional<NetworkType> network_type_from_string(std::string_view text)
{
  for (std::size_t i = 0; i < kTypeNames.size(); ++i)
    if (kTypeNames[i] == text)
      return static_cast<NetworkType>(i);
  return std::nullopt;
}

std::vector<double> input_sample_features(const Trace& trace, const std::vector<OpId>& ops)
{
  std::set<TensorId> inputs;
  std::optional<TensorId> embedded;
  for (OpId id : ops) {
    const Op& op = trace.op(id);
    for (TensorId tensor : op.inputs)
      if (trace.tensor(tensor).kind == TensorKind::input)
        inputs.insert(tensor);
    if (!embedded && op.phase == Phase::forward && op.type == "embedding" && !op.outputs.empty())
      embedded = op.outputs.front();
  }
  std::vector<double> features;
  features.reserve(kSampleFeatures);
  for (TensorId tensor : inputs) {
    if (features.size() == kSampleTensors * kTensorFeatures)
      break;
    append_tensor(features, trace, trace.tensor(tensor));
  }
  features.resize(kSampleTensors * kTensorFeatures, 0.0);
  if (embedded)
    append_tensor(features, trace, trace.tensor(*embedded));
  features.resize(kSampleFeatures, 0.0);
  return features;
}

std::vector<double> architecture_features(const Trace& trace, const PilotShape& shape)
{
  std::vector<OpId> all_ops(trace.ops.size());
  for (std::size_t i = 0; i < all_ops.size(); ++i)
    all_ops[i] = static_cast<OpId>(i);
  std::vector<double> architecture;
  for (const OpSignature& row : static_architecture(trace, all_ops, shape.static_rows))
    architecture.insert(architecture.end(), row.begin(), row.begin() + kIdiomCount);
  architecture.resize(shape.static_rows * kIdiomCount, 0.0);
  return architecture;
}

std::vector<PilotSample> pilot_samples(const Trace& trace, const Machine& machine, std::uint64_t capacity_bytes,
                                       NetworkType type, const PilotShape& shape)
{
  const std::vector<double> architecture = architecture_features(trace, shape);

  std::vector<PilotSample> samples;
  for (IterationLabel& label : iteration_labels(trace, machine, capacity_bytes)) {
    PilotSample sample;
    sample.iteration = label.iteration;
    sample.type = type;
    sample.input = input_sample_features(trace, label.ops);
    sample.input.insert(sample.input.end(), architecture.begin(), architecture.end());
    sample.label = label_vector(label.blocks, shape.max_blocks);
    sample.partition = std::move(label.partition);
    sample.op_count = label.ops.size();
    samples.push_back(std::move(sample));
  }
  return samples;
}

} // namespace memsim::dynn
