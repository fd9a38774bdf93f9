#pragma once
// The Machine document (`memsim-machine`, YAML): GPUs, host, switches and links of a topology graph.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memsim/hwmodels/efficiency.hpp"

namespace memsim {

struct Gpu {
  std::string name;
  std::string model;                        // e.g. "V100-32GB"; traces recorded on it use time_s as is
  std::uint64_t memory = 0;                 // bytes
  std::map<std::string, double> peak_flops; // dtype -> FLOP/s
  double hbm_bandwidth = 0;                 // bytes/s
  double kernel_launch_s = 0;
  GpuEfficiency efficiency = default_efficiency(); // the optional `efficiency:` block, else the defaults
};

struct HostSpec {
  std::uint64_t memory = 0;
  double flops = 0;            // FLOP/s of the host CPU (v2 host compute's roofline; 0: unknown)
  double memory_bandwidth = 0; // bytes/s of host memory (v2 host compute's roofline; 0: unknown)
};

enum class Duplex { split, shared };

struct Link {
  std::string name;
  std::string endpoint_a; // traversing a -> b is the "up" direction
  std::string endpoint_b;
  double bandwidth = 0; // bytes/s per direction
  double latency_s = 0;
  Duplex duplex = Duplex::split;
};

// One hop of a route: which link, and whether it is traversed a -> b (forward) or b -> a.
struct RouteHop {
  std::size_t link = 0;
  bool forward = true;
};

inline constexpr const char* kHostNodeName = "host";

struct Machine {
  std::string name;
  std::vector<Gpu> gpus;
  HostSpec host;
  std::vector<std::string> switches;
  std::vector<Link> links;

  // Shortest path by hop count between two nodes (gpu names, switch names or "host"); ties broken by the
  // order links appear in the file, so routes are deterministic. Throws InputError if unreachable.
  std::vector<RouteHop> route(const std::string& from, const std::string& to) const;
  // Bytes/s of the slowest link on the route between two nodes: what one transfer alone gets.
  double route_bandwidth(const std::string& from, const std::string& to) const;
  std::size_t gpu_index(const std::string& name) const; // throws InputError
  bool has_node(const std::string& name) const;

  // Replaces the bandwidth of every link on the path between gpu `gpu` and the host (experiments' axis).
  void set_host_link_bandwidth(double bytes_per_s);
  // Bytes/s of the slowest link on the route between GPU `gpu` (an index) and the host: what one copy alone gets.
  double host_link_bandwidth(std::size_t gpu) const;
};

Machine load_machine(const std::filesystem::path& path);
// Accepts a preset name (file stem under a presets directory) or a path to a YAML file.
Machine load_machine_or_preset(const std::string& name_or_path, const std::filesystem::path& presets_dir);
std::filesystem::path default_presets_dir();
// Throws InputError(source_name, ...) on dangling endpoints, duplicate names, non-positive bandwidth.
void validate_machine(const Machine& machine, const std::string& source_name);

} // namespace memsim
