// Layer profiles: Harmony's interpolation rules, the importer of Harmony's converted profiles and memsim's own file.
#include "memsim/traces/layer_profile.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/files.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/traces/compressed_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace memsim {
namespace {

using json_io::Json;
using json_io::Node;

constexpr const char* kFormat = "memsim-layer-profile";

// numpy.interp at a point inside [xs.front(), xs.back()]: the segment with xs[j] <= x < xs[j+1], slope times offset
// plus the left value; the right end returns its value.
double interpolate(const std::vector<int>& xs, const std::vector<double>& ys, int x)
{
  if (x == xs.back())
    return ys.back();
  const auto right = std::upper_bound(xs.begin(), xs.end(), x);
  const std::size_t j = static_cast<std::size_t>(right - xs.begin()) - 1;
  if (xs[j] == x)
    return ys[j];
  const double slope = (ys[j + 1] - ys[j]) / (static_cast<double>(xs[j + 1]) - static_cast<double>(xs[j]));
  return slope * (static_cast<double>(x) - static_cast<double>(xs[j])) + ys[j];
}

const char* pass_name(LayerPass pass) { return pass == LayerPass::forward ? "forward" : "backward"; }

void check_range(const LayerProfile& profile, LayerPass pass, int u, std::size_t layer)
{
  const std::vector<int>& sampled = profile.sampled(pass);
  if (sampled.empty() || u < sampled.front() || u > sampled.back())
    throw InputError("", fmt::format("microbatch size {} is outside the {} profile's sampled range [{}, {}] (Harmony "
                                     "does not extrapolate)",
                                     u, pass_name(pass), sampled.empty() ? 0 : sampled.front(),
                                     sampled.empty() ? 0 : sampled.back()));
  if (layer >= profile.num_layers())
    throw std::out_of_range(fmt::format("layer {} of a {}-layer profile", layer, profile.num_layers()));
}

// ---------------------------------------------------------------------------------------------------------------
// Reading

std::uint64_t read_bytes(const Node& node)
{
  const double value = node.as_number();
  if (value < 0)
    node.fail(fmt::format("negative size {}", node.value().dump()));
  return node.as_uint();
}

double read_seconds(const Node& node)
{
  const double value = node.as_number();
  if (!(value >= 0))
    node.fail(fmt::format("negative time {}", node.value().dump()));
  return value;
}

std::vector<int> read_sizes(const Node& node)
{
  std::vector<int> sizes;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const Node item = node.item(i);
    const std::int64_t u = item.as_int();
    if (u < 1 || u > 1'000'000)
      item.fail(fmt::format("microbatch size {} out of range [1, 1000000]", u));
    if (!sizes.empty() && u <= sizes.back())
      item.fail(fmt::format("microbatch sizes must ascend ({} after {})", u, sizes.back()));
    sizes.push_back(static_cast<int>(u));
  }
  if (sizes.empty())
    node.fail("no sampled microbatch sizes");
  return sizes;
}

void check_length(const Node& node, std::size_t layers)
{
  if (node.size() != layers)
    node.fail(fmt::format("has {} values, expected one per layer ({})", node.size(), layers));
}

std::vector<double> read_times(const Node& node, std::size_t layers)
{
  check_length(node, layers);
  std::vector<double> values;
  for (std::size_t i = 0; i < layers; ++i)
    values.push_back(read_seconds(node.item(i)));
  return values;
}

std::vector<std::int64_t> read_peaks(const Node& node, std::size_t layers)
{
  check_length(node, layers);
  std::vector<std::int64_t> values;
  for (std::size_t i = 0; i < layers; ++i)
    values.push_back(static_cast<std::int64_t>(read_bytes(node.item(i))));
  return values;
}

std::vector<std::uint64_t> read_inputs(const Node& node, std::size_t layers)
{
  if (node.value().is_null())
    node.fail("is null: the profile has no input sizes X (Harmony cannot estimate swaps or p2p without them)");
  check_length(node, layers);
  std::vector<std::uint64_t> values;
  for (std::size_t i = 0; i < layers; ++i)
    values.push_back(read_bytes(node.item(i)));
  return values;
}

void check_subset(const Node& node, const std::vector<int>& backward, const std::vector<int>& forward)
{
  for (std::size_t i = 0; i < backward.size(); ++i)
    if (!std::binary_search(forward.begin(), forward.end(), backward[i]))
      node.item(i).fail(fmt::format("backward size {} was not sampled for forward", backward[i]));
}

