// A dragonfly (network.dragonfly): `groups` groups, each of `chassis` chassis of `routers`
// routers, `nodes_per_router` nodes on each router (in node order). SimGrid's DragonflyZone (after
// Kim et al., ISCA 2008, as in Cray Cascade) joins every router of a chassis to the others
// (`router_links` parallel links each), the routers at the same place of every chassis of a group
// (`chassis_links`), and the groups all to all (`group_links`); it routes minimally: up to one
// hop inside the source group, one global hop, one inside the destination group. Routes are
// computed from the coordinates, with no table.
#include "topologies/platform.hpp"
#include "topologies/fabrics/switch_port.hpp"

#include <simgrid/s4u.hpp>

namespace stepsim {
namespace {

namespace sg4 = simgrid::s4u;

void build_dragonfly(FabricBuild& build)
{
  const auto& d = build.spec.network.dragonfly;
  auto u        = [](int v) { return static_cast<unsigned>(v); };
  sg4::DragonflyParams params({u(d.groups), u(d.group_links)}, {u(d.chassis), u(d.chassis_links)},
                              {u(d.routers), u(d.router_links)}, u(d.nodes_per_router));
  sg4::create_dragonfly_zone("dragonfly", nullptr, params, node_leaves(build, "dragonfly"),
                             fabric_link_bandwidth(d.link.bandwidth_Bps, build.nodes), d.link.latency_s,
                             sg4::Link::SharingPolicy::SPLITDUPLEX);
}

const bool registered = FabricRegistry::add(
    "dragonfly", "SimGrid dragonfly: groups of chassis of routers (network.dragonfly), minimal routing",
    FabricBuilder{build_dragonfly});

} // namespace
} // namespace stepsim
