#include "memsim/hwmodels/platform.hpp"

#include "memsim/common/error.hpp"

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <fmt/format.h>

namespace memsim {

namespace sg4 = simgrid::s4u;

void silence_simgrid_logging()
{
  // "critical" still shows SimGrid's own deadlock report; the simulator detects deadlocks itself first.
  xbt_log_control_set("root.thresh:critical");
}

SimPlatform build_platform(sg4::Engine& engine, const Machine& machine)
{
  silence_simgrid_logging();
  // CM02 without its TCP corrections: LV08's latency x13.01 and bandwidth x0.97 are fitted to TCP over
  // Ethernet, not PCIe/NVLink. Cross-traffic would charge 5% of every flow to the reverse direction, and the
  // TCP-gamma bound caps a flow at gamma / (2 latency): all three break "alone, L + B/W".
  // The "key:value" form lets SimGrid parse each value with the option's own type.
  for (const char* setting : {"network/model:CM02", "network/crosstraffic:0", "network/TCP-gamma:0",
                              "network/latency-factor:1", "network/bandwidth-factor:1", "network/weight-S:0"})
    sg4::Engine::set_config(setting);

  sg4::NetZone* zone = sg4::create_full_zone("memsim");
  SimPlatform platform;
  // SimGrid wants unique names across hosts, routers and links; machine names are unique among nodes, and
  // links get their index so that no link name can collide with a node.
  for (const Gpu& gpu : machine.gpus)
    platform.gpu_hosts.push_back(zone->create_host(gpu.name, SimPlatform::kSimSpeed)->seal());
  platform.host = zone->create_host(kHostNodeName, SimPlatform::kSimSpeed)->seal();
  for (const std::string& name : machine.switches)
    zone->create_router(name);

  // One SimGrid link per direction for split duplex; one shared constraint for both directions otherwise.
  struct SimLink {
    sg4::Link* shared = nullptr;
    sg4::SplitDuplexLink* split = nullptr;
  };
  std::vector<SimLink> links;
  links.reserve(machine.links.size());
  for (std::size_t i = 0; i < machine.links.size(); ++i) {
    const Link& link = machine.links[i];
    const std::string name = fmt::format("link{}:{}", i, link.name);
    SimLink sim_link;
    if (link.duplex == Duplex::split) {
      sim_link.split = zone->create_split_duplex_link(name, link.bandwidth);
      sim_link.split->set_latency(0)->seal();
    } else {
      sim_link.shared = zone->create_link(name, link.bandwidth);
      sim_link.shared->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)->set_latency(0)->seal();
    }
    links.push_back(sim_link);
  }

  // Explicit routes for every ordered pair of hosts: the topology's shortest path, each hop in its direction
  // (a -> b is UP). Latency is kept out of SimGrid (see SimPlatform::route_latency_s).
  std::vector<std::string> node_names;
  for (const Gpu& gpu : machine.gpus)
    node_names.push_back(gpu.name);
  node_names.emplace_back(kHostNodeName);
  const std::size_t nodes = platform.node_count();
  platform.route_latency_s.assign(nodes * nodes, 0.0);
  for (std::size_t from = 0; from < nodes; ++from) {
    for (std::size_t to = 0; to < nodes; ++to) {
      if (from == to)
        continue;
      std::vector<sg4::LinkInRoute> hops;
      double latency = 0;
      for (const RouteHop& hop : machine.route(node_names[from], node_names[to])) {
        const SimLink& sim_link = links[hop.link];
        if (sim_link.split)
          hops.emplace_back(sim_link.split,
                            hop.forward ? sg4::LinkInRoute::Direction::UP : sg4::LinkInRoute::Direction::DOWN);
        else
          hops.emplace_back(sim_link.shared);
        latency += machine.links[hop.link].latency_s;
      }
      platform.route_latency_s[from * nodes + to] = latency;
      zone->add_route(platform.node_host(from)->get_netpoint(), platform.node_host(to)->get_netpoint(), nullptr,
                      nullptr, hops, false);
    }
  }
  zone->seal();
  (void)engine;
  return platform;
}

void transfer(const SimPlatform& platform, std::size_t from, std::size_t to, std::uint64_t bytes)
{
  const double latency = platform.latency_s(from, to);
  if (latency > 0)
    sg4::this_actor::sleep_for(latency);
  if (bytes > 0)
    sg4::Comm::sendto(platform.node_host(from), platform.node_host(to), bytes);
}

} // namespace memsim
