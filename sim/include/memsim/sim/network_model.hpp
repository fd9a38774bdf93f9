#pragma once
// The machine as shared resources for the fast engine: one compute resource per GPU and one for the host CPU
// (concurrent work on one node shares it equally, as SimGrid's CPU model does), one bandwidth resource per link
// direction (split duplex) or per link (shared duplex), and for every ordered pair of nodes the resources its
// route crosses and the route's latency (Machine::route, the same routes the SimGrid platform uses).
#include "memsim/hwmodels/machine.hpp"

#include <cstddef>
#include <vector>

namespace memsim {

struct NetworkModel {
  std::vector<double> capacity; // per resource: 1 (seconds of work per second) or bytes/s
  std::size_t gpu_count = 0;
  std::vector<std::vector<std::size_t>> route_resources; // [from * nodes + to]
  std::vector<double> route_latency_s;                   // [from * nodes + to]

  std::size_t node_count() const { return gpu_count + 1; }
  // Node index of a GPU, or of the host for kHostNode (-1).
  std::size_t node(int gpu_or_host) const
  {
    return gpu_or_host < 0 ? gpu_count : static_cast<std::size_t>(gpu_or_host);
  }
  std::size_t compute_resource(int gpu_or_host) const { return node(gpu_or_host); }
  const std::vector<std::size_t>& route(int from, int to) const
  {
    return route_resources[node(from) * node_count() + node(to)];
  }
  double latency_s(int from, int to) const { return route_latency_s[node(from) * node_count() + node(to)]; }
};

NetworkModel build_network_model(const Machine& machine);

} // namespace memsim
