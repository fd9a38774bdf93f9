#include "memsim/sim/network_model.hpp"

namespace memsim {

NetworkModel build_network_model(const Machine& machine)
{
  NetworkModel model;
  model.gpu_count = machine.gpus.size();
  const std::size_t nodes = model.node_count();
  model.capacity.assign(nodes, 1.0); // compute resources come first: resource index == node index
  // Link resources: split duplex has one per direction (forward = a -> b), shared duplex one for both.
  std::vector<std::size_t> forward(machine.links.size());
  std::vector<std::size_t> backward(machine.links.size());
  for (std::size_t i = 0; i < machine.links.size(); ++i) {
    const Link& link = machine.links[i];
    forward[i] = model.capacity.size();
    model.capacity.push_back(link.bandwidth);
    if (link.duplex == Duplex::split) {
      backward[i] = model.capacity.size();
      model.capacity.push_back(link.bandwidth);
    } else {
      backward[i] = forward[i];
    }
  }
  std::vector<std::string> names;
  for (const Gpu& gpu : machine.gpus)
    names.push_back(gpu.name);
  names.emplace_back(kHostNodeName);
  model.route_resources.assign(nodes * nodes, {});
  model.route_latency_s.assign(nodes * nodes, 0.0);
  for (std::size_t from = 0; from < nodes; ++from)
    for (std::size_t to = 0; to < nodes; ++to) {
      if (from == to)
        continue;
      double latency = 0;
      auto& resources = model.route_resources[from * nodes + to];
      for (const RouteHop& hop : machine.route(names[from], names[to])) {
        resources.push_back(hop.forward ? forward[hop.link] : backward[hop.link]);
        latency += machine.links[hop.link].latency_s;
      }
      model.route_latency_s[from * nodes + to] = latency;
    }
  return model;
}

} // namespace memsim
