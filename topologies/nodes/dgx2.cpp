// DGX-2: 16 Tesla V100 on two baseboards of 8. Each GPU's 6 NVLink2 links (6 x 25 GB/s = 150 GB/s
// per direction, intra_node.bandwidth) go one each to the 6 NVSwitch chips of its baseboard, and
// the two baseboards' switches are joined by 48 NVLinks (8 per switch pair: 1.2 TB/s per
// direction, the 2.4 TB/s bisection bandwidth of the datasheet), so the trunk carries all 8 GPUs
// of a board at full rate: the system is non-blocking. Sources: NVIDIA DGX-2 datasheet (16 V100,
// 12 NVSwitches, 2.4 TB/s bisection); NVSwitch whitepaper (18 ports of 25 GB/s per chip).
//
// Model: each baseboard's 6 switches are one router "nvswitchK"; a GPU's 6 links are one link
// of 6x the bandwidth; the trunk between boards is one link of 8x the per-GPU bandwidth. A route
// between boards crosses one more switch hop, which adds half the GPU-to-GPU latency (an
// assumption: no published per-hop figure).
//
//   GPU0..7 ─── nvswitch0 ═══trunk═══ nvswitch1 ─── GPU8..15
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

namespace stepsim {
namespace {

constexpr int kGpusPerBoard = 8;

void build(NodeBuild& b)
{
  const auto& intra = b.group->intra_node;
  b.add_host_links();
  if (b.built_gpus() < 2)
    return;
  std::vector<simgrid::s4u::Link*> up(b.gpus.size(), nullptr);
  for (int g = 0; g < static_cast<int>(b.gpus.size()); ++g)
    if (b.gpu(g) != nullptr)
      up[static_cast<size_t>(g)] =
          b.link(fmt::format("gpu{}-nvswitch{}", g, g / kGpusPerBoard), intra.bandwidth_Bps, intra.latency_s / 2);
  auto* trunk = b.link("nvswitch0-nvswitch1", kGpusPerBoard * intra.bandwidth_Bps, intra.latency_s / 2);
  b.route_gpu_pairs([&](int a, int c) {
    Path p{Hop(up[static_cast<size_t>(a)], Hop::Direction::UP)};
    if (a / kGpusPerBoard != c / kGpusPerBoard) // a < c: board 0 to board 1
      p.emplace_back(trunk, Hop::Direction::UP);
    p.emplace_back(up[static_cast<size_t>(c)], Hop::Direction::DOWN);
    return p;
  });
}

// 150e9: NVLink2, 6 links x 25 GB/s per V100 into the NVSwitches (DGX-2 datasheet). Its
// first-generation NVSwitch has no in-switch reduction.
const bool registered = NodeTypeRegistry::add(
    "dgx2", "DGX-2: 16 V100 on two NVSwitch baseboards joined by a non-blocking trunk (bandwidth per GPU)",
    NodeType{16, nullptr, build, false, 150e9, LinkClass::NvLink, false});

} // namespace
} // namespace stepsim
