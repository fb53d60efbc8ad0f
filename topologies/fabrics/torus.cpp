// A torus (network.torus.dimensions = [X, Y, ...]): one router per point of the grid, joined to
// its two neighbours along every dimension with wrap-around, and one node on each router (in node
// order, the first dimension fastest). SimGrid's TorusZone routes in dimension order: a flow
// first moves along dimension 0, then 1, ..., each hop the shorter way round, so the path between
// two nodes is their Manhattan distance on the torus, and hops add their latency. Routes are
// computed from the coordinates, with no table, so routing stays cheap at any size.
//
//   node─R──R──R─┐      each R: a star zone holding the node's zone and the router
//        │  │  │ │      ("torus{N}-switch-router"); ─ and │: torus links
//   node─R──R──R─┘      (network.torus.link_bandwidth, link_latency)
#include "topologies/platform.hpp"
#include "topologies/fabrics/switch_port.hpp"

#include <simgrid/s4u.hpp>

namespace stepsim {
namespace {

namespace sg4 = simgrid::s4u;

void build_torus(FabricBuild& build)
{
  const auto& t = build.spec.network.torus;
  std::vector<unsigned long> dimensions(t.dimensions.begin(), t.dimensions.end());
  // SPLITDUPLEX: each direction of a torus link carries its own traffic, as real torus links do.
  sg4::create_torus_zone("torus", nullptr, dimensions, node_leaves(build, "torus"),
                         fabric_link_bandwidth(t.link.bandwidth_Bps, build.nodes), t.link.latency_s,
                         sg4::Link::SharingPolicy::SPLITDUPLEX);
}

const bool registered = FabricRegistry::add(
    "torus", "torus of network.torus.dimensions routers, one node each, dimension-order routing",
    FabricBuilder{build_torus});

} // namespace
} // namespace stepsim
