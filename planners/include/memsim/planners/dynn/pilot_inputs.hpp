#pragma once
// The pilot's training samples (spec dynn-offload.md §1.5, §1.6): per iteration, what the pilot sees before the
// iteration runs and the label it must predict. It sees (1) the input sample: the iteration's input tensors and the
// output of its first embedding op (the paper's "embedding re-direction" copies that output to the CPU); (2) the
// model's static architecture (idioms.hpp static_architecture: the same for every iteration of a model); (3) the
// network type, which picks one of three MLPs. The iteration's resolved graph is never an input.
#include "memsim/planners/dynn/labels.hpp"

#include <optional>
#include <string_view>

namespace memsim::dynn {

// The paper's three basic NN types (§4 A16: RNN -> lstm, evoformer -> transformer).
enum class NetworkType { cnn, lstm, transformer };
inline constexpr std::size_t kNetworkTypes = 3;
std::string_view to_string(NetworkType type);
std::optional<NetworkType> network_type_from_string(std::string_view text);

// Input-sample features: for the first kSampleTensors input tensors the iteration's ops read (by id) and for the
// output of its first embedding op: [elements, dim 0, dim 1, product of the other dims] (zeros where absent).
inline constexpr std::size_t kSampleTensors = 4;
inline constexpr std::size_t kTensorFeatures = 4;
inline constexpr std::size_t kSampleFeatures = (kSampleTensors + 1) * kTensorFeatures;
std::vector<double> input_sample_features(const Trace& trace, const std::vector<OpId>& ops);

struct PilotShape {
  std::size_t max_blocks = 32;  // label slots (K_max)
  std::size_t static_rows = 16; // rows of the static architecture (R_max), idiom columns only
  std::size_t input_size() const { return kSampleFeatures + static_rows * kIdiomCount; }
  std::size_t label_size() const { return max_blocks * kBlockVectorSize; }
};

struct PilotSample {
  int iteration = 0;
  NetworkType type = NetworkType::lstm;
  std::vector<double> input; // shape.input_size()
  std::vector<double> label; // shape.label_size()
  Partition partition;       // the DP's blocks the label encodes
  std::size_t op_count = 0;
};

// The static-architecture part of the pilot's input for `trace` (shape.static_rows rows of idiom counts, zeros
// past the model's rows): the same for every iteration of the trace.
std::vector<double> architecture_features(const Trace& trace, const PilotShape& shape);

// One sample per iteration of `trace` (labels at `capacity_bytes` per buffer, see labels.hpp).
std::vector<PilotSample> pilot_samples(const Trace& trace, const Machine& machine, std::uint64_t capacity_bytes,
                                       NetworkType type, const PilotShape& shape);

} // namespace memsim::dynn