std::size_t itemsize(const Node& dtype)
{
  const std::string name = dtype.as_string();
  if (name == "float32" || name == "int32")
    return 4;
  if (name == "int64" || name == "float64")
    return 8;
  if (name == "float16" || name == "bfloat16")
    return 2;
  if (name == "uint8" || name == "int8" || name == "bool")
    return 1;
  dtype.fail(fmt::format("unknown dtype '{}'", name));
}

// Harmony's X at an unsampled u: the tensors of the first sampled u (u = 1) with the batch dimension replaced.
std::uint64_t bytes_per_sample(const Node& tensors)
{
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Node tensor = tensors.item(i);
    if (tensor.size() != 3)
      tensor.fail("expected [name, shape, dtype]");
    const Node shape = tensor.item(1);
    if (shape.size() == 0 || shape.item(0).as_int() != 1)
      shape.fail("expected a shape at microbatch size 1 (leading dimension 1)");
    std::uint64_t elements = 1;
    for (std::size_t d = 1; d < shape.size(); ++d)
      elements *= read_bytes(shape.item(d));
    total += elements * itemsize(tensor.item(2));
  }
  return total;
}

LayerProfile read_harmony(const Node& root)
{
  root.expect_format("harmony-profile", 1);
  LayerProfile profile;
  profile.model = root.at("model").as_string();
  const Node source = root.at("source");
  profile.source = fmt::format("{} {} ({}, {})", source.get_string("repo", "?"), source.get_string("commit", "?"),
                               root.get_string("gpu", "?"), root.get_string("dtype", "?"));
  const std::int64_t count = root.at("num_layers").as_int();
  const Node layers = root.at("layers");
  if (count < 1 || layers.size() != static_cast<std::size_t>(count))
    layers.fail(fmt::format("has {} layers, num_layers says {}", layers.size(), count));
  const std::size_t R = static_cast<std::size_t>(count);
  for (std::size_t l = 0; l < R; ++l) {
    const Node layer = layers.item(l);
    layer.expect_object();
    if (layer.at("index").as_int() != static_cast<std::int64_t>(l))
      layer.at("index").fail(fmt::format("expected layer index {}", l));
    ProfiledLayer entry;
    entry.name = layer.at("name").as_string();
    entry.weight_bytes = read_bytes(layer.at("weight_bytes"));
    entry.buffer_bytes = read_bytes(layer.at("buffer_bytes"));
    entry.optimizer_state_bytes = read_bytes(layer.at("optimizer_state_bytes"));
    entry.cpu_update_s = read_seconds(layer.at("cpu_update_s"));
    const Node inputs = layer.at("input_tensors");
    if (inputs.value().is_null())
      inputs.fail("is null: the profile has no input sizes X (Harmony cannot estimate swaps or p2p without them)");
    entry.input_bytes_per_sample = bytes_per_sample(inputs);
    profile.layers.push_back(std::move(entry));
  }
  const Node sampled = root.at("sampled_u");
  profile.sampled_forward = read_sizes(sampled.at("fwd"));
  profile.sampled_backward = read_sizes(sampled.at("bwd"));
  check_subset(sampled.at("bwd"), profile.sampled_backward, profile.sampled_forward);
  const Node microbatch = root.at("microbatch");
  for (const int u : profile.sampled_forward) {
    const std::string key = std::to_string(u);
    const Node entry = microbatch.at(key.c_str());
    ProfiledMicrobatch sample;
    sample.forward_time_s = read_times(entry.at("fwd_time_s"), R);
    sample.forward_peak_bytes = read_peaks(entry.at("fwd_peak_bytes"), R);
    sample.input_bytes = read_inputs(entry.at("input_bytes"), R);
    const bool backward = std::binary_search(profile.sampled_backward.begin(), profile.sampled_backward.end(), u);
    if (backward) {
      sample.backward_time_s = read_times(entry.at("bwd_time_s"), R);
      sample.backward_peak_bytes = read_peaks(entry.at("bwd_peak_bytes"), R);
    } else if (!entry.at("bwd_time_s").value().is_null()) {
      entry.at("bwd_time_s").fail(fmt::format("u={} is not in sampled_u.bwd, so this must be null", u));
    }
    profile.microbatches.emplace(u, std::move(sample));
  }
  return profile;
}

