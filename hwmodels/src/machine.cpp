#include "memsim/hwmodels/machine.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/yaml_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <set>

namespace memsim {

namespace {

constexpr double kMaxEfficiency = 20;

// One class's curve in an `efficiency:` block; keys it omits keep their defaults.
void read_curve(const yaml_io::Node& node, const char* half_key, bool half_is_bytes, EfficiencyCurve& curve)
{
  node.only_keys({"max", half_key});
  if (node.has("max")) {
    curve.max = node.at("max").as_number();
    // Above 1 only where the peak in the file undercounts what the library uses (TF32 tensor cores for fp32).
    if (!(curve.max > 0) || curve.max > kMaxEfficiency)
      node.at("max").fail(fmt::format("max efficiency {} must be in (0, {}]", curve.max, kMaxEfficiency));
  }
  if (node.has(half_key)) {
    const yaml_io::Node half = node.at(half_key);
    curve.half = half_is_bytes ? static_cast<double>(half.as_bytes()) : half.as_number(); // both refuse < 0
  }
}

GpuEfficiency read_efficiency(const yaml_io::Node& node)
{
  node.only_keys({"gemm", "convolution", "memory"});
  GpuEfficiency efficiency = default_efficiency();
  if (node.has("gemm"))
    read_curve(node.at("gemm"), "half_flops", false, efficiency.gemm);
  if (node.has("convolution"))
    read_curve(node.at("convolution"), "half_flops", false, efficiency.convolution);
  if (node.has("memory"))
    read_curve(node.at("memory"), "half_bytes", true, efficiency.memory);
  return efficiency;
}

Gpu read_gpu(const yaml_io::Node& node)
{
  node.only_keys({"name", "model", "memory", "peak_flops", "hbm_bandwidth", "kernel_launch", "efficiency"});
  Gpu gpu;
  gpu.name = node.at("name").as_string();
  gpu.model = node.has("model") ? node.at("model").as_string() : gpu.name;
  gpu.memory = node.at("memory").as_bytes();
  if (gpu.memory == 0)
    node.at("memory").fail("memory must be positive");
  auto flops = node.at("peak_flops");
  for (auto& [dtype, value] : flops.entries()) {
    double rate = value.as_number();
    if (rate <= 0)
      value.fail("peak FLOP/s must be positive");
    gpu.peak_flops[dtype] = rate;
  }
  gpu.hbm_bandwidth = node.at("hbm_bandwidth").as_bandwidth();
  gpu.kernel_launch_s = node.has("kernel_launch") ? node.at("kernel_launch").as_duration() : 0.0;
  if (node.has("efficiency"))
    gpu.efficiency = read_efficiency(node.at("efficiency"));
  return gpu;
}

Link read_link(const yaml_io::Node& node)
{
  node.only_keys({"name", "endpoints", "bandwidth", "latency", "duplex"});
  Link link;
  link.name = node.at("name").as_string();
  auto endpoints = node.at("endpoints");
  if (endpoints.size() != 2)
    endpoints.fail("a link has exactly two endpoints");
  link.endpoint_a = endpoints.item(0).as_string();
  link.endpoint_b = endpoints.item(1).as_string();
  link.bandwidth = node.at("bandwidth").as_bandwidth();
  link.latency_s = node.has("latency") ? node.at("latency").as_duration() : 0.0;
  std::string duplex = node.has("duplex") ? node.at("duplex").as_string() : "split";
  if (duplex == "split")
    link.duplex = Duplex::split;
  else if (duplex == "shared")
    link.duplex = Duplex::shared;
  else
    node.at("duplex").fail(fmt::format("unknown duplex '{}' (valid: split, shared)", duplex));
  return link;
}

} // namespace

Machine load_machine(const std::filesystem::path& path)
{
  const std::string source = path.string();
  yaml_io::Node root(yaml_io::read_file(path), source);
  root.expect_format("memsim-machine", 1);
  root.only_keys({"format", "version", "name", "gpus", "host", "switches", "links", "notes"});
  Machine machine;
  machine.name = root.has("name") ? root.at("name").as_string() : path.stem().string();
  auto gpus = root.at("gpus");
  if (gpus.size() == 0)
    gpus.fail("a machine needs at least one GPU");
  for (std::size_t i = 0; i < gpus.size(); ++i)
    machine.gpus.push_back(read_gpu(gpus.item(i)));
  auto host = root.at("host");
  host.only_keys({"memory", "flops", "memory_bandwidth"});
  machine.host.memory = host.at("memory").as_bytes();
  machine.host.flops = host.has("flops") ? host.at("flops").as_number() : 0.0;
  if (machine.host.flops < 0)
    host.at("flops").fail("flops must not be negative");
  // as_bandwidth refuses zero and negative bandwidths.
  machine.host.memory_bandwidth = host.has("memory_bandwidth") ? host.at("memory_bandwidth").as_bandwidth() : 0.0;
  if (root.has("switches")) {
    auto switches = root.at("switches");
    for (std::size_t i = 0; i < switches.size(); ++i) {
      auto entry = switches.item(i);
      entry.only_keys({"name"});
      machine.switches.push_back(entry.at("name").as_string());
    }
  }
  auto links = root.at("links");
  std::set<std::string> node_names{kHostNodeName};
  auto add_name = [&](const yaml_io::Node& where, const std::string& name) {
    if (!node_names.insert(name).second)
      where.fail(fmt::format("duplicate node name '{}'", name));
  };
  for (std::size_t i = 0; i < machine.gpus.size(); ++i)
    add_name(gpus.item(i).at("name"), machine.gpus[i].name);
  for (std::size_t i = 0; i < machine.switches.size(); ++i)
    add_name(root.at("switches").item(i).at("name"), machine.switches[i]);
  std::set<std::string> link_names;
  for (std::size_t i = 0; i < links.size(); ++i) {
    Link link = read_link(links.item(i));
    if (!link_names.insert(link.name).second)
      links.item(i).at("name").fail(fmt::format("duplicate link name '{}'", link.name));
    for (std::size_t end = 0; end < 2; ++end) {
      const std::string& endpoint = end == 0 ? link.endpoint_a : link.endpoint_b;
      if (!node_names.count(endpoint)) {
        std::string valid;
        for (const auto& name : node_names)
          valid += (valid.empty() ? "" : ", ") + name;
        links.item(i).at("endpoints").item(end).fail(fmt::format("unknown endpoint '{}' (nodes: {})", endpoint, valid));
      }
    }
    if (link.endpoint_a == link.endpoint_b)
      links.item(i).at("endpoints").fail("a link joins two different nodes");
    machine.links.push_back(std::move(link));
  }
  // Every GPU must reach the host: an unreachable GPU could never offload.
  for (std::size_t i = 0; i < machine.gpus.size(); ++i) {
    try {
      (void)machine.route(machine.gpus[i].name, kHostNodeName);
    } catch (const InputError& error) {
      gpus.item(i).fail(error.message());
    }
  }
  return machine;
}

void validate_machine(const Machine& machine, const std::string& source_name)
{
  if (machine.gpus.empty())
    throw InputError(source_name, "a machine needs at least one GPU");
  for (const Link& link : machine.links) {
    if (!machine.has_node(link.endpoint_a) || !machine.has_node(link.endpoint_b))
      throw InputError(source_name, fmt::format("link '{}' has an unknown endpoint", link.name));
    if (!(link.bandwidth > 0))
      throw InputError(source_name, fmt::format("link '{}' needs a positive bandwidth", link.name));
  }
  for (const Gpu& gpu : machine.gpus)
    (void)machine.route(gpu.name, kHostNodeName);
}

bool Machine::has_node(const std::string& name) const
{
  if (name == kHostNodeName)
    return true;
  for (const Gpu& gpu : gpus)
    if (gpu.name == name)
      return true;
  return std::find(switches.begin(), switches.end(), name) != switches.end();
}

std::size_t Machine::gpu_index(const std::string& name) const
{
  for (std::size_t i = 0; i < gpus.size(); ++i)
    if (gpus[i].name == name)
      return i;
  throw InputError(this->name, fmt::format("no GPU named '{}'", name));
}

std::vector<RouteHop> Machine::route(const std::string& from, const std::string& to) const
{
  if (from == to)
    return {};
  // Breadth-first search over links in file order: the first path found is the shortest by hops and
  // deterministic.
  struct Visit {
    std::string previous;
    RouteHop hop;
  };
  std::map<std::string, Visit> visited;
  visited[from] = Visit{};
  std::deque<std::string> frontier{from};
  while (!frontier.empty() && !visited.count(to)) {
    std::string node = frontier.front();
    frontier.pop_front();
    for (std::size_t i = 0; i < links.size(); ++i) {
      const Link& link = links[i];
      std::string next;
      bool forward = true;
      if (link.endpoint_a == node) {
        next = link.endpoint_b;
      } else if (link.endpoint_b == node) {
        next = link.endpoint_a;
        forward = false;
      } else {
        continue;
      }
      if (visited.count(next))
        continue;
      visited[next] = Visit{node, RouteHop{i, forward}};
      frontier.push_back(next);
    }
  }
  if (!visited.count(to))
    throw InputError(name, fmt::format("no route from '{}' to '{}'", from, to));
  std::vector<RouteHop> hops;
  for (std::string node = to; node != from; node = visited[node].previous)
    hops.push_back(visited[node].hop);
  std::reverse(hops.begin(), hops.end());
  return hops;
}

void Machine::set_host_link_bandwidth(double bytes_per_s)
{
  std::set<std::size_t> on_host_paths;
  for (const Gpu& gpu : gpus)
    for (const RouteHop& hop : route(gpu.name, kHostNodeName))
      on_host_paths.insert(hop.link);
  for (std::size_t link : on_host_paths)
    links[link].bandwidth = bytes_per_s;
}

double Machine::route_bandwidth(const std::string& from, const std::string& to) const
{
  double slowest = std::numeric_limits<double>::infinity();
  for (const RouteHop& hop : route(from, to))
    slowest = std::min(slowest, links.at(hop.link).bandwidth);
  return slowest;
}

double Machine::host_link_bandwidth(std::size_t gpu) const { return route_bandwidth(gpus.at(gpu).name, kHostNodeName); }

std::filesystem::path default_presets_dir()
{
  if (const char* dir = std::getenv("MEMSIM_DATA_DIR"))
    return std::filesystem::path(dir) / "configs" / "machines";
  return std::filesystem::path(MEMSIM_SOURCE_DIR) / "configs" / "machines";
}

Machine load_machine_or_preset(const std::string& name_or_path, const std::filesystem::path& presets_dir)
{
  std::filesystem::path candidate(name_or_path);
  if (std::filesystem::exists(candidate))
    return load_machine(candidate);
  std::filesystem::path preset = presets_dir / (name_or_path + ".yaml");
  if (std::filesystem::exists(preset))
    return load_machine(preset);
  std::string names;
  if (std::filesystem::is_directory(presets_dir)) {
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(presets_dir))
      if (entry.path().extension() == ".yaml")
        found.push_back(entry.path().stem().string());
    std::sort(found.begin(), found.end());
    for (const auto& name : found)
      names += (names.empty() ? "" : ", ") + name;
  }
  throw InputError(name_or_path, fmt::format("no such machine file or preset (presets in {}: {})", presets_dir.string(),
                                             names.empty() ? "none" : names));
}

} // namespace memsim
