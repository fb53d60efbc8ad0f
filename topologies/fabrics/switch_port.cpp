#include "topologies/fabrics/switch_port.hpp"

#include "topologies/platform.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {

namespace sg4 = simgrid::s4u;

simgrid::kernel::routing::NetPoint* add_switch_port(sg4::NetZone* star, const std::string& name)
{
  auto* sw = sg4::create_full_zone(name + "-switch");
  sw->set_parent(star);
  auto* router = sw->create_router(name + "-switch-router");
  sw->seal();
  auto* backplane = star->create_link(name + "-backplane", 1e18);
  backplane->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->seal();
  star->add_route(sw->get_netpoint(), nullptr, router, nullptr, {sg4::LinkInRoute(backplane)}, true);
  return router;
}

double fabric_link_bandwidth(double Bps, const std::vector<NodePort>& nodes)
{
  if (Bps > 0)
    return Bps;
  double widest = 0;
  for (const auto& n : nodes)
    widest = std::max(widest, n.uplink_Bps);
  return widest;
}

sg4::ClusterCallbacks node_leaves(FabricBuild& build, const std::string& prefix)
{
  return sg4::ClusterCallbacks([&build, prefix](sg4::NetZone* zone, const std::vector<unsigned long>& /*coord*/,
                                                unsigned long id) {
    auto* leaf = sg4::create_star_zone(fmt::format("{}{}", prefix, id));
    leaf->set_parent(zone);
    auto* gateway = add_switch_port(leaf, fmt::format("{}{}", prefix, id));
    if (id < build.nodes.size()) // SimGrid calls leaves in order, as FabricBuild::node needs
      build.node(static_cast<int>(id), leaf);
    return std::make_pair(leaf->get_netpoint(), gateway);
  });
}

} // namespace stepsim