LayerProfile read_memsim(const Node& root)
{
  root.expect_format(kFormat, 1);
  root.only_keys({"format", "version", "model", "source", "sampled_u", "layers", "microbatches"});
  LayerProfile profile;
  profile.model = root.at("model").as_string();
  profile.source = root.get_string("source", "");
  const Node layers = root.at("layers");
  const std::size_t R = layers.size();
  if (R == 0)
    layers.fail("no layers");
  for (std::size_t l = 0; l < R; ++l) {
    const Node layer = layers.item(l);
    layer.only_keys({"name", "weight_bytes", "buffer_bytes", "optimizer_state_bytes", "cpu_update_s",
                     "input_bytes_per_sample"});
    profile.layers.push_back({layer.at("name").as_string(), read_bytes(layer.at("weight_bytes")),
                              read_bytes(layer.at("buffer_bytes")), read_bytes(layer.at("optimizer_state_bytes")),
                              read_seconds(layer.at("cpu_update_s")), read_bytes(layer.at("input_bytes_per_sample"))});
  }
  const Node sampled = root.at("sampled_u");
  sampled.only_keys({"forward", "backward"});
  profile.sampled_forward = read_sizes(sampled.at("forward"));
  profile.sampled_backward = read_sizes(sampled.at("backward"));
  check_subset(sampled.at("backward"), profile.sampled_backward, profile.sampled_forward);
  const Node microbatches = root.at("microbatches");
  if (microbatches.size() != profile.sampled_forward.size())
    microbatches.fail(fmt::format("has {} entries, expected one per sampled forward size ({})", microbatches.size(),
                                  profile.sampled_forward.size()));
  for (std::size_t i = 0; i < microbatches.size(); ++i) {
    const Node entry = microbatches.item(i);
    const int u = profile.sampled_forward[i];
    if (entry.at("u").as_int() != u)
      entry.at("u").fail(fmt::format("expected u={} (the entries follow sampled_u.forward)", u));
    const bool backward = std::binary_search(profile.sampled_backward.begin(), profile.sampled_backward.end(), u);
    if (backward)
      entry.only_keys({"u", "forward_time_s", "forward_peak_bytes", "input_bytes", "backward_time_s",
                       "backward_peak_bytes"});
    else
      entry.only_keys({"u", "forward_time_s", "forward_peak_bytes", "input_bytes"});
    ProfiledMicrobatch sample;
    sample.forward_time_s = read_times(entry.at("forward_time_s"), R);
    sample.forward_peak_bytes = read_peaks(entry.at("forward_peak_bytes"), R);
    sample.input_bytes = read_inputs(entry.at("input_bytes"), R);
    if (backward) {
      sample.backward_time_s = read_times(entry.at("backward_time_s"), R);
      sample.backward_peak_bytes = read_peaks(entry.at("backward_peak_bytes"), R);
    }
    profile.microbatches.emplace(u, std::move(sample));
  }
  return profile;
}

LayerProfile read_document(const std::filesystem::path& path, LayerProfile (*read)(const Node&))
{
  const std::string file = path.string();
  const Json document = json_io::parse_text(read_possibly_gzipped(path), file);
  return read(Node(document, file));
}

} // namespace

double LayerProfile::time_s(LayerPass pass, int u, std::size_t layer) const
{
  check_range(*this, pass, u, layer);
  const auto sampled = [&](const ProfiledMicrobatch& m) -> const std::vector<double>& {
    return pass == LayerPass::forward ? m.forward_time_s : m.backward_time_s;
  };
  const auto found = microbatches.find(u);
  if (found != microbatches.end() && !sampled(found->second).empty())
    return sampled(found->second)[layer];
  std::vector<double> ys;
  for (const int v : this->sampled(pass))
    ys.push_back(sampled(microbatches.at(v))[layer]);
  return interpolate(this->sampled(pass), ys, u);
}

std::int64_t LayerProfile::peak_bytes(LayerPass pass, int u, std::size_t layer) const
{
  check_range(*this, pass, u, layer);
  const auto sampled = [&](const ProfiledMicrobatch& m) -> const std::vector<std::int64_t>& {
    return pass == LayerPass::forward ? m.forward_peak_bytes : m.backward_peak_bytes;
  };
  const auto found = microbatches.find(u);
  if (found != microbatches.end() && !sampled(found->second).empty())
    return sampled(found->second)[layer];
  std::vector<double> ys;
  for (const int v : this->sampled(pass))
    ys.push_back(static_cast<double>(sampled(microbatches.at(v))[layer]));
  return static_cast<std::int64_t>(interpolate(this->sampled(pass), ys, u)); // Python's int(): toward zero
}

