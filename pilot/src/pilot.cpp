#include "memsim/pilot/pilot.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <array>
#include <cmath>

namespace memsim::pilot {
namespace {

constexpr double kLeakySlope = 0.01;
constexpr std::string_view kFormat = "memsim-pilot";

torch::nn::Sequential make_network(std::int64_t inputs, std::int64_t hidden, std::int64_t outputs)
{
  const auto leaky = torch::nn::LeakyReLUOptions().negative_slope(kLeakySlope);
  return torch::nn::Sequential(torch::nn::Linear(inputs, hidden), torch::nn::LeakyReLU(leaky),
                               torch::nn::Linear(hidden, hidden), torch::nn::LeakyReLU(leaky),
                               torch::nn::Linear(hidden, outputs));
}

// Per-feature affine map to mean 0 and spread 1 (spread 1 where a feature is constant).
struct Normalization {
  std::vector<double> mean;
  std::vector<double> scale;

  static Normalization fit(const std::vector<const std::vector<double>*>& rows, std::size_t width)
  {
    Normalization normalization{std::vector<double>(width, 0.0), std::vector<double>(width, 0.0)};
    const auto count = static_cast<double>(rows.size());
    for (const std::vector<double>* row : rows)
      for (std::size_t i = 0; i < width; ++i)
        normalization.mean[i] += (*row)[i] / count;
    for (const std::vector<double>* row : rows)
      for (std::size_t i = 0; i < width; ++i)
        normalization.scale[i] += ((*row)[i] - normalization.mean[i]) * ((*row)[i] - normalization.mean[i]) / count;
    for (double& scale : normalization.scale)
      scale = scale > 1e-12 ? std::sqrt(scale) : 1.0;
    return normalization;
  }
  std::vector<float> apply(const std::vector<double>& values) const
  {
    std::vector<float> normalized(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      normalized[i] = static_cast<float>((values[i] - mean[i]) / scale[i]);
    return normalized;
  }
  nlohmann::json to_json() const { return {{"mean", mean}, {"scale", scale}}; }
  static Normalization from_json(const nlohmann::json& value)
  {
    return {value.at("mean").get<std::vector<double>>(), value.at("scale").get<std::vector<double>>()};
  }
};

torch::Tensor rows_tensor(const std::vector<std::vector<float>>& rows, std::size_t width)
{
  std::vector<float> flat;
  flat.reserve(rows.size() * width);
  for (const std::vector<float>& row : rows)
    flat.insert(flat.end(), row.begin(), row.end());
  return torch::tensor(flat).reshape({static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(width)});
}

} // namespace

struct PilotModel::Impl {
  dynn::PilotShape shape;
  PilotConfig config;
  std::array<torch::nn::Sequential, dynn::kNetworkTypes> networks;
  std::array<bool, dynn::kNetworkTypes> trained{};
  Normalization input_normalization;
  Normalization label_normalization;

