// A workstation or container whose GPUs cannot reach each other peer to peer (nvidia-smi topo -p2p
// "NS": GeForce cards such as the RTX 4090, which have no PCIe peer-to-peer, and GPUs passed into
// containers or VMs without it). Every GPU is on its own PCIe x16 link to the CPU's root complex,
// as in `pcie`, but NCCL moves every GPU-to-GPU transfer through a buffer in host memory: its SHM
// transport, which the sender writes over its PCIe link and the receiver reads over its own
// (NCCL src/transport/shm.cc; p2p.cc's p2pCanConnect refuses the pair first). Staged transfers
// reach a fraction of what the same links carry peer to peer: each sender's staging is a link of
// its own, the PCIe link's achieved bandwidth times links.json pcie.host_staged, that its sends
// cross beside the two PCIe links. Host traffic (offload, cached parameters) takes the PCIe link
// alone, as in `pcie`.
//
//   GPU ─pcie─┐                       GPU a -> GPU c: pcie(a) up, staging(a), pcie(c) down
//   GPU ─pcie─┼─ root ─cpu-memory─ cpu
//   GPU ─pcie─┘
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

namespace stepsim {
namespace {

void build(NodeBuild& b)
{
  const auto& intra = b.group->intra_node;
  const int n       = static_cast<int>(b.gpus.size());
  const double staged = link_efficiency().pcie_host_staged;
  std::vector<simgrid::s4u::Link*> pcie(b.gpus.size(), nullptr), staging(b.gpus.size(), nullptr);
  for (int g = 0; g < n; ++g)
    if (b.gpu(g) != nullptr) {
      pcie[static_cast<size_t>(g)] = b.link(fmt::format("gpu{}-pcie", g), intra.bandwidth_Bps, intra.latency_s / 2);
      if (staged > 0 && b.built_gpus() > 1)
        staging[static_cast<size_t>(g)] = b.link(fmt::format("gpu{}-host-staging", g), intra.bandwidth_Bps * staged, 0);
    }
  // Each direction its own route: a pair's two directions stage in different senders' buffers.
  for (int a = 0; a < n; ++a)
    for (int c = 0; c < n; ++c)
      if (a != c && b.gpu(a) != nullptr && b.gpu(c) != nullptr)
        b.route(b.gpu(a), b.gpu(c),
                NodeBuild::host_staged(pcie[static_cast<size_t>(a)], staging[static_cast<size_t>(a)],
                                       pcie[static_cast<size_t>(c)]),
                false);
  b.route_to_cpu([&](int g) { return Path{Hop(pcie[static_cast<size_t>(g)], Hop::Direction::UP)}; });
}

// 15.75e9: PCIe Gen3 x16 (the GeForce RTX 2080 Ti's host interface, NVIDIA's product page): 8 GT/s
// x 16 lanes x 128/130 per direction; give intra_node.bandwidth for Gen4 (RTX 4090: 31.5 GB/s).
const bool registered = NodeTypeRegistry::add(
    "pcie_no_p2p",
    "GPUs without peer-to-peer on PCIe (GeForce cards, containers): NCCL stages every GPU-to-GPU transfer through "
    "host memory",
    NodeType{0, nullptr, build, false, 15.75e9, LinkClass::Pcie, false});

} // namespace
} // namespace stepsim
