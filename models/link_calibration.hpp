// What collectives and transfers really reach on each kind of link, as a fraction of the link's
// rated bandwidth (NCCL's achieved bus bandwidth over the datasheet figure): protocol overhead,
// chunking, and the SMs NCCL's kernels leave idle. Read from configs/calibration/links.json, one
// entry per link type with its source; the platform is built with the achieved bandwidths.
#pragma once

#include "sim/core/scenario.hpp"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace stepsim {

// What one of NCCL's protocols (LL, LL128, Simple; models/collectives/protocol.hpp) costs, from links.json
// "protocols".<name>.
struct ProtocolCost {
  double wire_factor    = 1; // bytes on the wire per byte of payload
  double step_inside_s  = 0; // per step on a path inside a node, beyond the link's step latency
  double step_between_s = 0; // per step on a path between nodes
  // NCCL's baseLat per algorithm: ring, tree, nvls, and the rest (direct, halving-doubling, ...).
  double base_ring_s = 0, base_tree_s = 0, base_nvls_s = 0, base_other_s = 0;
};

// What one kind of NIC (platform nic.kind: infiniband, roce, efa, efa-v2, efa-v3, tcpx, tcpxo,
// ethernet) achieves, from links.json "nic_kinds".<kind>: the fraction of its rated bandwidth and
// the per-step latency added to its NIC-to-NIC latency, as `nic` / `nic_step_s` below are for
// InfiniBand.
struct NicKindCost {
  double efficiency = 1.0;
  double step_s     = 0;
};

struct LinkEfficiency {
  double nvswitch = 1.0; // GPU to NVSwitch (NVLink)
  double nvlink   = 1.0; // GPU to GPU over NVLink with no switch between (DGX-1's cube mesh)
  double xgmi     = 1.0; // GPU to GPU over AMD Infinity Fabric (xGMI), a link per pair
  double pcie     = 1.0; // GPU to GPU through PCIe switches
  // GPUs without peer-to-peer (node type pcie_no_p2p): what NCCL's transfers staged through host
  // memory reach, as a fraction of the PCIe link's achieved (peer-to-peer) bandwidth; 0 = no
  // figure (the PCIe link's own).
  double pcie_host_staged = 0;
  double nic      = 1.0; // NIC to NIC through the cluster fabric (InfiniBand, RoCE)
  // What one step of a collective costs beyond the wire latency on each link type (NCCL's
  // per-step hwLat: the LL protocol's flag polling and the hand-off between thread blocks),
  // seconds per GPU-to-GPU path of that type; added to the scenario's path latency of that type
  // (unless the scenario sets it to zero: an idealised, free link).
  double nvswitch_step_s = 0, nvlink_step_s = 0, pcie_step_s = 0, nic_step_s = 0, xgmi_step_s = 0;
  // The NVSwitch step latency of the GPUs whose own small-message rows were measured to differ
  // from the figure above (links.json nvswitch.step_latency_by_gpu), by catalogue device name.
  std::map<std::string, double> nvswitch_step_by_gpu_s;
  double nvswitch_step_for(const std::string& gpu) const;
  // NCCL's fixed cost of one collective (its tuner's baseLat: kernel launch and set-up), seconds.
  double collective_base_latency_s = 0;
  // What RCCL's MSCCL all-pairs program (models/collectives/msccl.cpp) costs beyond its
  // protocol's base latency (links.json msccl.base_latency): its kernel's set-up and the
  // synchronisation of its thread blocks, seconds.
  double msccl_base_s = 0;
  // What one host thread spends per GPU when it enqueues a collective on several GPUs in one
  // group (nccl-tests -g N: ncclGroupStart, one call per GPU, ncclGroupEnd), seconds; 0 = no
  // figure. Not a cost of the network: a benchmark harness's (tools/driver/collective_bench.hpp
  // nccl_tests_iteration_seconds), where one process per GPU runs a training job.
  double group_launch_per_gpu_s = 0;
  // NVLink SHARP: the rate at which the NVSwitch reduces what one GPU pushes into it, bytes per
  // second per GPU (0 = no limit beyond the links); the GPUs of another NVSwitch generation
  // whose own figure was measured (links.json nvswitch.in_switch_reduction_by_gpu), by name.
  double nvls_reduction_Bps = 0;
  std::map<std::string, double> nvls_reduction_by_gpu_Bps;
  double nvls_reduction_for(const std::string& gpu) const;
  // InfiniBand SHARP (CollNet): the rate at which the fabric's switches reduce what one NIC
  // pushes into them, as a fraction of the NIC's achieved bandwidth (0 = no limit beyond the NIC).
  double in_network_reduction = 0;
  // NCCL's protocols in the order LL, LL128, Simple; `protocols_loaded` false when the file has
  // none (collectives then run without protocol costs).
  bool protocols_loaded = false;
  std::array<ProtocolCost, 3> protocols{};
  // NCCL's tree beyond the ring on the same links (links.json protocols.tree, read by
  // models/collectives/protocol.cpp): its extra latency per step between nodes, per protocol in
  // the order above (hwLat[NET][TREE] above hwLat[NET][RING], and what a cluster's proxy and PCIe
  // hops to its NICs add), and the bus bandwidth factor NCCL's tuner gives it. NVLS-tree's trees
  // across nodes have a step of their own (protocols.nvls_tree), the tree's Simple one where the
  // file gives none. A cluster's own fit (`stepsim calibrate network`) may set the steps.
  std::array<double, 3> tree_step_between_s{};
  double tree_bandwidth_factor    = 1;
  double nvls_tree_step_between_s = 0;
  // The fraction of the NVSwitch's reduction rate (nvls_reduction_for) that NVLS-tree's switch
  // part reaches across nodes (protocols.nvls_tree.switch_share): its channels give 4 of their
  // warps to the tree's broadcast, leaving fewer to the copies in and out of the switch than one
  // node's NVLS has.
  double nvls_tree_switch_share = 1;
  // Per NIC kind (links.json "nic_kinds"); a kind missing here (no "nic_kinds" in the file) takes
  // `nic` and `nic_step_s`, which are infiniband's.
  std::map<std::string, NicKindCost> nic_kinds;
  NicKindCost nic_kind(const std::string& kind) const;
};