std::uint64_t LayerProfile::input_bytes(int u, std::size_t layer) const
{
  if (layer >= num_layers())
    throw std::out_of_range(fmt::format("layer {} of a {}-layer profile", layer, num_layers()));
  if (u < 1)
    throw InputError("", fmt::format("microbatch size {} must be positive", u));
  const auto found = microbatches.find(u);
  if (found != microbatches.end())
    return found->second.input_bytes[layer];
  return static_cast<std::uint64_t>(u) * layers[layer].input_bytes_per_sample;
}

double LayerProfile::pack_time_s(LayerPass pass, int u, std::size_t first, std::size_t last) const
{
  double total = 0;
  for (std::size_t l = first; l <= last; ++l)
    total += time_s(pass, u, l);
  return total;
}

std::int64_t LayerProfile::pack_memory_bytes(LayerPass pass, int u, std::size_t first, std::size_t last) const
{
  std::int64_t peaks = 0;
  std::int64_t inner_inputs = 0;
  for (std::size_t l = first; l <= last; ++l)
    peaks += peak_bytes(pass, u, l);
  for (std::size_t l = first + 1; l <= last; ++l)
    inner_inputs += static_cast<std::int64_t>(input_bytes(u, l));
  return peaks - inner_inputs;
}

std::uint64_t LayerProfile::pack_weight_bytes(std::size_t first, std::size_t last) const
{
  std::uint64_t total = 0;
  for (std::size_t l = first; l <= last; ++l)
    total += layers.at(l).weight_bytes;
  return total;
}

std::uint64_t LayerProfile::pack_buffer_bytes(std::size_t first, std::size_t last) const
{
  std::uint64_t total = 0;
  for (std::size_t l = first; l <= last; ++l)
    total += layers.at(l).buffer_bytes;
  return total;
}

double LayerProfile::pack_update_s(std::size_t first, std::size_t last) const
{
  double total = 0;
  for (std::size_t l = first; l <= last; ++l)
    total += layers.at(l).cpu_update_s;
  return total;
}

LayerProfile import_harmony_profile(const std::filesystem::path& path) { return read_document(path, read_harmony); }

LayerProfile load_layer_profile(const std::filesystem::path& path)
{
  const std::string file = path.string();
  const Json document = json_io::parse_text(read_possibly_gzipped(path), file);
  const Node root(document, file);
  if (root.value().is_object() && root.has("format") && root.at("format").value() == "harmony-profile")
    return read_harmony(root);
  return read_memsim(root);
}

void save_layer_profile(const LayerProfile& profile, const std::filesystem::path& path)
{
  // One line per top-level key, layer and microbatch size; numbers in their shortest round-trip form.
  std::string text = "{\n";
  text += fmt::format("\"format\":\"{}\",\n\"version\":1,\n", kFormat);
  text += fmt::format("\"model\":{},\n\"source\":{},\n", Json(profile.model).dump(), Json(profile.source).dump());
  text += fmt::format("\"sampled_u\":{},\n",
                      Json{{"forward", profile.sampled_forward}, {"backward", profile.sampled_backward}}.dump());
  text += "\"layers\":[\n";
  for (std::size_t l = 0; l < profile.layers.size(); ++l) {
    const ProfiledLayer& layer = profile.layers[l];
    Json entry = Json::object();
    entry["name"] = layer.name;
    entry["weight_bytes"] = layer.weight_bytes;
    entry["buffer_bytes"] = layer.buffer_bytes;
    entry["optimizer_state_bytes"] = layer.optimizer_state_bytes;
    entry["cpu_update_s"] = layer.cpu_update_s;
    entry["input_bytes_per_sample"] = layer.input_bytes_per_sample;
    text += entry.dump() + (l + 1 < profile.layers.size() ? ",\n" : "\n");
  }
  text += "],\n\"microbatches\":[\n";
  std::size_t written = 0;
  for (const auto& [u, sample] : profile.microbatches) {
    Json entry = Json::object();
    entry["u"] = u;
    entry["forward_time_s"] = sample.forward_time_s;
    entry["forward_peak_bytes"] = sample.forward_peak_bytes;
    entry["input_bytes"] = sample.input_bytes;
    if (!sample.backward_time_s.empty()) {
      entry["backward_time_s"] = sample.backward_time_s;
      entry["backward_peak_bytes"] = sample.backward_peak_bytes;
    }
    text += entry.dump() + (++written < profile.microbatches.size() ? ",\n" : "\n");
  }
  text += "]\n}\n";
  if (path.has_parent_path())
    std::filesystem::create_directories(path.parent_path());
  write_text_file(path, text);
}

} // namespace memsim
