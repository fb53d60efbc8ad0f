// PCIe cards joined two by two by NVLink bridges: A100 PCIe and H100 NVL servers with bridged
// pairs, workstations of RTX A6000 cards with a bridge on each pair (GeForce RTX 3090 pairs, with
// no PCIe peer-to-peer between pairs, are nvlink_pairs_no_p2p.cpp). A bridge joins GPUs 2k and
// 2k+1 only (the A100 PCIe datasheet: "NVIDIA NVLink Bridge for 2 GPUs"; H100 NVL:
// 600 GB/s bidirectional between the two cards of a pair); every other pair of GPUs talks over
// PCIe, each GPU on its own x16 link to the CPU's root complex (nvidia-smi topo -m: "NV12" or
// "NV4" inside a pair, "PHB"/"SYS" between pairs). NCCL takes the bridge within a pair
// (src/transport/p2p.cc over the NVLink path) and PCIe peer-to-peer between pairs, so a ring over
// four or more GPUs runs at PCIe's pace on its cross-pair hops.
//
//   GPU0 ═bridge═ GPU1      GPU2 ═bridge═ GPU3
//     └──pcie──┐   └─pcie─┐   └─pcie─┐   └─pcie─┐
//              └──────────┴── root ───┴─────────┘ ─cpu-memory─ cpu
//
// intra_node.bandwidth is the bridge's per direction (rated: the device file's nvlink_bandwidth,
// the bridged figure); the PCIe links are the GPU's host link (host.link_bandwidth, else the
// device's host_link_bandwidth) at links.json's achieved PCIe fraction and per-step latency, as
// the `pcie` type's links; they also carry the GPU's host traffic.
#include "topologies/nodes/bridged_pairs.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace stepsim {

std::vector<std::string> check_bridged_pairs(const NodeGroupSpec& g, const char* type)
{
  if (g.gpus_per_node % 2 != 0 && g.gpus_per_node != 1)
    return {fmt::format("type: an \"{}\" node bridges its GPUs two by two: expected an even gpus_per_node, got {}",
                        type, g.gpus_per_node)};
  return {};
}

void build_bridged_pairs(NodeBuild& b, bool peer_to_peer)
{
  const auto& intra     = b.group->intra_node;
  const auto& links     = link_efficiency();
  const int n           = static_cast<int>(b.gpus.size());
  const double pcie_Bps = b.host_link_Bps * links.pcie;
  // Each PCIe link: the GPU's host link latency and half of links.json's PCIe step, so that a
  // transfer between pairs (up one link, down another) pays one PCIe step, as the `pcie` type's
  // do; the bridge's latency carries NVLink's step (with_achieved_bandwidth). Without
  // peer-to-peer a sender's staging is a link of its own at the PCIe rate times links.json
  // pcie.host_staged, as pcie_no_p2p's.
  const double pcie_latency = b.group->host.link_latency_s + links.pcie_step_s / 2;
  const double staged       = peer_to_peer ? 0.0 : links.pcie_host_staged;
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
  auto up      = [&](int g) { return Hop(pcie[static_cast<size_t>(g)], Hop::Direction::UP); };
  auto bridged = [](int a, int c) { return std::min(a, c) % 2 == 0 && std::max(a, c) == std::min(a, c) + 1; };
  for (int a = 0; a < n; ++a)
    for (int c = a + 1; c < n; ++c) {
      if (b.gpu(a) == nullptr || b.gpu(c) == nullptr)
        continue;
      if (bridged(a, c))
        b.route(b.gpu(a), b.gpu(c), Path{Hop(bridge[static_cast<size_t>(a)], Hop::Direction::UP)});
      else if (peer_to_peer)
        b.route(b.gpu(a), b.gpu(c), Path{up(a), Hop(pcie[static_cast<size_t>(c)], Hop::Direction::DOWN)});
      else // each direction its own route: the two stage in different senders' buffers
        for (const auto& [from, to] : {std::pair{a, c}, std::pair{c, a}})
          b.route(b.gpu(from), b.gpu(to),
                  NodeBuild::host_staged(pcie[static_cast<size_t>(from)], staging[static_cast<size_t>(from)],
                                         pcie[static_cast<size_t>(to)]),
                  false);
    }
  b.route_to_cpu([&](int g) { return Path{up(g)}; });
}

bool add_bridged_pairs_type(const char* type, const char* description, bool peer_to_peer)
{
  return NodeTypeRegistry::add(
      type, description,
      NodeType{.gpus_per_node       = 0,
               .check               = [type](const NodeGroupSpec& g) { return check_bridged_pairs(g, type); },
               .build               = [peer_to_peer](NodeBuild& b) { build_bridged_pairs(b, peer_to_peer); },
               .builds_every_gpu    = false,
               .rated_bandwidth_Bps = std::nullopt, // the device file's bridged nvlink_bandwidth
               .link_class          = LinkClass::NvLinkDirect,
               .in_switch_reduction = false,
               .rated_by_device     = true,
               .full_mesh           = false});
}

namespace {

const bool registered = add_bridged_pairs_type(
    "nvlink_pairs",
    "PCIe GPUs bridged two by two by NVLink (A100 PCIe, H100 NVL, RTX A6000 with bridges): the bridge inside "
    "a pair (bandwidth per direction), PCIe through the CPU's root complex between pairs",
    true);

} // namespace
} // namespace stepsim
