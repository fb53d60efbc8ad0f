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

#include <fmt/format.h>

namespace stepsim {
namespace {

// The largest mesh: an AMD Instinct platform's eight GPUs (seven xGMI links each).
constexpr int kMostGpus = 8;

std::vector<std::string> check(const NodeGroupSpec& g)
{
  if (g.gpus_per_node > kMostGpus)
    return {fmt::format("type: an xgmi_mesh node joins at most {} GPUs (each GPU has {} xGMI links); got "
                        "gpus_per_node {}",
                        kMostGpus, kMostGpus - 1, g.gpus_per_node)};
  return {};
}

void build(NodeBuild& b)
{
  const auto& intra = b.group->intra_node;
  const int n       = b.group->gpus_per_node;
  b.add_host_links();
  // link[a][c]: the xGMI link between a and c, UP from the lower-numbered GPU. Only the built
  // GPUs' links: a pair's route crosses no other GPU.
  std::vector<std::vector<simgrid::s4u::Link*>> link(static_cast<size_t>(n),
                                                     std::vector<simgrid::s4u::Link*>(static_cast<size_t>(n)));
  for (int a = 0; a < n; ++a)
    for (int c = a + 1; c < n; ++c)
      if (b.gpu(a) != nullptr && b.gpu(c) != nullptr)
        link[static_cast<size_t>(a)][static_cast<size_t>(c)] = link[static_cast<size_t>(c)][static_cast<size_t>(a)] =
            b.link(fmt::format("gpu{}-gpu{}-xgmi", a, c), intra.bandwidth_Bps, intra.latency_s);
  b.route_gpu_pairs([&](int a, int c) {
    return Path{Hop(link[static_cast<size_t>(a)][static_cast<size_t>(c)],
                    a < c ? Hop::Direction::UP : Hop::Direction::DOWN)};
  });
}

// 64e9: one xGMI link per direction (the AMD blog above; MI300X and MI325X platforms alike).
const bool registered = NodeTypeRegistry::add(
    "xgmi_mesh",
    "AMD Instinct MI300X/MI325X platform: every two GPUs joined by an xGMI link of their own (bandwidth per link), "
    "no switch",
    NodeType{.gpus_per_node       = 0,
             .check               = check,
             .build               = build,
             .builds_every_gpu    = false,
             .rated_bandwidth_Bps = 64e9,
             .link_class          = LinkClass::Xgmi,
             .in_switch_reduction = false,
             .rated_by_device     = false,
             .full_mesh           = true});

} // namespace
} // namespace stepsim
