// A two-level fat-tree: nodes under leaf switches (leaf_radix NICs per leaf, in node order), each
// leaf joined to the core by one aggregated uplink carrying the leaf's whole NIC bandwidth
// divided by the oversubscription. With oversubscription 1 the fabric is non-blocking: only the
// NICs limit traffic.
//
//   node ─┐              ┌─ node
//   node ─┼─ leaf ═╗  ╔═ leaf ─┼─ node
//   node ─┘       core        └─ node
//
// Each switch is a SimGrid star zone: a route is the sender's links up and the receiver's links
// down, found without a graph search.
#include "topologies/platform.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {
namespace {

namespace sg4   = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;

std::vector<sg4::NetZone*> build_fat_tree(const PlatformSpec& spec, const std::vector<NodePort>& nodes)
{
  auto* core = sg4::create_star_zone("core");
  std::vector<sg4::NetZone*> parent(nodes.size(), nullptr);
  sg4::NetZone* leaf  = nullptr;
  int leaf_nics       = 0;
  double leaf_Bps     = 0;
  int leaf_index      = -1;
  struct Leaf {
    sg4::NetZone* zone;
    simgrid::kernel::routing::NetPoint* gateway;
    double Bps;
  };
  std::vector<Leaf> leaves;
  simgrid::kernel::routing::NetPoint* gateway = nullptr;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (leaf == nullptr || leaf_nics + nodes[i].nics > std::max(spec.network.leaf_radix, nodes[i].nics)) {
      if (leaf != nullptr)
        leaves.push_back(Leaf{leaf, gateway, leaf_Bps});
      leaf = sg4::create_star_zone(fmt::format("leaf{}", ++leaf_index));
      leaf->set_parent(core);
      // SimGrid routes between zones through gateways that live inside child zones: the switch
      // is a one-router zone, reached over its backplane, which no realistic traffic fills.
      auto* sw = sg4::create_full_zone(fmt::format("leaf{}-switch", leaf_index));
      sw->set_parent(leaf);
      gateway = sw->create_router(fmt::format("leaf{}-switch-router", leaf_index));
      sw->seal();
      auto* backplane = leaf->create_link(fmt::format("leaf{}-backplane", leaf_index), 1e18);
      backplane->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->seal();
      leaf->add_route(sw->get_netpoint(), nullptr, gateway, nullptr, {sg4::LinkInRoute(backplane)}, true);
      leaf_nics = 0;
      leaf_Bps  = 0;
    }
    leaf_nics += nodes[i].nics;
    leaf_Bps += nodes[i].uplink_Bps;
    parent[i] = leaf;
  }
  leaves.push_back(Leaf{leaf, gateway, leaf_Bps});
  for (size_t l = 0; l < leaves.size(); ++l) {
    auto* up = core->create_split_duplex_link(fmt::format("leaf{}-uplink", l), leaves[l].Bps / spec.network.oversubscription);
    up->set_latency(0)->seal();
    core->add_route(leaves[l].zone->get_netpoint(), nullptr, leaves[l].gateway, nullptr,
                    {sg4::LinkInRoute(up, Direction::UP)}, true);
  }
  return parent;
}

const bool registered = FabricRegistry::add(
    "fat_tree", "two-level fat-tree: leaf switches of leaf_radix NICs, uplinks thinned by oversubscription",
    FabricBuilder{build_fat_tree});

} // namespace
} // namespace stepsim
