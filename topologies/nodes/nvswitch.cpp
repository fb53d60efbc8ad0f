// DGX A100 / DGX H100 / DGX H200 and HGX boards with NVSwitch: every GPU has one aggregated NVLink
// link (its 12 or 18 NVLinks together, intra_node.bandwidth per direction) to a non-blocking
// switch, so any two GPUs are one switch apart and each GPU's own link is the only limit. Each GPU
// also has its own PCIe host link to the CPU.
//
//   GPU ─nvlink─┐
//   GPU ─nvlink─┼─ nvswitch        GPU ─host─┬─cpu-memory─ cpu
//   GPU ─nvlink─┘
#include "topologies/nodes/node_type.hpp"

namespace stepsim {
namespace {

void build(NodeBuild& b)
{
  b.star("nvswitch", b.group->intra_node.bandwidth_Bps, b.group->intra_node.latency_s);
  b.add_host_links();
}

// Without intra_node.bandwidth, the GPU's own NVLink bandwidth (its device file's nvlink_bandwidth:
// 300 GB/s per direction on an A100, 450 on an H100, 200 on an A800 or H800); 300e9, NVLink3's
// 12 links x 25 GB/s per A100 (A100 datasheet), for a device file without one. Third-generation
// NVSwitches (DGX H100) reduce in place (NVLink SHARP) where the GPU supports it (Device::nvls).
const bool registered = NodeTypeRegistry::add(
    "nvswitch", "DGX A100/H100/H200: each GPU one NVLink link (bandwidth per GPU) to a non-blocking NVSwitch",
    NodeType{.gpus_per_node       = 0,
             .check               = nullptr,
             .build               = build,
             .builds_every_gpu    = false,
             .rated_bandwidth_Bps = 300e9,
             .link_class          = LinkClass::NvLink,
             .in_switch_reduction = true,
             .rated_by_device     = true});

} // namespace
} // namespace stepsim
