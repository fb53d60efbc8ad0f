// A fabric from the scenario (network.topology "custom"): named switches, the nodes hanging from
// each by their NICs, and links between switches with their bandwidth and latency. Flows follow
// the shortest path in hops (SimGrid's Dijkstra routing, each source's tree computed once and
// cached), so a user can describe any tree, ring or mesh of switches; where several shortest
// paths tie, SimGrid keeps one (no ECMP spread: give the links of such a fabric their combined
// bandwidth when its switches spread flows).
//
//   "switches": [ { "name": "tor0", "nodes": [0, 1] }, { "name": "tor1", "nodes": [2, 3] },
//                 { "name": "spine" } ],
//   "links": [ { "from": "tor0", "to": "spine", "bandwidth": "400Gbps", "latency": "500ns" },
//              { "from": "tor1", "to": "spine", "bandwidth": "400Gbps", "latency": "500ns" } ]
//
// Each switch is a star zone holding its nodes' zones and a switch port (topologies/
// switch_port.hpp); the links join the ports. Node i's NIC links are its links to its switch.
#include "topologies/platform.hpp"
#include "topologies/fabrics/switch_port.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <map>

namespace stepsim {
namespace {

namespace sg4   = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;

void build_custom(FabricBuild& build)
{
  const auto& net = build.spec.network;
  auto* fabric    = sg4::create_dijkstra_zone("custom", true);
  struct Switch {
    sg4::NetZone* zone;
    simgrid::kernel::routing::NetPoint* port;
  };
  std::map<std::string, Switch> switches;
  std::vector<sg4::NetZone*> switch_of(build.nodes.size(), nullptr);
  for (const auto& s : net.switches) {
    auto* zone = sg4::create_star_zone(s.name);
    zone->set_parent(fabric);
    switches[s.name] = Switch{zone, add_switch_port(zone, s.name)};
    for (int node : s.nodes)
      switch_of.at(static_cast<size_t>(node)) = zone;
  }
  for (size_t node = 0; node < build.nodes.size(); ++node)
    build.node(static_cast<int>(node), switch_of[node]);
  for (size_t i = 0; i < net.links.size(); ++i) {
    const auto& l = net.links[i];
    auto* link    = fabric->create_split_duplex_link(fmt::format("{}-{}-link{}", l.from, l.to, i), l.bandwidth_Bps);
    link->set_latency(l.latency_s)->seal();
    const auto& a = switches.at(l.from);
    const auto& b = switches.at(l.to);
    fabric->add_route(a.zone->get_netpoint(), b.zone->get_netpoint(), a.port, b.port,
                      {sg4::LinkInRoute(link, Direction::UP)}, true);
  }
}

const bool registered = FabricRegistry::add(
    "custom", "switches and links from network.switches / network.links, shortest-path routing",
    FabricBuilder{build_custom});

} // namespace
} // namespace stepsim
