// CollNet with InfiniBand SHARP (NCCL_ALGO_COLLNET_DIRECT, with NCCL_COLLNET_ENABLE=1 and the
// SHARP plugin): the fabric's switches reduce. Inside a node the buffer is split over its k GPUs,
// each the head of S/k: the GPUs scatter their pieces to the heads, each head reduces its node's
// S/k and sends it once through its own NIC into the switch, receives the result reduced over all
// nodes, and broadcasts it back to the node's GPUs (src/device/all_reduce.h,
// RunWorkElement<..., NCCL_ALGO_COLLNET_DIRECT>: scatter, reduce-and-send, receive-and-broadcast
// and gather warps side by side on different chunks). So each node sends S once and receives S
// once across the fabric, whatever the number of nodes, and the latency across is one trip
// through the switch tree, not log2(nodes) hops.
//
// As flows: SimGrid transfers run between hosts and a switch is a router, so the switch's share
// is traffic with the same load on the same NIC links: lane h (one per head index) sends each
// chunk of its S/k from the head on node i to the head of the same index on node i+1 (each NIC
// link carries S/k up and S/k down, one NIC-switch-NIC latency per chunk). The last lane is the
// inside of the node: each member sends to the next one of its node what its GPU link carries per
// direction, 2(k-1)/k·S for the scatter and the gather (or, on an NVSwitch that reduces, as
// nvls_tree, S(1 + 1/k) at the switch's reduction rate), in one transfer that runs alongside. Needs at least two nodes with the same number of members each, on a fabric that
// reduces in the network (platform.network.sharp); all-reduce only. The switches reduce at
// links.json nic.in_network_reduction of the NIC's rate, a step across taking that much longer.
#include "models/collectives/collective.hpp"
#include "models/collectives/requirements.hpp"
#include "models/link_calibration.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

void check(CollectiveOp op, const GroupShape& g)
{
  require_all_reduce("collnet", op);
  if (g.n <= 1)
    return;
  if (g.nodes() < 2)
    throw std::invalid_argument("the collnet algorithm reduces in the network's switches, across nodes; the group "
                                "is on one node");
  if (!g.in_network_reduction)
    throw std::invalid_argument("the collnet algorithm needs a fabric whose switches reduce (InfiniBand SHARP): "
                                "set platform.network.sharp to true where the fabric has it");
  require_same_members_per_node("collnet", g);
}

int heads(const GroupShape& g) { return std::max(1, g.per_node); }

int lanes(CollectiveOp, const GroupShape& g, double) { return heads(g) + (g.per_node > 1 ? 1 : 0); }

int chunks(const GroupShape& g, double bytes) { return pipeline_chunks(bytes / heads(g)); }

int steps(CollectiveOp op, const GroupShape& g, double bytes)
{
  check(op, g);
  return g.n > 1 ? chunks(g, bytes) + 1 : 0;
}

// What each GPU link carries per direction inside the node (see the header).
double inside_bytes(const GroupShape& g, double bytes)
{
  const int k = g.per_node;
  if (g.in_switch_reduction) {
    const double links     = bytes * (1.0 + 1.0 / k);
    const double reduction = nvls_reduction(g);
    if (reduction > 0 && g.intra.bandwidth_Bps > 0)
      return std::max(links, bytes * g.intra.bandwidth_Bps / reduction);
    return links;
  }
  return 2.0 * (k - 1) / k * bytes;
}

CollectiveStep step(CollectiveOp, const GroupShape& g, double bytes, int lane, int member, int step)
{
  const int C     = chunks(g, bytes);
  const int k     = g.per_node;
  const int node  = g.node_of_member[static_cast<size_t>(member)];
  const int local = g.local_rank[static_cast<size_t>(member)];
  const int N     = g.nodes();
  CollectiveStep s;
  if (lane == heads(g)) { // inside the node, one transfer alongside the chunks across
    if (step == 0) {
      const auto& here = g.node_members[static_cast<size_t>(node)];
      s.bytes          = inside_bytes(g, bytes);
      s.send(here[static_cast<size_t>((local + 1) % k)]);
      s.recv(here[static_cast<size_t>((local - 1 + k) % k)]);
    }
    return s;
  }
  if (local != lane)
    return s;
  // Chunk `step` into the switch, the result of chunk step-1 out of it.
  auto head_on = [&](int other) { return g.node_members[static_cast<size_t>(other)][static_cast<size_t>(lane)]; };
  s.bytes      = bytes / heads(g) / C;
  // The switches reduce more slowly than the NIC delivers (links.json nic.in_network_reduction):
  // the chunk takes as long as the bytes the NIC would move meanwhile.
  if (const double sharp = link_efficiency().in_network_reduction; sharp > 0)
    s.bytes /= sharp;
  if (step < C)
    s.send(head_on((node + 1) % N));
  if (step >= 1)
    s.recv(head_on((node - 1 + N) % N));
  return s;
}

const bool registered = CollectiveRegistry::add(
    "collnet",
    "NCCL's CollNet with InfiniBand SHARP (platform.network.sharp): each node sends S once into the fabric's switches, "
    "which reduce, and receives the result once, split over its GPUs' NICs",
    CollectiveAlgorithm{.name = "collnet", .lanes = lanes, .steps = steps, .step = step, .pick = {},
                        .nccl = NcclAlgorithm::CollNet, .simple_protocol_only = true,
                        .pipeline_slots = kNcclSteps});

} // namespace
} // namespace stepsim
