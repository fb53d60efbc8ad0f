// PCIe cards joined two by two by NVLink bridges, GPUs 2k and 2k+1: the wiring that the
// `nvlink_pairs` and `nvlink_pairs_no_p2p` node types share. They differ only in how two GPUs of
// different pairs talk: PCIe peer-to-peer through the CPU's root complex, or, on GeForce cards
// that have none, through a buffer in host memory (nvlink_pairs_no_p2p.cpp).
#pragma once

#include "topologies/nodes/node_type.hpp"

namespace stepsim {

// An odd gpus_per_node (but 1) cannot be bridged in pairs: the problem, for node type `type`.
std::vector<std::string> check_bridged_pairs(const NodeGroupSpec& g, const char* type);

// The bridges, each GPU's PCIe link (the GPU's host link at links.json's achieved PCIe fraction),
// and between pairs either peer-to-peer PCIe (`peer_to_peer`) or host-staged transfers.
void build_bridged_pairs(NodeBuild& b, bool peer_to_peer);

// Registers node type `type`: any even GPU count, the bridge rated by the device file's
// nvlink_bandwidth, direct NVLink's achieved fraction. True once registered (for a static).
bool add_bridged_pairs_type(const char* type, const char* description, bool peer_to_peer);

} // namespace stepsim
