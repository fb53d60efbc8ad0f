// Builds the SimGrid platform of a scenario inside the running SimGrid engine: one host per GPU,
// the links of each node (NVSwitch or PCIe) and of the cluster fabric.
//
// The platform is a hierarchy of SimGrid zones, so that routing stays cheap at 16,384 GPUs: each
// node is a small zone of its own (GPUs, their switch, their NICs, one gateway), and the fabric
// joins the node zones at their gateways. A flow between nodes is limited by its GPU's NIC link
// (with one NIC per GPU the NIC link joins the GPU to the gateway directly), shared with other
// flows there and on the fabric's links above it.
//
//   GPU ─nvlink─┐                            node zone (Floyd routing)
//   GPU ─nvlink─┼─ nvswitch
//   GPU ─pcie── nic ─nic link─ gateway ── fabric     fabric: registered builders ("fat_tree")
#pragma once

#include "sim/registry.hpp"
#include "sim/scenario.hpp"

#include <functional>
#include <string>
#include <vector>

namespace simgrid::s4u {
class Host;
class NetZone;
} // namespace simgrid::s4u

namespace stepsim {

struct BuiltPlatform {
  std::vector<simgrid::s4u::Host*> gpus; // GPU g of the job runs rank g; null where not built
  std::vector<int> group_of_gpu;         // index into PlatformSpec::node_groups
};

// What a fabric sees of a node: its index and the bandwidth of its uplink (its NICs together).
struct NodePort {
  int node             = 0;
  int nics             = 0;
  double uplink_Bps    = 0;
};

// A fabric builds its switches as zones and says which zone each node hangs from; the platform
// builder then creates the node's zone inside it and joins it with the node's uplink.
struct FabricBuilder {
  std::function<std::vector<simgrid::s4u::NetZone*>(const PlatformSpec& spec, const std::vector<NodePort>& nodes)>
      build;
};
using FabricRegistry = Registry<FabricBuilder>;

// SimGrid's network model settings for GPU interconnects; call before building.
void configure_network_model();
// Builds every GPU, or only those with `in_use[g]` set (and the nodes and NICs they need) when
// `in_use` is given: a reduced simulation touches a small part of a large cluster, and SimGrid's
// platform creation grows faster than linearly with the number of links.
BuiltPlatform build_platform(const PlatformSpec& spec, const std::vector<bool>& in_use = {});

} // namespace stepsim
