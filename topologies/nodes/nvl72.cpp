// A 72-GPU NVLink domain (GB200 NVL72 class) as one node: 72 GPUs, each with 18 NVLink5 links
// of 50 GB/s per direction (900 GB/s, intra_node.bandwidth) spread over the 18 NVSwitch chips of
// the 9 switch trays, one link to each chip. The trays form one non-blocking switch (the NVLink
// spine carries 72 x 900 GB/s), so the domain is a star like a DGX's NVSwitch, only 72 wide.
// Sources: NVIDIA GB200 NVL72 product page (72 GPUs, 130 TB/s NVLink domain = 72 x 1.8 TB/s
// bidirectional); NVLink5 (Blackwell architecture technical brief: 18 links, 1.8 TB/s per GPU).
//
// A GB200 NVL36 rack (36 GPUs in one NVLink domain, half of NVL72's compute trays on the same
// NVLink5 switch trays; NVIDIA GB200 NVL72 / NVL36x2 configurations) is the same node with 36
// GPUs: gpus_per_node 36.
//
// Each GPU has its own host link (in GB200, NVLink-C2C to its Grace CPU; the node's CPU host
// stands for the 36 Grace CPUs together, host.memory_bandwidth being their LPDDR5X together).
#include "topologies/nodes/node_type.hpp"

namespace stepsim {
namespace {

void build(NodeBuild& b)
{
  b.star("nvl72", b.group->intra_node.bandwidth_Bps, b.group->intra_node.latency_s);
  b.add_host_links();
}

// 900e9: NVLink5, 18 links x 50 GB/s per Blackwell GPU (GB200 NVL72 datasheet); its NVSwitches
// reduce in place (NVLink SHARP).
const bool registered = NodeTypeRegistry::add(
    "nvl72", "GB200 NVL72 class: 72 GPUs (NVL36: 36), each 900 GB/s per direction into one NVSwitch domain",
    NodeType{72, nullptr, build, false, 900e9, LinkClass::NvLink, true, false, false, 36});

} // namespace
} // namespace stepsim
