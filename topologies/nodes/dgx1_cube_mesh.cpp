// DGX-1 with Tesla V100: the hybrid cube-mesh. 8 GPUs, each with 6 NVLink2 links of 25 GB/s per
// direction (intra_node.bandwidth is one link), 24 links in all: two fully connected quads
// (GPUs 0-3 and 4-7) and one bundle between each GPU and its partner in the other quad; some
// pairs are joined by two links (50 GB/s). The link list is the one `nvidia-smi topo -m` prints
// on a DGX-1 ("NV1" one link, "NV2" two, "SYS" none), as in NVIDIA's DGX-1 with Tesla V100 system
// architecture whitepaper (hybrid cube-mesh, 6 NVLinks per GPU) and NVIDIA's developer blog
// topology listing of the DGX-1:
//
//        GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7
//   GPU0  X   NV1  NV1  NV2  NV2  SYS  SYS  SYS
//   GPU1 NV1   X   NV2  NV1  SYS  NV2  SYS  SYS
//   GPU2 NV1  NV2   X   NV2  SYS  SYS  NV1  SYS
//   GPU3 NV2  NV1  NV2   X   SYS  SYS  SYS  NV1
//   GPU4 NV2  SYS  SYS  SYS   X   NV1  NV1  NV2
//   GPU5 SYS  NV2  SYS  SYS  NV1   X   NV2  NV1
//   GPU6 SYS  SYS  NV1  SYS  NV1  NV2   X   NV2
//   GPU7 SYS  SYS  SYS  NV1  NV2  NV1  NV2   X
//
// A pair without NVLink (SYS) is routed over NVLink through one intermediate GPU (the one whose
// two links are wider; the lower-numbered on a tie), as NCCL's rings and trees do by forwarding
// through a neighbour rather than crossing the CPUs' QPI link: two hops, twice the latency,
// bottleneck the narrower link. Each GPU also has its own PCIe host link to the CPU.
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

#include <array>

namespace stepsim {
namespace {

struct CubeMeshLink {
  int a, b, links;
};
constexpr std::array<CubeMeshLink, 16> kLinks = {{{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {1, 2, 2}, {1, 3, 1}, {2, 3, 2},
                                                  {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2},
                                                  {0, 4, 2}, {1, 5, 2}, {2, 6, 1}, {3, 7, 1}}};
constexpr int kGpus = 8;

void build(NodeBuild& b)
{
  const auto& intra = b.group->intra_node;
  b.add_host_links();
  // link[a][b]: the NVLink bundle between a and b, UP from the lower-numbered GPU.
  std::array<std::array<simgrid::s4u::Link*, kGpus>, kGpus> link{};
  std::array<std::array<int, kGpus>, kGpus> width{};
  for (const auto& l : kLinks) {
    auto* bundle = b.link(fmt::format("gpu{}-gpu{}-nvlink", l.a, l.b), l.links * intra.bandwidth_Bps, intra.latency_s);
    link[l.a][l.b] = link[l.b][l.a] = bundle;
    width[l.a][l.b] = width[l.b][l.a] = l.links;
  }
  auto hop = [&](int from, int to) {
    return Hop(link[from][to], from < to ? Hop::Direction::UP : Hop::Direction::DOWN);
  };
  b.route_gpu_pairs([&](int a, int c) {
    if (link[a][c] != nullptr)
      return Path{hop(a, c)};
    int via = -1;
    for (int m = 0; m < kGpus; ++m)
      if (link[a][m] != nullptr && link[m][c] != nullptr &&
          (via < 0 || std::min(width[a][m], width[m][c]) > std::min(width[a][via], width[via][c])))
        via = m;
    return Path{hop(a, via), hop(via, c)};
  });
}

// 25e9: one NVLink2 link per direction (DGX-1 with Tesla V100 system architecture whitepaper).
const bool registered = NodeTypeRegistry::add(
    "dgx1_cube_mesh", "DGX-1 V100: hybrid cube-mesh of 24 NVLink2 links (bandwidth per link), no switch",
    NodeType{kGpus, nullptr, build, true, 25e9, LinkClass::NvLinkDirect, false});

} // namespace
} // namespace stepsim
