// A workstation without NVLink: every GPU on its own PCIe x16 link (intra_node.bandwidth per
// direction) to the CPU's root complex, so GPU-to-GPU traffic goes up one link, through the root
// complex and down the other (CUDA peer-to-peer through the host bridge, nvidia-smi "PHB"). The
// PCIe link is also the GPU's host link; host.link_bandwidth is not used here.
//
//   GPU ─pcie─┐
//   GPU ─pcie─┼─ root ─cpu-memory─ cpu
//   GPU ─pcie─┘
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

namespace stepsim {
namespace {

void build(NodeBuild& b)
{
  const auto& intra = b.group->intra_node;
  std::vector<simgrid::s4u::Link*> pcie(b.gpus.size(), nullptr);
  for (int g = 0; g < static_cast<int>(b.gpus.size()); ++g)
    if (b.gpu(g) != nullptr)
      pcie[static_cast<size_t>(g)] = b.link(fmt::format("gpu{}-pcie", g), intra.bandwidth_Bps, intra.latency_s / 2);
  auto up = [&](int g) { return Hop(pcie[static_cast<size_t>(g)], Hop::Direction::UP); };
  auto down = [&](int g) { return Hop(pcie[static_cast<size_t>(g)], Hop::Direction::DOWN); };
  b.route_gpu_pairs([&](int a, int c) { return Path{up(a), down(c)}; });
  b.route_to_cpu([&](int g) { return Path{up(g)}; });
}

// 32e9: PCIe Gen4 x16: 16 GT/s x 16 lanes x 128/130 = 31.5 GB/s per direction.
const bool registered = NodeTypeRegistry::add(
    "pcie", "workstation: each GPU one PCIe link (bandwidth per GPU) to the CPU root complex, no NVLink",
    NodeType{0, nullptr, build, false, 32e9, LinkClass::Pcie, false});

} // namespace
} // namespace stepsim
