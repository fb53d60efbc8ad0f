// Builds the SimGrid platform of a scenario inside the running SimGrid engine: one host per GPU,
// the links of each node (its node type, topologies/nodes/node_type.hpp: NVSwitch, DGX-1 cube-mesh, PCIe
// switches, chiplet mesh...; and its CPU host "nodeN-cpu") and of the cluster fabric.
//
// The platform is a hierarchy of SimGrid zones, so that routing stays cheap at 16,384 GPUs: each
// node is a small zone of its own (GPUs, their links, their CPU host, their NICs, one gateway, all
// routes explicit: a SimGrid Full zone), and the fabric
// joins the node zones at their gateways. A flow between nodes is limited by its GPU's NIC link
// (with one NIC per GPU the NIC link joins the GPU to the gateway directly), shared with other
// flows there and on the fabric's links above it.
//
//   GPU ─nvlink─┐                            node zone (Full: explicit routes)
//   GPU ─nvlink─┼─ nvswitch
//   GPU ─pcie── nic ─nic link─ gateway ── fabric     fabric: registered builders (topologies/fabrics/*.cpp,
//                                                          fat_tree.cpp), `stepsim list` names them
#pragma once

#include "sim/core/registry.hpp"
#include "sim/core/scenario.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace simgrid::s4u {
class Engine;
class Host;
class Link;
class NetZone;
} // namespace simgrid::s4u

namespace stepsim {

// A GPU host's property on a platform of several nodes: its PCIe link to a NIC over that NIC's
// bandwidth (GroupShape::nic_feed_ratio).
inline constexpr const char* kNicFeedRatioProperty = "nic_feed_ratio";
// A GPU host's property on a platform of several nodes: the NIC its flows across nodes take, as
// the index of the first GPU that shares it (GroupShape::nic_of_member).
inline constexpr const char* kNicProperty = "nic";
// A GPU host's property: the vendor of its node's CPUs (host.cpu_vendor; GroupShape::amd_hosts).
inline constexpr const char* kCpuVendorProperty = "cpu_vendor";
// A GPU host's property on a fabric with oversubscribed uplinks: the thinned uplinks above its
// NIC, bottom to top, each as "name=bandwidth" (the up half's name, bytes per second), comma-
// separated (FabricBuild::uplinks; GroupShape::uplinks_of_member). Read without a lookup by name,
// which walks every zone of the platform (824 uplinks of a 16,384-GPU rail fabric took seconds).
inline constexpr const char* kUplinksProperty = "uplinks";

// Marks a NIC link's share of its NIC kind's transport latency (kNicTransportProperty,
// NicSpec::transport_latency_s; not in the link's own latency) on the links its routes take;
// nothing for 0.
void mark_transport_latency(simgrid::s4u::Link* link, double share_s);

struct BuiltPlatform {
  std::vector<simgrid::s4u::Host*> gpus; // GPU g of the job runs rank g; null where not built
  std::vector<int> group_of_gpu;         // index into PlatformSpec::node_groups
};

// What a fabric sees of a node: its index, its node group and the bandwidth of its uplink (its
// NICs together).
struct NodePort {
  int node             = 0;
  int nics             = 0;
  double uplink_Bps    = 0;
  const NodeGroupSpec* group = nullptr;
  int group_index      = 0;
  int first_gpu        = 0; // the job's index of its GPU 0
};

// What the platform builder offers a fabric while the fabric builds. A fabric builds its switches
// as zones and, in node order, each node inside one of them:
// - `node(n, star)` builds node n's own zone (GPUs, their switch, NICs, gateway; the node type's
//   work) inside `star`, a star zone, where the node's NICs are its links to the rest; nothing
//   when none of its GPUs is used;
// - or, for fabrics whose structure reaches inside the node (rails, Wi-Fi stations), `gpu(n, i,
//   zone)` creates GPU i of node n as a host of `zone` and the fabric adds its links.
struct FabricBuild {
  const PlatformSpec& spec;
  std::vector<NodePort> nodes;
  std::function<void(int node, simgrid::s4u::NetZone* star)> node;
  std::function<bool(int node, int local)> used;
  std::function<simgrid::s4u::Host*(int node, int local, simgrid::s4u::NetZone* zone)> gpu;
  // Per GPU of the job (sized by the builder): the uplinks above its NIC that are thinner than
  // the NICs below them (an oversubscribed leaf's, a pod's under an oversubscribed core), bottom
  // to top, each as the up half of its split-duplex link. A fabric fills it where it thins an
  // uplink; the closed forms share those uplinks among the flows that cross them
  // (GroupShape::uplinks_of_member). Left empty on a non-blocking fabric.
  std::vector<std::vector<const simgrid::s4u::Link*>> uplinks;
};

struct FabricBuilder {
  std::function<void(FabricBuild& build)> build;
  // The node zones that node(n, star) builds are hung in their stars only once the fabric has
  // built everything (the fabric adds no route to a node's own zone): see detached_full_zone.
  bool nodes_hung_last = false;
};

// A full zone not yet hung in the zone tree, with the models it would take from `like` there
// (SimGrid's set_parent copies them): filled while detached, then hung with set_parent. SimGrid
// 3.32 checks every new link's and host's name against every zone in the tree
// (NetZoneImpl::create_link: Engine::link_by_name_or_null walks it), so filling zones that
// already hang there costs links × zones: 18 s for 8,192 GPUs in their own zones, minutes for
// 16,384. Filled detached and hung once all are built, the names and the order the links and
// hosts are created in stay the same.
simgrid::s4u::NetZone* detached_full_zone(const std::string& name, const simgrid::s4u::NetZone* like);
// The same for a star zone (a rail's switch, topologies/fabrics/rail.cpp).
simgrid::s4u::NetZone* detached_star_zone(const std::string& name, const simgrid::s4u::NetZone* like);

// Seals `zone`, filled and hung under a parent that does not yet hang in the zone tree, with its
// hosts. SimGrid 3.32 seals a zone's hosts by walking every host of the tree for the zone's own
// (NetZoneImpl::seal, get_all_hosts: Engine::get_filtered_hosts from the root), so sealing each
// of the 16,384 zones of a rail fabric where they hang walks 16,384 hosts each (perf: a third
// of a one-size table on 16,384 GPUs, platform included). Away from the tree that walk finds
// none of the zone's hosts, so they are sealed here, one by one, as NetZoneImpl::seal would.
void seal_zone_and_hosts(simgrid::s4u::NetZone* zone, const std::vector<simgrid::s4u::Host*>& hosts);
using FabricRegistry = Registry<FabricBuilder>;

// SimGrid's network model settings for GPU interconnects; call before building.
void configure_network_model();
// SimGrid's engine for this process (one per process: run it in a child, sim/simulate.hpp), its
// log quiet below critical and configure_network_model applied: every replay starts here.
std::unique_ptr<simgrid::s4u::Engine> start_engine();
// Builds every GPU, or only those with `in_use[g]` set (and the nodes and NICs they need) when
// `in_use` is given: a reduced simulation touches a small part of a large cluster, and SimGrid's
// platform creation grows faster than linearly with the number of links.
// `host_side`: build each node's CPU host and the GPUs' host links (offload, FCDP, `stepsim
// platform`); a job without host copies does without them.
BuiltPlatform build_platform(const PlatformSpec& spec, const std::vector<bool>& in_use = {}, bool host_side = true);

} // namespace stepsim
