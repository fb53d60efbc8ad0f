// The inside of a node, one builder per `intra_node.type` (topologies/nodes/*.cpp), registered by
// name in NodeTypeRegistry. The platform builder (platform.cpp) makes the node's zone, its GPU
// hosts, its CPU host and its gateway; the node type builds the links between the GPUs and to the
// CPU and adds the routes over them; the platform builder then adds the NICs.
//
// A node is a SimGrid Full zone: every route inside it is given explicitly, link by link. A
// shortest-path zone (Floyd) would take any shortcut the graph offers, such as GPU -> NIC ->
// gateway -> NIC -> GPU, or a route through the CPU, instead of the NVLink or XY mesh route the
// hardware uses; explicit routes say exactly which links a transfer crosses, and the lookup is a
// table read. A node type adds the route between every two built GPUs and from every built GPU
// to the CPU host.
//
// Link names are "node{N}-{role}" with the role naming what the link joins ("gpu3-nvswitch",
// "gpu0-gpu3-nvlink", "switch1-root"), so that `stepsim platform` groups them by kind.
#pragma once

#include "models/link_calibration.hpp"
#include "sim/core/registry.hpp"
#include "sim/core/scenario.hpp"

#include <simgrid/s4u.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stepsim {

using NetPoint = simgrid::kernel::routing::NetPoint;
using Hop      = simgrid::s4u::LinkInRoute;
using Path     = std::vector<Hop>;

// One node while it is being built.
struct NodeBuild {
  simgrid::s4u::NetZone* zone = nullptr;
  const NodeGroupSpec* group  = nullptr;
  int node                    = 0;
  std::vector<simgrid::s4u::Host*> gpus; // by local index; null where not built
  simgrid::s4u::Host* cpu          = nullptr; // "node{N}-cpu"
  simgrid::s4u::Link* memory_link  = nullptr; // "node{N}-cpu-memory": all host traffic of the node
  double host_link_Bps             = 0;       // each GPU's host link, per direction (HostSpec resolved)
  // Build the CPU host and the host links. A job that never copies to host memory leaves them
  // out: at 16,384 GPUs they tripled the links SimGrid creates, each checked against every zone.
  bool host_side = true;
  // Where the node type puts the NICs: GPU g reaches NIC g / (GPUs per NIC) over path_to_nic[g],
  // then the NIC's link to the gateway. Left empty, the platform builder hangs a GPU's own NIC off
  // the GPU, and a shared NIC off a router that each of its GPUs reaches over a PCIe link of its own.
  std::vector<Path> path_to_nic;

  std::string name(const std::string& role) const;
  NetPoint* router(const std::string& role);
  // A split-duplex link "node{N}-{role}"; UP is the direction from the GPU side.
  simgrid::s4u::Link* link(const std::string& role, double Bps, double latency_s);
  // The route from `from` to `to` over `path`; `symmetrical` adds the reverse (the same links
  // backwards, each in its other direction).
  void route(NetPoint* from, NetPoint* to, const Path& path, bool symmetrical = true);

  NetPoint* gpu(int local) const; // null where not built
  int built_gpus() const;
  // Routes between every two built GPUs a < b: `path(a, b)`, and the reverse backwards.
  void route_gpu_pairs(const std::function<Path(int a, int b)>& path);
  // GPU -> CPU host routes: `to_root(g)` (the links from GPU g to the CPU's root complex), then
  // the memory link.
  void route_to_cpu(const std::function<Path(int g)>& to_root);
  // A GPU-to-GPU transfer that NCCL stages through host memory (no PCIe peer-to-peer: its SHM
  // transport): up the sender's PCIe link, through the sender's staging buffer when one is built
  // (null: none), down the receiver's. One direction: each sender stages in its own buffer.
  static Path host_staged(simgrid::s4u::Link* sender_pcie, simgrid::s4u::Link* staging, simgrid::s4u::Link* receiver_pcie);
  // Each built GPU its own host (PCIe) link "gpuI-host" to the CPU: the node types whose GPUs talk
  // to each other over NVLink or a die-to-die mesh, not over PCIe.
  void add_host_links();
  // Each built GPU one link "gpuI-{role}" to a switch, half the GPU-to-GPU latency on each side;
  // a route between two GPUs crosses both their links. No links when fewer than two GPUs are
  // built: a lone GPU of a reduced platform has no one to talk to over them.
  void star(const std::string& role, double Bps, double latency_s);
  // Every two built GPUs a < c joined by a link "gpu{a}-gpu{c}-{role}" of their own (UP from a),
  // of intra_node's bandwidth and latency, a pair's route crossing that link alone, and each GPU
  // its host link: a fully connected mesh with no switch (an AMD Instinct node's xGMI, an HGX
  // 4-GPU board's NVLink).
  void full_mesh(const std::string& role);
};

