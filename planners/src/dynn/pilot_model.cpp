#include "memsim/planners/dynn/pilot_model.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace memsim::dynn {
namespace {

constexpr double kLeakySlope = 0.01; // as the trainer's LeakyReLU
constexpr std::string_view kFormat = "memsim-pilot";

// The trainer's parameter names are "<layer>.weight" and "<layer>.bias" of a torch Sequential.
std::pair<int, std::string> split_name(const std::string& name, const std::string& where)
{
  const std::size_t dot = name.find('.');
  try {
    std::size_t used = 0;
    const int index = std::stoi(name.substr(0, dot), &used);
    if (dot != std::string::npos && used == dot && index >= 0)
      return {index, name.substr(dot + 1)};
  } catch (const std::exception&) {
  }
  throw InputError(where, fmt::format("parameter name '{}' is not <layer>.weight or <layer>.bias", name));
}

} // namespace

PilotInference PilotInference::from_json(const nlohmann::json& document, const std::string& source_name)
{
  PilotInference model;
  std::string where = source_name;
  try {
    if (!document.is_object() || document.value("format", "") != kFormat || document.value("version", 0) != 1)
      throw InputError(source_name, fmt::format("not a {} v1 document", kFormat));
    where = source_name + ": at /shape";
    model.shape_ = PilotShape{document.at("shape").at("max_blocks").get<std::size_t>(),
                              document.at("shape").at("static_rows").get<std::size_t>()};
    where = source_name + ": at /normalization";
    const nlohmann::json& normalization = document.at("normalization");
    model.input_mean_ = normalization.at("input").at("mean").get<std::vector<double>>();
    model.input_scale_ = normalization.at("input").at("scale").get<std::vector<double>>();
    model.label_mean_ = normalization.at("label").at("mean").get<std::vector<double>>();
    model.label_scale_ = normalization.at("label").at("scale").get<std::vector<double>>();
    if (model.input_mean_.size() != model.shape_.input_size() ||
        model.input_scale_.size() != model.shape_.input_size() ||
        model.label_mean_.size() != model.shape_.label_size() || model.label_scale_.size() != model.shape_.label_size())
      throw InputError(where, "sizes do not match the shape");
    const std::size_t outputs = model.shape_.label_size() + model.shape_.max_blocks;
    const nlohmann::json& networks = document.at("networks");
    if (!networks.is_array() || networks.size() != kNetworkTypes)
      throw InputError(source_name + ": at /networks", fmt::format("expected {} networks", kNetworkTypes));
    std::optional<NetworkType> only_trained;
    std::size_t trained_count = 0;
    for (std::size_t type = 0; type < kNetworkTypes; ++type) {
      where = fmt::format("{}: at /networks/{}", source_name, type);
      Network& network = model.networks_[type];
      network.trained = networks[type].at("trained").get<bool>();
      std::map<int, Layer> layers;
      const nlohmann::json& parameters = networks[type].at("parameters");
      for (std::size_t p = 0; p < parameters.size(); ++p) {
        where = fmt::format("{}: at /networks/{}/parameters/{}", source_name, type, p);
        const auto [index, kind] = split_name(parameters[p].at("name").get<std::string>(), where);
        const std::vector<std::size_t> dims = parameters[p].at("shape").get<std::vector<std::size_t>>();
        std::vector<float> values = parameters[p].at("values").get<std::vector<float>>();
        Layer& layer = layers[index];
        if (kind == "weight" && dims.size() == 2 && values.size() == dims[0] * dims[1]) {
          layer.outputs = dims[0];
          layer.inputs = dims[1];
          layer.weight = std::move(values);
        } else if (kind == "bias" && dims.size() == 1 && values.size() == dims[0]) {
          layer.bias = std::move(values);
        } else {
          throw InputError(where, "not a 2-d weight or 1-d bias whose values match its shape");
        }
      }
      where = fmt::format("{}: at /networks/{}", source_name, type);
      std::size_t width = model.shape_.input_size();
      for (auto& [index, layer] : layers) {
        if (layer.weight.empty() || layer.bias.size() != layer.outputs || layer.inputs != width)
          throw InputError(where, fmt::format("layer {} does not take {} inputs with a weight and a matching bias",
                                              index, width));
        width = layer.outputs;
        network.layers.push_back(std::move(layer));
      }
      if (network.trained && width != outputs)
        throw InputError(where, fmt::format("the network gives {} outputs, the shape needs {}", width, outputs));
      if (network.trained) {
        ++trained_count;
        only_trained = static_cast<NetworkType>(type);
      }
    }
    model.default_type_ = trained_count == 1 ? only_trained : std::nullopt;
    if (document.contains("provenance") && document["provenance"].contains("type"))
      if (const auto type = network_type_from_string(document["provenance"]["type"].get<std::string>()))
        model.default_type_ = type;
  } catch (const nlohmann::json::exception& error) {
    throw InputError(where, error.what());
  }
  return model;
}

PilotInference PilotInference::load(const std::filesystem::path& path)
{
  return from_json(json_io::read_file(path), path.string());
}

std::vector<double> PilotInference::predict(const std::vector<double>& input, NetworkType type) const
{
  if (input.size() != shape_.input_size())
    throw InputError("pilot", fmt::format("{} inputs, the model takes {}", input.size(), shape_.input_size()));
  const Network& network = networks_[static_cast<std::size_t>(type)];
  if (!network.trained)
    throw InputError("pilot", fmt::format("the model has no trained network for type {}", to_string(type)));
  // The trainer feeds float32 features; the sums here run in double.
  std::vector<double> values(input.size());
  for (std::size_t i = 0; i < input.size(); ++i)
    values[i] = static_cast<float>((input[i] - input_mean_[i]) / input_scale_[i]);
  for (std::size_t l = 0; l < network.layers.size(); ++l) {
    const Layer& layer = network.layers[l];
    std::vector<double> next(layer.outputs);
    for (std::size_t o = 0; o < layer.outputs; ++o) {
      double sum = layer.bias[o];
      const float* row = layer.weight.data() + o * layer.inputs;
      for (std::size_t i = 0; i < layer.inputs; ++i)
        sum += static_cast<double>(row[i]) * values[i];
      next[o] = l + 1 < network.layers.size() && sum < 0 ? sum * kLeakySlope : sum;
    }
    values = std::move(next);
  }
  std::vector<double> label(shape_.label_size(), 0.0);
  for (std::size_t slot = 0; slot < shape_.max_blocks; ++slot) {
    if (values[shape_.label_size() + slot] < 0) // "block present" logit: absent
      continue;
    for (std::size_t k = 0; k < kBlockVectorSize; ++k) {
      const std::size_t i = slot * kBlockVectorSize + k;
      label[i] = values[i] * label_scale_[i] + label_mean_[i];
    }
  }
  return label;
}

} // namespace memsim::dynn
