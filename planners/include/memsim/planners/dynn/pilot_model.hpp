#pragma once
// Inference of a saved DyNN-Offload pilot (`memsim-pilot` v1, written by memsim-pilot's libtorch trainer) in plain
// C++: per network type an MLP of Linear layers with LeakyReLU (slope 0.01) between them, run on the normalized
// features; the output is the label plus one "block present" logit per slot (pilot.hpp). What the dynn-offload policy
// runs at each iteration's start, without loading libtorch.
#include "memsim/planners/dynn/pilot_inputs.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memsim::dynn {

class PilotInference {
public:
  // Throws InputError located in `source_name` (and the JSON path) when the document is not a usable pilot.
  static PilotInference from_json(const nlohmann::json& document, const std::string& source_name);
  static PilotInference load(const std::filesystem::path& path);

  const PilotShape& shape() const { return shape_; }
  // The type the model was trained for (its provenance), else its only trained network's; nothing when ambiguous.
  std::optional<NetworkType> default_type() const { return default_type_; }
  // The predicted label (shape().label_size() values; slots whose "present" logit is negative are zero). Throws
  // InputError when the input size is wrong or the type's network was never trained.
  std::vector<double> predict(const std::vector<double>& input, NetworkType type) const;

private:
  struct Layer {
    std::size_t inputs = 0;
    std::size_t outputs = 0;
    std::vector<float> weight; // outputs x inputs, row-major
    std::vector<float> bias;
  };
  struct Network {
    bool trained = false;
    std::vector<Layer> layers;
  };

  PilotShape shape_;
  std::optional<NetworkType> default_type_;
  std::vector<double> input_mean_, input_scale_, label_mean_, label_scale_;
  std::array<Network, kNetworkTypes> networks_;
};

} // namespace memsim::dynn
