// Builds the SimGrid platform of a scenario inside the running SimGrid engine: one host per GPU,
// the links of each node (NVSwitch or PCIe) and of the cluster fabric, routed by shortest path so
// that traffic between GPUs of a node stays on the node's own links.
//
//   GPU ─nvlink─┐                 node: GPUs on an NVSwitch (or PCIe switch) router
//   GPU ─nvlink─┼─ nvswitch
//   GPU ─pcie── nic ─nic link─ leaf ─uplink─ core      fabric: registered builders ("fat_tree")
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
namespace simgrid::kernel::routing {
class NetPoint;
}

namespace stepsim {

struct BuiltPlatform {
  std::vector<simgrid::s4u::Host*> gpus; // GPU g of the job runs rank g
  std::vector<int> group_of_gpu;         // index into PlatformSpec::node_groups
};

// One network port of a node, to be wired into the fabric.
struct NicPort {
  simgrid::kernel::routing::NetPoint* point = nullptr;
  int node                                  = 0; // node index over all groups
  int rail                                  = 0; // NIC index within the node
  double bandwidth_Bps                      = 0;
  double latency_s                          = 0;
};

struct FabricContext {
  simgrid::s4u::NetZone* zone = nullptr;
  const PlatformSpec* spec    = nullptr;
  std::vector<NicPort> nics;
};

struct FabricBuilder {
  std::function<void(FabricContext&)> build;
};
using FabricRegistry = Registry<FabricBuilder>;

// SimGrid's network model settings for GPU interconnects; call before building.
void configure_network_model();
BuiltPlatform build_platform(const PlatformSpec& spec);

} // namespace stepsim