// Which measured efficiency (configs/calibration/links.json) a node type's GPU links achieve.
enum class LinkClass : uint8_t {
  NvLink,       // NVLink through NVSwitches: the "nvswitch" figure
  NvLinkDirect, // NVLink straight between GPUs, no switch (DGX-1's cube mesh): the "nvlink" figure
  Pcie,         // PCIe, direct or through switches: the "pcie" figure
  Xgmi,         // AMD Infinity Fabric (xGMI) straight between GPUs: the "xgmi" figure
  Rated,        // no measurement to take one from (a chiplet mesh): the rated bandwidth
};

struct NodeType {
  // The GPUs per node the type is built for (8 for a DGX-1); 0 = any count.
  int gpus_per_node = 0;
  // Problems with the rest of `intra_node` (the mesh shape...), each "field: what was expected";
  // the caller prefixes the JSON path of the node group's intra_node.
  std::function<std::vector<std::string>(const NodeGroupSpec&)> check;
  // Builds the links between the GPUs and to the CPU, and the routes over them; may place NICs.
  std::function<void(NodeBuild&)> build;
  // Routes between two GPUs cross other GPUs (NVLink cube-mesh, chiplet mesh): when any GPU of a
  // node is needed, all of them are built.
  bool builds_every_gpu = false;
  // Rated per-direction bandwidth of a GPU's links when intra_node.bandwidth is not given (each
  // type's file names its datasheet); none: the scenario must give it.
  std::optional<double> rated_bandwidth_Bps;
  LinkClass link_class = LinkClass::NvLink;
  // The switch reduces in place (NVLink SHARP, "NVLS"), where the GPU supports it too.
  bool in_switch_reduction = false;
  // A GPU's links are its own NVLinks (a switch takes whatever each GPU has): where
  // intra_node.bandwidth is not given, the GPU's device file's nvlink_bandwidth, when it has one,
  // comes before rated_bandwidth_Bps (an H800's 200 GB/s, an H100's 450, not the A100's 300).
  bool rated_by_device = false;
  // Every two GPUs are joined by a link of their own, all of one width (an AMD Instinct node's
  // xGMI mesh): a ring uses one link between each two neighbours, so the collectives lay their
  // lanes over different links (GroupShape::full_mesh).
  bool full_mesh = false;
  // A second GPU count the type builds, 0 for none: an NVL36 rack is half of NVL72's domain, the
  // same GPUs on the same switch trays.
  int also_gpus_per_node = 0;
};
using NodeTypeRegistry = Registry<NodeType>;

// The most GPUs a full mesh joins: the rings mesh_rings lays (models/collectives/collective.hpp)
// go up to 8, an AMD Instinct platform's (seven xGMI links each).
inline constexpr int kMostMeshGpus = 8;
// A fully connected node type (xgmi_mesh, nvlink_mesh): NodeBuild::full_mesh with links named by
// `role`, any GPU count up to kMostMeshGpus (a larger one refused at intra_node.type as a `type`
// node, `links` saying why), the links' measured class and rated bandwidth per pair.
NodeType full_mesh_type(const std::string& type, const std::string& role, const std::string& links, LinkClass link_class,
                        std::optional<double> rated_bandwidth_Bps);

// The scenario with each node group's GPU named by its catalogue name (catalogue_device_name: a
// product name as NVML prints it stands for its device) and its intra_node.bandwidth, where not
// given, set to its type's rated figure (unknown types and types without one are left for
// check_node_types to report).
void apply_rated_bandwidths(PlatformSpec& spec);

// The platform with every link's bandwidth scaled to what transfers achieve on it, and each
// link's latency raised by its type's per-step cost (models/link_calibration.hpp).
PlatformSpec with_achieved_bandwidth(const PlatformSpec& platform, const LinkEfficiency& efficiency);

// Checks every node group's `intra_node` against its type: a known name (else the closest one),
// the GPU count the type needs, the type's own fields. Throws InputError naming the JSON path.
void check_node_types(const PlatformSpec& spec);

// The node's CPU host "node{N}-cpu" and its memory link "node{N}-cpu-memory"
// (HostSpec::memory_bandwidth_Bps, shared by all host traffic of the node). Host-side work
// (offloaded optimizer steps, cached parameters) runs on this host; its transfers to a GPU cross
// the GPU's host link and the memory link. Sets b.cpu and b.memory_link.
simgrid::s4u::Host* build_cpu_host(NodeBuild& b);

// A GPU's host link bandwidth in node group `g`: HostSpec::link_bandwidth_Bps, or the device's
// host_link_bandwidth when that is 0 (an InputError at `path` when neither is known).
double host_link_bandwidth(const NodeGroupSpec& g, const std::string& path);

} // namespace stepsim
