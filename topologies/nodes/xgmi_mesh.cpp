// AMD Instinct MI300X / MI325X platforms: every GPU is joined to each of the node's other GPUs by
// an Infinity Fabric (xGMI) link of its own, a fully connected mesh with no switch. On the 8-GPU
// platform each GPU has seven links of 64 GB/s per direction (intra_node.bandwidth is one link),
// 448 GB/s in all ("Each AMD Instinct MI300X system GPU is connected to its seven peer GPUs via
// xGMI links, forming a fully connected mesh ... rated up to 64 GB/s for each point-to-point link",
// AMD ROCm blog, "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", 2025,
// https://rocm.blogs.amd.com/software-tools-optimization/mi300x-rccl-xgmi/README.html). Each GPU
// also has its own PCIe host link to the CPU.
//
//   GPU0 ──xgmi── GPU1        one link per pair: 28 links on 8 GPUs
//    │  ╲      ╱   │
//   xgmi   ╲╱    xgmi         GPU ─host─┬─cpu-memory─ cpu
//    │    ╱  ╲     │
//   GPU3 ──xgmi── GPU2
//
// A pair's transfer crosses its own link only, so a ring that visits the GPUs in one order uses
// one link of each GPU's seven: RCCL lays several rings over different links, which the collective
// models do on such a node (GroupShape::full_mesh, models/collectives/mesh_rings.cpp).
#include "topologies/nodes/node_type.hpp"

namespace stepsim {
namespace {

// 64e9: one xGMI link per direction (the AMD blog above; MI300X and MI325X platforms alike).
const bool registered = NodeTypeRegistry::add(
    "xgmi_mesh",
    "AMD Instinct MI300X/MI325X platform: every two GPUs joined by an xGMI link of their own (bandwidth per link), "
    "no switch",
    full_mesh_type("xgmi_mesh", "xgmi", "each GPU has 7 xGMI links", LinkClass::Xgmi, 64e9));

} // namespace
} // namespace stepsim
