#pragma once
// DyNN-Offload's pilot (Ren et al., HPCA 2024, §IV-C; spec dynn-offload.md §1.5, §2.5): three small MLPs, one per
// basic network type (the type's one-hot picks which one runs), each input -> hidden -> hidden -> output with
// LeakyReLU (slope 0.01). The output is the fixed-length block label (labels.hpp: max_blocks slots of 10 values)
// plus one "block present" logit per slot (§4 A5). Trained with libtorch's autograd, seeded and single-threaded so
// that the same samples and seed give the same weights. The libtorch types stay in pilot.cpp: this header is what
// the CLI and the dynn-offload policy include.
#include "memsim/planners/dynn/pilot_inputs.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace memsim::pilot {

struct PilotConfig {
  int hidden = 64;             // neurons per hidden layer
  int epochs = 1500;           // passes over the training samples
  int batch = 16;              // mini-batch size
  double learning_rate = 3e-3; // Adam
  std::int64_t seed = 1;
};

struct TrainingReport {
  int epochs = 0;
  double final_loss = 0; // mean loss of the last epoch (normalized targets)
};

class PilotModel {
public:
  PilotModel(const dynn::PilotShape& shape, const PilotConfig& config);
  PilotModel(PilotModel&&) noexcept;
  PilotModel& operator=(PilotModel&&) noexcept;
  ~PilotModel();

  const dynn::PilotShape& shape() const;
  const PilotConfig& config() const;
  // Fits the normalization (per-feature mean and spread of inputs and labels) and the weights of the MLPs of the
  // types present in `samples`. Throws InputError when there are none or their sizes do not match the shape.
  TrainingReport train(const std::vector<dynn::PilotSample>& samples);
  // The predicted label (shape().label_size() values; slots predicted absent are zero).
  std::vector<double> predict(const std::vector<double>& input, dynn::NetworkType type) const;
  // Trainable parameters of one MLP (what one prediction runs) and of all three.
  std::size_t parameters_per_network() const;
  std::size_t parameters() const;

  // `memsim-pilot` v1: shape, config, normalization and weights. Deterministic text for the same model.
  nlohmann::json to_json() const;
  static PilotModel from_json(const nlohmann::json& document, const std::string& source_name);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

void save_pilot(const PilotModel& model, const nlohmann::json& provenance, const std::filesystem::path& path);
// The model and the provenance the file was saved with (what it was trained on, the budget).
struct LoadedPilot {
  PilotModel model;
  nlohmann::json provenance;
};
LoadedPilot load_pilot(const std::filesystem::path& path);

struct PilotEvaluation {
  std::size_t samples = 0;
  std::size_t exact = 0;         // the predicted label maps back to exactly the label's block boundaries (§4 A7)
  std::size_t vector_match = 0;  // every slot's op and idiom counts match after rounding, dims within tolerance
  std::size_t unresolvable = 0;  // the predicted op counts do not add up to the iteration's op count
  std::vector<int> mispredicted; // iterations whose boundaries differ
  double accuracy() const { return samples == 0 ? 0 : static_cast<double>(exact) / static_cast<double>(samples); }
};
PilotEvaluation evaluate(const PilotModel& model, const std::vector<dynn::PilotSample>& samples,
                         double dims_tolerance = 0.05);

} // namespace memsim::pilot
