// GeForce cards joined two by two by NVLink bridges (RTX 3090 workstations with a bridge on each
// pair): peer-to-peer runs over the bridge inside a pair, but GeForce has no PCIe peer-to-peer, so
// every other pair of GPUs talks through a buffer in host memory, as on `pcie_no_p2p`
// (nvidia-smi topo -p2p: "OK" inside a bridged pair, "NS" between pairs; NCCL's P2P transport
// over the NVLink path inside a pair, src/transport/p2p.cc, and its SHM transport between pairs,
// src/transport/shm.cc, once p2pCanConnect refuses them). A ring over four or more GPUs then
// runs its cross-pair hops at the staged rate, a fraction of what `nvlink_pairs`' peer-to-peer
// PCIe carries.
//
//   GPU0 ═bridge═ GPU1      GPU2 ═bridge═ GPU3       GPU a -> GPU c in another pair:
//     └──pcie──┐   └─pcie─┐   └─pcie─┐   └─pcie─┐     pcie(a) up, staging(a), pcie(c) down
//              └──────────┴── root ───┴─────────┘ ─cpu-memory─ cpu
//
// intra_node.bandwidth is the bridge's per direction (rated: the device file's nvlink_bandwidth);
// the PCIe links are the GPU's host link at links.json's achieved PCIe fraction, and a sender's
// staging is a link of its own at that times links.json pcie.host_staged, as pcie_no_p2p's.
#include "topologies/nodes/bridged_pairs.hpp"

namespace stepsim {
namespace {
const bool registered = add_bridged_pairs_type(
    "nvlink_pairs_no_p2p",
    "GeForce GPUs bridged two by two by NVLink (RTX 3090 with bridges): the bridge inside a pair, host-staged PCIe "
    "between pairs (no PCIe peer-to-peer)",
    false);
} // namespace
} // namespace stepsim
