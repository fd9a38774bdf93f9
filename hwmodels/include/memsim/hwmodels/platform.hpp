#pragma once
// Builds the SimGrid 3.32 platform of a Machine: one host per GPU plus "host", one router per switch,
// links as split-duplex or shared links, and explicit routes (Machine::route) between every pair of
// hosts. Kept in its own target (memsim_platform) so the rest of hwmodels does not need SimGrid.
#include "memsim/hwmodels/machine.hpp"

#include <cstdint>
#include <vector>

namespace simgrid::s4u {
class Engine;
class Host;
} // namespace simgrid::s4u

namespace memsim {

struct SimPlatform {
  std::vector<simgrid::s4u::Host*> gpu_hosts; // by gpu index
  simgrid::s4u::Host* host = nullptr;         // the CPU side
  // Speed given to every SimGrid host: compute work is expressed as seconds * kSimSpeed flops so that
  // durations stay exact with SimGrid's precision.
  static constexpr double kSimSpeed = 1e9;

  // Route latency between two SimGrid hosts, by node index (gpu index; the host is gpu_hosts.size()).
  // SimGrid's CM02 weighs a flow's bandwidth share by its route latency (RTT unfairness; a zero-latency flow
  // would get almost nothing next to a 1us one), which PCIe/NVLink do not have. So the SimGrid links carry no
  // latency and transfer() pays the route's latency before the bytes flow: alone, L + B/W exactly, and
  // concurrent flows share links max-min fairly.
  std::vector<double> route_latency_s; // [from * node_count() + to]
  std::size_t node_count() const { return gpu_hosts.size() + 1; }
  std::size_t host_node() const { return gpu_hosts.size(); }
  simgrid::s4u::Host* node_host(std::size_t node) const { return node == host_node() ? host : gpu_hosts[node]; }
  double latency_s(std::size_t from, std::size_t to) const { return route_latency_s[from * node_count() + to]; }
};

// Must be called once, on a fresh Engine, before any actor is created. Sets the network model (CM02, no
// cross-traffic, no TCP-gamma window bound, latency/bandwidth factors 1) so that a lone transfer() of B bytes
// over a route of bottleneck bandwidth W and latency L takes exactly L + B/W.
SimPlatform build_platform(simgrid::s4u::Engine& engine, const Machine& machine);

// Moves `bytes` from node `from` to node `to` (indices as in SimPlatform): sleeps the route latency, then a
// SimGrid communication over the route. Blocks the calling actor; call it from inside an actor only.
void transfer(const SimPlatform& platform, std::size_t from, std::size_t to, std::uint64_t bytes);

// Silences SimGrid's own logging (stdout/stderr stay clean for `--json`); call before creating the Engine.
void silence_simgrid_logging();

} // namespace memsim
