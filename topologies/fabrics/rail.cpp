// A rail-optimized fabric (network.topology "rail_optimized"), as NVIDIA's DGX SuperPOD and most
// H100 clusters are cabled: NIC k of every node of a scalable unit (network.leaf_radix nodes) on
// rail switch k of that unit, and the rail switches joined by a spine. Traffic between GPU k of
// two nodes of a unit crosses rail switch k alone; anything else climbs to the spine.
//
//                  rail-fabric (the root zone, empty: no route crosses it)
//                     │
//                  spine (star zone: each rail leaf's uplink, the leaf's NIC bandwidth / oversubscription)
//          ┌──────────┴──────────┐
//   su0-rail0 (star)       su0-rail1 (star)          one zone per (unit, rail); its switch port
//    │        │             │        │               is its gateway to the spine
//  node0-rail0 node1-rail0  node0-rail1 node1-rail1  one zone per (node, NIC): the GPUs of that
//  gpu0─nic0   gpu0─nic0    gpu1─nic1   gpu1─nic1    NIC, their NVLink ports and the NIC
//
// Why the node is split: SimGrid routes between two zones through one gateway per zone, so a
// node zone with all its GPUs could only leave the node through one NIC for every GPU. Here each
// (node, NIC) is a zone of its own inside its rail, so GPU k of a node reaches the fabric by NIC
// k. GPUs of one node behind different NICs reach each other over the NVSwitch by a SimGrid
// bypass route between their two zones (declared at the spine, the zones' common ancestor; 56
// per 8-GPU node), which replaces the path over the rails. Every route is found from the zone
// tree and one hash lookup, with no route table and no graph search, so building and routing
// stay linear in the GPUs built: at 1,024 nodes the full fabric is 8,192 small zones.
//
// GPU i to GPU j != i of another node leaves by NIC i and climbs to the spine (rail i up, rail j
// down): the route NCCL takes without PXN. NCCL's PXN would first move the data over NVLink to
// GPU j of the source node and use rail j; stepsim's collectives keep every cross-node ring on
// one rail (peers with the same local index), where both choices are the same path.
//
// The node's switch is modelled as a non-blocking NVSwitch whatever intra_node.type says (the
// rail clusters in the field are NVSwitch nodes), and the node's CPU host is not built here.
//
// The (node, NIC) zones are filled detached and hung in their rails once all are built
// (detached_full_zone, topologies/platform.hpp): filled where they hang, SimGrid's name checks
// cost links × zones. The rails themselves hang under the spine only once every (node, NIC) zone
// is sealed in them (seal_zone_and_hosts): sealed in the tree, each would walk every host of it.
#include "sim/core/link_bandwidth.hpp"
#include "topologies/platform.hpp"
#include "topologies/fabrics/switch_port.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <map>

