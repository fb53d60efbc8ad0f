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
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {
namespace {

std::vector<std::string> check(const NodeGroupSpec& g)
{
  if (g.gpus_per_node % 2 != 0 && g.gpus_per_node != 1)
    return {fmt::format("type: an \"nvlink_pairs_no_p2p\" node bridges its GPUs two by two: expected an even "
                        "gpus_per_node, got {}",
                        g.gpus_per_node)};
  return {};
}

void build(NodeBuild& b)
{
  const auto& intra     = b.group->intra_node;
  const auto& links     = link_efficiency();
  const int n           = static_cast<int>(b.gpus.size());
  const double pcie_Bps = b.host_link_Bps * links.pcie;
  // As nvlink_pairs: a transfer up one PCIe link and down another pays one PCIe step.
  const double pcie_latency = b.group->host.link_latency_s + links.pcie_step_s / 2;
  const double staged       = links.pcie_host_staged;
  std::vector<simgrid::s4u::Link*> pcie(b.gpus.size(), nullptr), staging(b.gpus.size(), nullptr),
      bridge(b.gpus.size(), nullptr);
  for (int g = 0; g < n; ++g)
    if (b.gpu(g) != nullptr) {
      pcie[static_cast<size_t>(g)] = b.link(fmt::format("gpu{}-pcie", g), pcie_Bps, pcie_latency);
      if (staged > 0 && b.built_gpus() > 1)
        staging[static_cast<size_t>(g)] = b.link(fmt::format("gpu{}-host-staging", g), pcie_Bps * staged, 0);
    }
  for (int g = 0; g + 1 < n; g += 2)
    if (b.gpu(g) != nullptr && b.gpu(g + 1) != nullptr)
      bridge[static_cast<size_t>(g)] =
          b.link(fmt::format("gpu{}-gpu{}-nvlink", g, g + 1), intra.bandwidth_Bps, intra.latency_s);
  auto up   = [&](int g) { return Hop(pcie[static_cast<size_t>(g)], Hop::Direction::UP); };
  auto down = [&](int g) { return Hop(pcie[static_cast<size_t>(g)], Hop::Direction::DOWN); };
  // Each direction its own route: a pair's two directions stage in different senders' buffers.
  for (int a = 0; a < n; ++a)
    for (int c = 0; c < n; ++c) {
      if (a == c || b.gpu(a) == nullptr || b.gpu(c) == nullptr)
        continue;
      const int low = std::min(a, c);
      if (low % 2 == 0 && std::max(a, c) == low + 1) { // the bridge, one route for both directions
        if (a < c)
          b.route(b.gpu(a), b.gpu(c), Path{Hop(bridge[static_cast<size_t>(low)], Hop::Direction::UP)}, true);
        continue;
      }
      Path p{up(a)};
      if (auto* s = staging[static_cast<size_t>(a)]; s != nullptr)
        p.emplace_back(s, Hop::Direction::UP);
      p.push_back(down(c));
      b.route(b.gpu(a), b.gpu(c), p, false);
    }
  b.route_to_cpu([&](int g) { return Path{up(g)}; });
}

const bool registered = NodeTypeRegistry::add(
    "nvlink_pairs_no_p2p",
    "GeForce GPUs bridged two by two by NVLink (RTX 3090 with bridges): the bridge inside a pair, host-staged PCIe "
    "between pairs (no PCIe peer-to-peer)",
    NodeType{.gpus_per_node       = 0,
             .check               = check,
             .build               = build,
             .builds_every_gpu    = false,
             .rated_bandwidth_Bps = std::nullopt, // the device file's bridged nvlink_bandwidth
             .link_class          = LinkClass::NvLinkDirect,
             .in_switch_reduction = false,
             .rated_by_device     = true,
             .full_mesh           = false});

} // namespace
} // namespace stepsim
