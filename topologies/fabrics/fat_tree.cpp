// A fat-tree: nodes under leaf switches (leaf_radix NICs per leaf, in node order), each leaf
// joined to the switch above by one aggregated uplink carrying the leaf's whole NIC bandwidth
// divided by the oversubscription. With `levels: 3` the leaves are grouped in pods of pod_radix
// leaves (a SuperPOD's scalable units) and each pod is joined to the core by one uplink of its
// leaves' uplinks together, thinned again by core_oversubscription. With every oversubscription
// 1 the fabric is non-blocking: only the NICs limit traffic.
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
#include "topologies/fabrics/switch_port.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {
namespace {

namespace sg4   = simgrid::s4u;
using Direction = sg4::LinkInRoute::Direction;

struct Switch {
  sg4::NetZone* zone;
  simgrid::kernel::routing::NetPoint* gateway;
  double Bps; // what the NICs below it can send together
};

// Joins a switch to the star above it by one aggregated uplink "{name}-uplink" of its NICs'
// bandwidth thinned by `oversubscription`; returns its up half.
const sg4::Link* add_uplink(sg4::NetZone* above, const Switch& below, const std::string& name, double oversubscription)
{
  auto* up = above->create_split_duplex_link(name + "-uplink", below.Bps / oversubscription);
  up->set_latency(0)->seal();
  above->add_route(below.zone->get_netpoint(), nullptr, below.gateway, nullptr, {sg4::LinkInRoute(up, Direction::UP)},
                   true);
  return up->get_link_up();
}

// A switch "{name}": a star zone under `parent` with its port (topologies/fabrics/switch_port.hpp).
Switch open_switch(sg4::NetZone* parent, const std::string& name)
{
  auto* zone = sg4::create_star_zone(name);
  zone->set_parent(parent);
  return Switch{zone, add_switch_port(zone, name), 0};
}

void build_fat_tree(FabricBuild& build)
{
  const auto& spec  = build.spec;
  const auto& nodes = build.nodes;
  const bool pods   = spec.network.levels == 3;
  auto* core        = sg4::create_star_zone("core");
  std::vector<Switch> leaves, all_pods;
  Switch pod{nullptr, nullptr, 0};
  int leaves_in_pod = 0;
  // The star a new leaf goes under: the core, or the current pod (a new one every pod_radix leaves).
  auto parent_of_new_leaf = [&]() -> sg4::NetZone* {
    if (!pods)
      return core;
    if (pod.zone == nullptr || leaves_in_pod == spec.network.pod_radix) {
      if (pod.zone != nullptr)
        all_pods.push_back(pod);
      pod           = open_switch(core, fmt::format("pod{}", all_pods.size()));
      leaves_in_pod = 0;
    }
    ++leaves_in_pod;
    return pod.zone;
  };
  Switch leaf{nullptr, nullptr, 0};
  int leaf_nics = 0;
  std::vector<sg4::NetZone*> parent_of_leaf;
  std::vector<size_t> leaf_of_node, pod_of_node;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (leaf.zone == nullptr || leaf_nics + nodes[i].nics > std::max(spec.network.leaf_radix, nodes[i].nics)) {
      if (leaf.zone != nullptr)
        leaves.push_back(leaf);
      sg4::NetZone* parent = parent_of_new_leaf();
      parent_of_leaf.push_back(parent);
      leaf      = open_switch(parent, fmt::format("leaf{}", leaves.size()));
      leaf_nics = 0;
    }
    leaf_nics += nodes[i].nics;
    leaf.Bps += nodes[i].uplink_Bps;
    if (pods)
      pod.Bps += nodes[i].uplink_Bps;
    build.node(static_cast<int>(i), leaf.zone);
    leaf_of_node.push_back(leaves.size());
    pod_of_node.push_back(all_pods.size());
  }
  leaves.push_back(leaf);
  if (pods)
    all_pods.push_back(pod);
  // A leaf's uplink lives in the star above it (the core, or its pod).
  std::vector<const sg4::Link*> leaf_uplinks, pod_uplinks;
  for (size_t l = 0; l < leaves.size(); ++l)
    leaf_uplinks.push_back(
        add_uplink(parent_of_leaf[l], leaves[l], fmt::format("leaf{}", l), spec.network.oversubscription));
  if (pods) // each pod: its leaves' NICs together, thinned by the core's oversubscription
    for (size_t p = 0; p < all_pods.size(); ++p)
      pod_uplinks.push_back(add_uplink(core, all_pods[p], fmt::format("pod{}", p),
                                       spec.network.oversubscription * spec.network.core_oversubscription));
  // Each GPU's uplinks thinner than the NICs below them, bottom to top (FabricBuild::uplinks):
  // its leaf's where oversubscribed; its pod's where the core is (with the core at 1 a pod's
  // uplink carries what its leaves' uplinks together carry, and never limits more than they do).
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::vector<const sg4::Link*> up;
    if (spec.network.oversubscription > 1)
      up.push_back(leaf_uplinks[leaf_of_node[i]]);
    if (pods && spec.network.core_oversubscription > 1)
      up.push_back(pod_uplinks[pod_of_node[i]]);
    for (int local = 0; local < nodes[i].group->gpus_per_node; ++local)
      build.uplinks.at(static_cast<size_t>(nodes[i].first_gpu + local)) = up;
  }
}

const bool registered = FabricRegistry::add(
    "fat_tree",
    "fat-tree of 2 or 3 levels: leaf switches of leaf_radix NICs (and pods of pod_radix leaves), uplinks thinned by "
    "oversubscription",
    FabricBuilder{build_fat_tree, true}); // its nodes hung last: it routes to the leaves, not into the nodes

} // namespace
} // namespace stepsim