namespace stepsim {
namespace {

namespace sg4   = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;
using NetPoint  = simgrid::kernel::routing::NetPoint;

struct RailLeaf {
  sg4::NetZone* zone = nullptr;
  NetPoint* port     = nullptr;
  double nic_Bps     = 0; // all NICs under it
  sg4::SplitDuplexLink* uplink = nullptr; // its uplink to the spine, once built
};

// The zone of one NIC of a node: its GPUs, their NVLink port and the NIC.
struct NicZone {
  sg4::NetZone* zone = nullptr;
  NetPoint* nvlink   = nullptr; // where the node's other NICs' GPUs are reached from (bypass routes)
  RailLeaf* leaf     = nullptr; // the rail it hangs in
  NetPoint* nic      = nullptr; // its gateway to the rail
  std::vector<sg4::Host*> gpus;  // sealed with it
};

// What is left to do for a node once every zone is filled: hang its NIC zones in their rails,
// and join them over the NVSwitch (`nvswitch`, null when not).
struct NodeZones {
  std::vector<NicZone> nic_zones;
  sg4::Link* nvswitch = nullptr;
};

void build_rail(FabricBuild& build)
{
  const auto& net = build.spec.network;
  // The root of the zone tree, made first (SimGrid's first zone is its root): the spine hangs in
  // it only once the rails are sealed, so that sealing them walks no host (seal_zone_and_hosts).
  auto* root      = sg4::create_full_zone("rail-fabric");
  auto* spine     = detached_star_zone("spine", root);
  std::map<std::pair<int, int>, RailLeaf> leaves; // (unit, rail)
  std::vector<RailLeaf*> leaves_built;             // in the order they were built
  std::vector<NodeZones> nodes;

  for (const auto& port : build.nodes) {
    const NodeGroupSpec& g = *port.group;
    const int n            = port.node;
    const int unit         = n / net.leaf_radix;
    const int gpus_per_nic = g.gpus_per_node / g.nic.count;
    int used_gpus          = 0;
    for (int local = 0; local < g.gpus_per_node; ++local)
      used_gpus += build.used(n, local) ? 1 : 0;
    const bool nvlinks = used_gpus > 1; // a lone GPU of a reduced platform talks over no NVLink
    std::vector<NicZone> nic_zones;
    for (int k = 0; k < g.nic.count; ++k) {
      auto& leaf = leaves[{unit, k}];
      leaf.nic_Bps += g.nic.bandwidth_Bps;
      bool needed = false;
      for (int local = k * gpus_per_nic; local < (k + 1) * gpus_per_nic; ++local)
        needed = needed || build.used(n, local);
      if (!needed)
        continue;
      if (leaf.zone == nullptr) {
        leaf.zone = detached_star_zone(fmt::format("su{}-rail{}", unit, k), spine);
        leaves_built.push_back(&leaf);
        leaf.port = add_switch_port(leaf.zone, fmt::format("su{}-rail{}", unit, k));
      }
      auto* zone   = detached_full_zone(fmt::format("node{}-rail{}", n, k), leaf.zone);
      auto* nic    = zone->create_router(fmt::format("node{}-nic{}", n, k));
      auto* nvport = nvlinks ? zone->create_router(fmt::format("node{}-rail{}-{}", n, k, g.intra_node.type)) : nullptr;
      // Half the NIC-to-NIC latency on each end, so any two NICs are nic.latency apart.
      auto* nic_link = zone->create_split_duplex_link(fmt::format("node{}-nic{}-link", n, k), g.nic.bandwidth_Bps);
      mark_transport_latency(nic_link, g.nic.transport_latency_s / 2);
      nic_link->set_latency(g.nic.latency_s / 2)->seal();
      std::vector<std::pair<sg4::Host*, sg4::Link*>> gpus; // with their NVLink
      NicZone nic_zone{zone, nvport, &leaf, nic, {}};
      for (int local = k * gpus_per_nic; local < (k + 1) * gpus_per_nic; ++local) {
        if (!build.used(n, local))
          continue;
        auto* gpu = build.gpu(n, local, zone);
        std::vector<sg4::LinkInRoute> to_nic;
        if (gpus_per_nic > 1) { // as in the node zone: a PCIe link twice the NIC's, the NIC the narrower part
          auto* pcie = zone->create_split_duplex_link(fmt::format("node{}-gpu{}-to-nic", n, local), 2 * g.nic.bandwidth_Bps);
          pcie->set_latency(0)->seal();
          to_nic.emplace_back(pcie, Direction::UP);
        }
        to_nic.emplace_back(nic_link, Direction::UP);
        zone->add_route(gpu->get_netpoint(), nic, nullptr, nullptr, to_nic, true);
        sg4::Link* nvlink = nullptr;
        if (nvlinks) {
          nvlink = zone->create_split_duplex_link(fmt::format("node{}-gpu{}-{}", n, local, g.intra_node.type),
                                                  g.intra_node.bandwidth_Bps);
          nvlink->set_latency(g.intra_node.latency_s / 2)->seal();
          zone->add_route(gpu->get_netpoint(), nvport, nullptr, nullptr, {sg4::LinkInRoute(nvlink, Direction::UP)}, true);
          for (const auto& [other, other_link] : gpus)
            zone->add_route(other->get_netpoint(), gpu->get_netpoint(), nullptr, nullptr,
                            {sg4::LinkInRoute(other_link, Direction::UP), sg4::LinkInRoute(nvlink, Direction::DOWN)},
                            true);
        }
        gpus.emplace_back(gpu, nvlink);
        nic_zone.gpus.push_back(gpu);
      }
      nic_zones.push_back(std::move(nic_zone));
    }
    nodes.push_back(NodeZones{nic_zones, nullptr});
    if (nic_zones.size() < 2 || !nvlinks)
      continue;
    // The NVSwitch between GPUs behind different NICs: non-blocking, so a FATPIPE (each flow up to
    // the GPU's NVLink bandwidth, which its own links already limit) that adds no latency.
    auto* nvswitch = spine->create_link(fmt::format("node{}-{}", n, g.intra_node.type), g.intra_node.bandwidth_Bps);
    nvswitch->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->set_latency(0)->seal();
    nodes.back().nvswitch = nvswitch;
  }
  // The spine's uplinks first: once the rails hang in it, each new link's name is checked
  // against every zone of the tree.
  for (auto& [key, leaf] : leaves) {
    if (leaf.zone == nullptr)
      continue;
    auto* up = spine->create_split_duplex_link(fmt::format("su{}-rail{}-uplink", key.first, key.second),
                                               leaf.nic_Bps / net.oversubscription);
    up->set_latency(0)->seal();
    leaf.uplink = up;
  }
  // Every zone filled: each hung in its rail, in the order it was built, and sealed there while
  // the rails are still away from the tree; then the rails hang in the spine and are sealed
  // there, and the spine hangs in the root.
  for (const auto& node : nodes)
    for (const auto& z : node.nic_zones) {
      z.zone->set_parent(z.leaf->zone);
      seal_zone_and_hosts(z.zone, z.gpus);
      z.leaf->zone->add_route(z.zone->get_netpoint(), nullptr, z.nic, nullptr, {}, true);
    }
  for (auto* leaf : leaves_built)
    leaf->zone->set_parent(spine);
  for (auto& [key, leaf] : leaves)
    if (leaf.zone != nullptr)
      spine->add_route(leaf.zone->get_netpoint(), nullptr, leaf.port, nullptr,
                       {sg4::LinkInRoute(leaf.uplink, Direction::UP)}, true);
  for (const auto& node : nodes) {
    if (node.nvswitch == nullptr)
      continue;
    for (const auto& a : node.nic_zones)
      for (const auto& b : node.nic_zones)
        if (a.zone != b.zone)
          spine->add_bypass_route(a.zone->get_netpoint(), b.zone->get_netpoint(), a.nvlink, b.nvlink,
                                  {sg4::LinkInRoute(node.nvswitch)});
  }
  for (auto* leaf : leaves_built)
    leaf->zone->seal();
  spine->set_parent(root);
  // Where oversubscribed, a rail's uplink is thinner than its NICs: each GPU's is its NIC's rail's
  // (FabricBuild::uplinks).
  if (net.oversubscription > 1)
    for (const auto& port : build.nodes) {
      const NodeGroupSpec& g = *port.group;
      const int gpus_per_nic = g.gpus_per_node / g.nic.count;
      for (int local = 0; local < g.gpus_per_node; ++local)
        if (const auto& leaf = leaves[{port.node / net.leaf_radix, local / gpus_per_nic}]; leaf.uplink != nullptr)
          build.uplinks.at(static_cast<size_t>(port.first_gpu + local)) = {leaf.uplink->get_link_up()};
    }
}

const bool registered = FabricRegistry::add(
    "rail_optimized", "NIC k of every node on rail switch k of its unit (leaf_radix nodes), rails joined by a spine",
    FabricBuilder{build_rail});

} // namespace
} // namespace stepsim