// configs/calibration/links.json, or all 1.0 when the file is absent (or the ScopedLinkEfficiency in
// force, below).
LinkEfficiency load_link_efficiency();
// The same, read once per process (for the collective models).
const LinkEfficiency& link_efficiency();

// A cluster's own calibration (`stepsim calibrate network -o FILE`): links.json's entries it holds
// (nvswitch, nvlink, xgmi, pcie, nic, nic_kinds.<kind>, collective_base_latency, protocols.<name>.base_latency,
// protocols.tree and protocols.nvls_tree step_between_nodes)
// laid over `base`. InputError names `named_by` (the option or scenario key), the file and the JSON
// path.
LinkEfficiency load_network_calibration(const std::string& file, const LinkEfficiency& base,
                                        const std::string& named_by);

// While one lives, link_efficiency() and load_link_efficiency() answer `links` instead of
// links.json: one run's own calibration (a scenario's simulation.network_calibration, `stepsim
// collective --network-calibration`), set before the simulation; the children forked for it
// inherit it. The previous answer comes back when it ends.
class ScopedLinkEfficiency {
public:
  explicit ScopedLinkEfficiency(const LinkEfficiency& links);
  ~ScopedLinkEfficiency();
  ScopedLinkEfficiency(const ScopedLinkEfficiency&)            = delete;
  ScopedLinkEfficiency& operator=(const ScopedLinkEfficiency&) = delete;

private:
  std::optional<LinkEfficiency> previous_;
};

// Which calibration link_efficiency() answers, as a number that changes whenever a
// ScopedLinkEfficiency begins or ends: the collective models' caches (a pick, a launch's time)
// hold for one calibration only, and key on it.
int link_efficiency_generation();

// The scope of a scenario's simulation.network_calibration, for its simulation (nullptr when the
// key is absent). InputError as load_network_calibration.
std::unique_ptr<ScopedLinkEfficiency> network_calibration_scope(const SimulationSpec& s);

// with_achieved_bandwidth (topologies/nodes/node_type.hpp) scales a platform's links by these.

} // namespace stepsim