  Impl(const dynn::PilotShape& pilot_shape, const PilotConfig& pilot_config) : shape(pilot_shape), config(pilot_config)
  {
    if (config.hidden < 1 || config.epochs < 0 || config.batch < 1 || !(config.learning_rate > 0))
      throw InputError("pilot", "hidden and batch must be positive, epochs not negative, learning rate positive");
    torch::set_num_threads(1);
    torch::manual_seed(static_cast<std::uint64_t>(config.seed));
    for (auto& network : networks)
      network = make_network(static_cast<std::int64_t>(shape.input_size()), config.hidden, output_size());
    input_normalization = {std::vector<double>(shape.input_size(), 0.0), std::vector<double>(shape.input_size(), 1.0)};
    label_normalization = {std::vector<double>(shape.label_size(), 0.0), std::vector<double>(shape.label_size(), 1.0)};
  }
  std::int64_t output_size() const { return static_cast<std::int64_t>(shape.label_size() + shape.max_blocks); }
};

PilotModel::PilotModel(const dynn::PilotShape& shape, const PilotConfig& config)
    : impl_(std::make_unique<Impl>(shape, config))
{
}
PilotModel::PilotModel(PilotModel&&) noexcept = default;
PilotModel& PilotModel::operator=(PilotModel&&) noexcept = default;
PilotModel::~PilotModel() = default;

const dynn::PilotShape& PilotModel::shape() const { return impl_->shape; }
const PilotConfig& PilotModel::config() const { return impl_->config; }

TrainingReport PilotModel::train(const std::vector<dynn::PilotSample>& samples)
{
  Impl& impl = *impl_;
  if (samples.empty())
    throw InputError("pilot train", "no training samples");
  std::vector<const std::vector<double>*> inputs, labels;
  for (const dynn::PilotSample& sample : samples) {
    if (sample.input.size() != impl.shape.input_size() || sample.label.size() != impl.shape.label_size())
      throw InputError("pilot train", fmt::format("sample of iteration {} has {} inputs and {} label values, the "
                                                  "model {} and {}",
                                                  sample.iteration, sample.input.size(), sample.label.size(),
                                                  impl.shape.input_size(), impl.shape.label_size()));
    inputs.push_back(&sample.input);
    labels.push_back(&sample.label);
  }
  impl.input_normalization = Normalization::fit(inputs, impl.shape.input_size());
  impl.label_normalization = Normalization::fit(labels, impl.shape.label_size());

  torch::set_num_threads(1);
  torch::manual_seed(static_cast<std::uint64_t>(impl.config.seed));
  TrainingReport report;
  report.epochs = impl.config.epochs;
  const auto label_size = static_cast<std::int64_t>(impl.shape.label_size());
  for (std::size_t type = 0; type < dynn::kNetworkTypes; ++type) {
    std::vector<std::vector<float>> x, y, present;
    for (const dynn::PilotSample& sample : samples) {
      if (static_cast<std::size_t>(sample.type) != type)
        continue;
      x.push_back(impl.input_normalization.apply(sample.input));
      y.push_back(impl.label_normalization.apply(sample.label));
      std::vector<float> slots(impl.shape.max_blocks);
      for (std::size_t j = 0; j < slots.size(); ++j)
        slots[j] = sample.label[j * dynn::kBlockVectorSize] >= 1 ? 1.0f : 0.0f;
      present.push_back(std::move(slots));
    }
    if (x.empty())
      continue;
    const torch::Tensor inputs_tensor = rows_tensor(x, impl.shape.input_size());
    const torch::Tensor labels_tensor = rows_tensor(y, impl.shape.label_size());
    const torch::Tensor present_tensor = rows_tensor(present, impl.shape.max_blocks);
    torch::nn::Sequential& network = impl.networks[type];
    network->train();
    torch::optim::Adam optimizer(network->parameters(), torch::optim::AdamOptions(impl.config.learning_rate));
    const auto count = static_cast<std::int64_t>(x.size());
    for (int epoch = 0; epoch < impl.config.epochs; ++epoch) {
      const torch::Tensor order = torch::randperm(count, torch::kLong);
      double epoch_loss = 0;
      for (std::int64_t begin = 0; begin < count; begin += impl.config.batch) {
        const torch::Tensor rows = order.slice(0, begin, std::min<std::int64_t>(begin + impl.config.batch, count));
        const torch::Tensor output = network->forward(inputs_tensor.index_select(0, rows));
        const torch::Tensor loss =
            torch::mse_loss(output.slice(1, 0, label_size), labels_tensor.index_select(0, rows)) +
            torch::binary_cross_entropy_with_logits(output.slice(1, label_size), present_tensor.index_select(0, rows));
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        epoch_loss += loss.item<double>() * static_cast<double>(rows.size(0)) / static_cast<double>(count);
      }
      report.final_loss = epoch_loss;
    }
    network->eval();
    impl.trained[type] = true;
  }
  return report;
}

std::vector<double> PilotModel::predict(const std::vector<double>& input, dynn::NetworkType type) const
{
  const Impl& impl = *impl_;
  if (input.size() != impl.shape.input_size())
    throw InputError("pilot", fmt::format("{} inputs, the model takes {}", input.size(), impl.shape.input_size()));
  const auto index = static_cast<std::size_t>(type);
  if (!impl.trained[index])
    throw InputError("pilot", fmt::format("the model has no trained network for type {}", dynn::to_string(type)));
  torch::NoGradGuard no_grad;
  const std::vector<float> normalized = impl.input_normalization.apply(input);
  torch::nn::Sequential network = impl.networks[index]; // a handle: forward is not const
  const torch::Tensor output =
      network->forward(torch::tensor(normalized).reshape({1, static_cast<std::int64_t>(input.size())}));
  const torch::Tensor values = output.contiguous();
  const float* data = values.data_ptr<float>();
  std::vector<double> label(impl.shape.label_size(), 0.0);
  for (std::size_t slot = 0; slot < impl.shape.max_blocks; ++slot) {
    if (data[impl.shape.label_size() + slot] < 0) // "block present" logit: absent
      continue;
    for (std::size_t k = 0; k < dynn::kBlockVectorSize; ++k) {
      const std::size_t i = slot * dynn::kBlockVectorSize + k;
      label[i] = static_cast<double>(data[i]) * impl.label_normalization.scale[i] + impl.label_normalization.mean[i];
    }
  }
  return label;
}

std::size_t PilotModel::parameters_per_network() const
{
  std::size_t count = 0;
  torch::nn::Sequential network = impl_->networks[0];
  for (const torch::Tensor& parameter : network->parameters())
    count += static_cast<std::size_t>(parameter.numel());
  return count;
}

std::size_t PilotModel::parameters() const { return parameters_per_network() * dynn::kNetworkTypes; }

nlohmann::json PilotModel::to_json() const
{
  const Impl& impl = *impl_;
  nlohmann::json networks = nlohmann::json::array();
  for (std::size_t type = 0; type < dynn::kNetworkTypes; ++type) {
    nlohmann::json parameters = nlohmann::json::array();
    torch::nn::Sequential network = impl.networks[type];
    for (const auto& item : network->named_parameters()) {
      const torch::Tensor values = item.value().detach().contiguous();
      const float* data = values.data_ptr<float>();
      parameters.push_back({{"name", item.key()},
                            {"shape", values.sizes().vec()},
                            {"values", std::vector<float>(data, data + values.numel())}});
    }
    networks.push_back({{"type", dynn::to_string(static_cast<dynn::NetworkType>(type))},
                        {"trained", impl.trained[type]},
                        {"parameters", std::move(parameters)}});
  }
  return {{"format", kFormat},
          {"version", 1},
          {"shape", {{"max_blocks", impl.shape.max_blocks}, {"static_rows", impl.shape.static_rows}}},
          {"config",
           {{"hidden", impl.config.hidden},
            {"epochs", impl.config.epochs},
            {"batch", impl.config.batch},
            {"learning_rate", impl.config.learning_rate},
            {"seed", impl.config.seed}}},
          {"normalization",
           {{"input", impl.input_normalization.to_json()}, {"label", impl.label_normalization.to_json()}}},
          {"networks", std::move(networks)}};
}

PilotModel PilotModel::from_json(const nlohmann::json& document, const std::string& source_name)
{
  try {
    if (document.at("format") != kFormat || document.at("version") != 1)
      throw InputError(source_name, fmt::format("not a {} v1 document", kFormat));
    const nlohmann::json& shape_json = document.at("shape");
    const dynn::PilotShape shape{shape_json.at("max_blocks").get<std::size_t>(),
                                 shape_json.at("static_rows").get<std::size_t>()};
    const nlohmann::json& config_json = document.at("config");
    PilotConfig config;
    config.hidden = config_json.at("hidden").get<int>();
    config.epochs = config_json.at("epochs").get<int>();
    config.batch = config_json.at("batch").get<int>();
    config.learning_rate = config_json.at("learning_rate").get<double>();
    config.seed = config_json.at("seed").get<std::int64_t>();
    PilotModel model(shape, config);
    Impl& impl = *model.impl_;
    impl.input_normalization = Normalization::from_json(document.at("normalization").at("input"));
    impl.label_normalization = Normalization::from_json(document.at("normalization").at("label"));
    if (impl.input_normalization.mean.size() != shape.input_size() ||
        impl.label_normalization.mean.size() != shape.label_size())
      throw InputError(source_name, "normalization sizes do not match the shape");
    const nlohmann::json& networks = document.at("networks");
    if (networks.size() != dynn::kNetworkTypes)
      throw InputError(source_name, fmt::format("{} networks, expected {}", networks.size(), dynn::kNetworkTypes));
    torch::NoGradGuard no_grad;
    for (std::size_t type = 0; type < dynn::kNetworkTypes; ++type) {
      impl.trained[type] = networks[type].at("trained").get<bool>();
      auto parameters = impl.networks[type]->named_parameters();
      for (const nlohmann::json& parameter : networks[type].at("parameters")) {
        const std::string name = parameter.at("name").get<std::string>();
        torch::Tensor* target = parameters.find(name);
        const std::vector<float> values = parameter.at("values").get<std::vector<float>>();
        if (target == nullptr || static_cast<std::int64_t>(values.size()) != target->numel())
          throw InputError(source_name, fmt::format("network {}: parameter '{}' unknown or of the wrong size",
                                                    type, name));
        target->copy_(torch::tensor(values).reshape(target->sizes()));
      }
      impl.networks[type]->eval();
    }
    return model;
  } catch (const nlohmann::json::exception& error) {
    throw InputError(source_name, error.what());
  }
}

void save_pilot(const PilotModel& model, const nlohmann::json& provenance, const std::filesystem::path& path)
{
  nlohmann::json document = model.to_json();
  document["provenance"] = provenance;
  json_io::write_file(path, document);
}

LoadedPilot load_pilot(const std::filesystem::path& path)
{
  const nlohmann::json document = json_io::read_file(path);
  return {PilotModel::from_json(document, path.string()), document.value("provenance", nlohmann::json::object())};
}

PilotEvaluation evaluate(const PilotModel& model, const std::vector<dynn::PilotSample>& samples, double dims_tolerance)
{
  PilotEvaluation evaluation;
  for (const dynn::PilotSample& sample : samples) {
    const std::vector<double> predicted = model.predict(sample.input, sample.type);
    const std::optional<dynn::Partition> partition = dynn::partition_from_label(predicted, sample.op_count);
    ++evaluation.samples;
    if (!partition)
      ++evaluation.unresolvable;
    if (partition && *partition == sample.partition)
      ++evaluation.exact;
    else
      evaluation.mispredicted.push_back(sample.iteration);
    if (dynn::label_matches(predicted, sample.label, dims_tolerance))
      ++evaluation.vector_match;
  }
  return evaluation;
}

} // namespace memsim::pilot
