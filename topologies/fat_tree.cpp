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
//
// ECMP: a real leaf spreads its flows over its uplinks to several spine switches by a hash of
// each flow. SimGrid routes a flow over one fixed list of links, so stepsim gives each leaf one
// aggregated uplink whose bandwidth is the sum of its parallel uplinks (a SHARED link: the flows
// that leave the leaf divide it max-min fairly). This is ECMP with a perfect hash: it never puts
// two elephant flows on one uplink while another idles, so it is the fabric's best case; one flow
// alone can use the whole aggregate, where on the real fabric it would get one uplink (the NIC,
// never faster than one uplink, is the narrower part for every real leaf). Several parallel
// links with a route per destination would model hash collisions, at the cost of a route table
// per pair of leaves.
#include "topologies/platform.hpp"
#include "topologies/switch_port.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {
namespace {

namespace sg4   = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;

void build_fat_tree(FabricBuild& build)
{
  const auto& spec  = build.spec;
  const auto& nodes = build.nodes;
  auto* core = sg4::create_star_zone("core");
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
      gateway   = add_switch_port(leaf, fmt::format("leaf{}", leaf_index));
      leaf_nics = 0;
      leaf_Bps  = 0;
    }
    leaf_nics += nodes[i].nics;
    leaf_Bps += nodes[i].uplink_Bps;
    build.node(static_cast<int>(i), leaf);
  }
  leaves.push_back(Leaf{leaf, gateway, leaf_Bps});
  for (size_t l = 0; l < leaves.size(); ++l) {
    auto* up = core->create_split_duplex_link(fmt::format("leaf{}-uplink", l), leaves[l].Bps / spec.network.oversubscription);
    up->set_latency(0)->seal();
    core->add_route(leaves[l].zone->get_netpoint(), nullptr, leaves[l].gateway, nullptr,
                    {sg4::LinkInRoute(up, Direction::UP)}, true);
  }
}

const bool registered = FabricRegistry::add(
    "fat_tree", "two-level fat-tree: leaf switches of leaf_radix NICs, uplinks thinned by oversubscription",
    FabricBuilder{build_fat_tree});

} // namespace
} // namespace stepsim
