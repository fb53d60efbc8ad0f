// A two-level fat-tree: each NIC on a leaf switch (leaf_radix NICs per leaf, in node order), each
// leaf joined to the core by one aggregated uplink carrying the leaf's whole NIC bandwidth
// divided by the oversubscription. With oversubscription 1 the fabric is non-blocking: only the
// NICs limit traffic.
//
//   nic ─┐            ┌─ nic
//   nic ─┼─ leaf ═╗ ╔═ leaf ─┼─ nic
//   nic ─┘        core       └─ nic
#include "topologies/platform.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

namespace stepsim {
namespace {

namespace sg4   = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;

void build_fat_tree(FabricContext& f)
{
  const int radix = f.spec->network.leaf_radix;
  auto* core      = f.zone->create_router("core");
  simgrid::kernel::routing::NetPoint* leaf = nullptr;
  double leaf_bandwidth                    = 0;
  int leaf_index                           = -1;
  auto close_leaf = [&] {
    if (leaf == nullptr)
      return;
    auto* up = f.zone->create_split_duplex_link(fmt::format("leaf{}-uplink", leaf_index),
                                                leaf_bandwidth / f.spec->network.oversubscription);
    up->set_latency(0)->seal();
    f.zone->add_route(leaf, core, nullptr, nullptr, {sg4::LinkInRoute(up, Direction::UP)}, true);
  };
  for (size_t i = 0; i < f.nics.size(); ++i) {
    if (i % radix == 0) {
      close_leaf();
      leaf           = f.zone->create_router(fmt::format("leaf{}", ++leaf_index));
      leaf_bandwidth = 0;
    }
    const NicPort& nic = f.nics[i];
    auto* link = f.zone->create_split_duplex_link(fmt::format("node{}-nic{}-link", nic.node, nic.rail), nic.bandwidth_Bps);
    // Half the NIC-to-NIC latency on each end, so any two NICs are latency_s apart.
    link->set_latency(nic.latency_s / 2)->seal();
    f.zone->add_route(nic.point, leaf, nullptr, nullptr, {sg4::LinkInRoute(link, Direction::UP)}, true);
    leaf_bandwidth += nic.bandwidth_Bps;
  }
  close_leaf();
}

const bool registered = FabricRegistry::add(
    "fat_tree", "two-level fat-tree: leaf switches of leaf_radix NICs, uplinks thinned by oversubscription",
    FabricBuilder{build_fat_tree});

} // namespace
} // namespace stepsim
