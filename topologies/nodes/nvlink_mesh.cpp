// NVIDIA HGX 4-GPU boards: four SXM GPUs joined pair by pair by NVLink bundles of their own, a
// fully connected mesh with no NVSwitch. HGX A100 4-GPU ("Redstone"): each GPU's 12 NVLink3 links
// split 4 to each of its 3 peers, 4 x 25 = 100 GB/s per pair per direction; HGX H100 4-GPU: 18
// NVLink4 links, 6 to each peer, 150 GB/s per pair per direction (NVIDIA HGX A100 and HGX H100
// datasheets: "4-GPU ... fully connected with NVLink", without NVSwitch). intra_node.bandwidth is
// one pair's bundle, per direction; it has no default, as the split of a GPU's links over its
// peers is the board's. Each GPU also has its own PCIe host link to the CPU.
//
//   GPU0 ══nvlink══ GPU1       one bundle per pair: 6 on 4 GPUs
//    ║  ╲╲      ╱╱   ║
//    ║     ╲╲╱╱      ║          GPU ─host─┬─cpu-memory─ cpu
//    ║    ╱╱  ╲╲     ║
//   GPU3 ══nvlink══ GPU2
//
// As on an xGMI mesh, a ring that visits the GPUs in one order uses one bundle of each GPU's
// three; NCCL's search lays several rings over different bundles (src/graph/search.cc), which the
// collectives do on a full mesh (GroupShape::full_mesh, models/collectives/mesh_rings.cpp), and an
// all-to-all sends to every peer at once over its own bundle (models/collectives/direct.cpp).
#include "topologies/nodes/node_type.hpp"

namespace stepsim {
namespace {

// No rated bandwidth: the split of a GPU's links over its peers is the board's.
const bool registered = NodeTypeRegistry::add(
    "nvlink_mesh",
    "HGX 4-GPU board (A100, H100): every two GPUs joined by an NVLink bundle of their own (bandwidth per pair), "
    "no NVSwitch",
    full_mesh_type("nvlink_mesh", "nvlink", "HGX 4-GPU boards have 4; a larger node has NVSwitches, \"nvswitch\"",
                   LinkClass::NvLinkDirect, std::nullopt));

} // namespace
} // namespace stepsim
