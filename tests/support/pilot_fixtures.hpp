#pragma once
// Hand-made `memsim-pilot` v1 documents for tests that run the plain-C++ pilot without libtorch.
#include "memsim/planners/dynn/pilot_inputs.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace memsim::test {

// A pilot whose lstm network is the given layers ("<i>.weight"/"<i>.bias" parameters, shapes [out, in] and [out]),
// with identity normalization except where the caller sets it.
inline nlohmann::json pilot_document(const dynn::PilotShape& shape, const nlohmann::json& lstm_parameters)
{
  nlohmann::json networks = nlohmann::json::array();
  for (const char* type : {"cnn", "lstm", "transformer"})
    networks.push_back({{"type", type},
                        {"trained", std::string(type) == "lstm"},
                        {"parameters", std::string(type) == "lstm" ? lstm_parameters : nlohmann::json::array()}});
  auto identity = [](std::size_t size) {
    return nlohmann::json{{"mean", std::vector<double>(size, 0.0)}, {"scale", std::vector<double>(size, 1.0)}};
  };
  return {{"format", "memsim-pilot"},
          {"version", 1},
          {"shape", {{"max_blocks", shape.max_blocks}, {"static_rows", shape.static_rows}}},
          {"config", {{"hidden", 1}, {"epochs", 0}, {"batch", 1}, {"learning_rate", 1e-3}, {"seed", 1}}},
          {"normalization", {{"input", identity(shape.input_size())}, {"label", identity(shape.label_size())}}},
          {"networks", std::move(networks)},
          {"provenance", {{"type", "lstm"}}}};
}

// A pilot that predicts the same blocks, `op_counts` ops each, whatever the input: one layer with zero weights, the
// op counts in the label's mean, the "present" logits +1 for the blocks and -1 for the empty slots.
inline nlohmann::json constant_pilot(const std::vector<int>& op_counts, const dynn::PilotShape& shape)
{
  const std::size_t outputs = shape.label_size() + shape.max_blocks;
  std::vector<double> bias(outputs, 0.0);
  nlohmann::json document;
  std::vector<double> label_mean(shape.label_size(), 0.0);
  for (std::size_t slot = 0; slot < shape.max_blocks; ++slot) {
    bias[shape.label_size() + slot] = slot < op_counts.size() ? 1.0 : -1.0;
    if (slot < op_counts.size())
      label_mean[slot * dynn::kBlockVectorSize] = op_counts[slot];
  }
  const nlohmann::json parameters =
      nlohmann::json::array({{{"name", "0.weight"},
                              {"shape", {outputs, shape.input_size()}},
                              {"values", std::vector<double>(outputs * shape.input_size(), 0.0)}},
                             {{"name", "0.bias"}, {"shape", {outputs}}, {"values", bias}}});
  document = pilot_document(shape, parameters);
  document["normalization"]["label"]["mean"] = label_mean;
  return document;
}

} // namespace memsim::test
