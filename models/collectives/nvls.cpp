// NVLink SHARP (NVLS, NCCL 2.17+): on an NVSwitch of the third generation (H100, H200, B200
// nodes) the switch itself reduces. For an all-reduce each GPU pushes its buffer into the switch
// once and reads the reduced buffer back once (multimem loads with reduction, then multicast
// stores), pipelined, so each GPU link carries S in each direction instead of the ring's
// 2(n-1)/n·S, and the latency is one trip through the switch instead of 2(n-1) hops.
//
// SimGrid transfers run between hosts and the switch is a router, so the switch's share is
// modelled by traffic with the same load on the same links: in one step member m sends S to
// member m+1 (each GPU link carries S up and S down; one GPU-switch-GPU latency). Needs every
// member on one node whose switch reduces (the driver marks such groups); all-reduce only.
//
// The switch reduces more slowly than the GPU links deliver: on 8x H100 NVLS peaks at about
// 480 GB/s bus bandwidth where the links would allow 614. That rate (links.json
// nvswitch.in_switch_reduction, per GPU) stretches the step: a member whose link is faster than
// the reduction sends the bytes that the link moves while the switch reduces S.
#include "models/collectives/collective.hpp"
#include "models/collectives/requirements.hpp"
#include "models/link_calibration.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace stepsim {
namespace {

int nvls_steps(CollectiveOp op, const GroupShape& g, double)
{
  require_all_reduce("nvls", op);
  if (g.n > 1 && (!g.in_switch_reduction || g.nodes() != 1))
    throw std::invalid_argument("the nvls algorithm needs every member on one node whose NVSwitch reduces in the "
                                "switch (NVSwitch nodes of H100, H200 or B200 GPUs, intra_node.nvls not false)");
  return g.n > 1 ? 1 : 0;
}

// NCCL's NVLS chunking (src/enqueue.cc, the NCCL_ALGO_NVLS case of the chunk size): a chunk of at
// most 128 KiB, cut to 64, 32 and 16 KiB below 64, 8 and 2 loops of the larger chunk; one loop
// moves a chunk per channel (nvlsChannels, 16 on Hopper: NCCL_NVLS_NCHANNELS) and per head (each
// GPU of the node heads its share). Bytes.
double loop_bytes(const GroupShape& g, double bytes)
{
  constexpr double kNvlsChannels = 16;
  const double ops               = kNvlsChannels * std::max(1, g.n); // concurrentOps
  double chunk                   = 131072;
  for (const auto& [loops, smaller] : {std::pair{64.0, 65536.0}, {8.0, 32768.0}, {2.0, 16384.0}})
    if (bytes < loops * ops * chunk && chunk > smaller)
      chunk = smaller;
  return ops * chunk;
}

CollectiveStep nvls_step(CollectiveOp, const GroupShape& g, double bytes, int, int member, int)
{
  CollectiveStep s;
  const double reduction = nvls_reduction(g);
  s.bytes = reduction > 0 && g.intra.bandwidth_Bps > reduction ? bytes * g.intra.bandwidth_Bps / reduction : bytes;
  // The last loop's multicast after its reduction, as the time it holds the GPU's link.
  if (reduction > 0)
    s.bytes += std::min(bytes, loop_bytes(g, bytes)) / reduction * g.intra.bandwidth_Bps;
  s.send((member + 1) % g.n);
  s.recv((member - 1 + g.n) % g.n);
  return s;
}

const bool registered = CollectiveRegistry::add(
    "nvls", "NVLink SHARP in-switch all-reduce (H100/H200/B200 NVSwitch nodes): each GPU sends S once and receives S once",
    CollectiveAlgorithm{.name = "nvls", .lanes = {}, .steps = nvls_steps, .step = nvls_step, .pick = {},
                        .nccl = NcclAlgorithm::Nvls, .simple_protocol_only = true});

} // namespace
} // namespace stepsim
