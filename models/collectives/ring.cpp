// Ring collectives (NCCL's ring): the buffer is cut into n chunks that travel around the ring.
// All-reduce = reduce-scatter (n-1 steps) then all-gather (n-1 steps), each step moving S/n per
// member, so an all-reduce costs 2(n-1)/n·S/B + 2(n-1)·latency. All-to-all sends each peer its
// chunk directly, one peer per step.
//
// Lanes: NCCL runs one ring per channel and lays the rings so that they leave each node through
// different GPUs, hence different NICs. A group spanning nodes with k members on each runs k rings
// (or simulation.nccl_channels): ring c visits each node's members starting at its c-th, so it
// enters the node at member c and leaves it at member c-1, and over the k rings every member's
// NIC sends and receives one ring's share, S/k. With one ring a cross-node all-reduce would go
// through one NIC per node boundary. On nodes whose GPUs are joined pairwise (an xGMI full mesh),
// ring c crosses a node along a path of its own (GroupShape::node_orders, mesh_rings.cpp), so that
// the k rings use every link of the node once in each direction as they do every NIC; inside one
// such node the rings are mesh_rings'. A group inside one node, or with one member per node, runs
// one ring in group order (on an NVSwitch every ring crosses the same links), except a node whose
// GPUs are joined by direct links of different reach (DGX-1's NVLink hybrid cube mesh): there
// NCCL's search lays several rings over the links (src/graph/search.cc, ncclTopoCompute with the
// ring pattern), here those of find_rings (GroupShape::rings: on a DGX-1's 8 GPUs three cycles,
// each run both ways, six rings that together use all 24 NVLinks in both directions, as the
// three bidirectional rings of ASTRA-sim's model of NCCL on that machine,
// https://github.com/astra-sim/astra-sim-docs validation/hardware/gpu-validation.md), one lane
// each on S/rings.
//
// Broadcast and reduce (root: member 0) are a pipelined chain along the ring: the buffer is cut
// into chunks (pipeline_chunks); in step k a member receives chunk k from its predecessor and
// passes chunk k-1 on, so S crosses the n-1 hops in (chunks + n - 2) chunk times.
#include "models/collectives/collective.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

bool rooted(CollectiveOp op) { return op == CollectiveOp::Broadcast || op == CollectiveOp::Reduce; }

// The rings the node's direct links carry (see the header), when the group is on one such node.
bool laid(const GroupShape& g) { return g.nodes() == 1 && !g.rings.empty(); }

int ring_lanes(CollectiveOp op, const GroupShape& g, double)
{
  if (op == CollectiveOp::AllToAll || g.n <= 1)
    return 1;
  if (g.channels > 0)
    return g.channels;
  if (laid(g))
    return static_cast<int>(g.rings.size());
  return g.nodes() > 1 && g.per_node > 1 ? g.per_node : 1;
}

const std::vector<int>& laid_ring(const GroupShape& g, int lane)
{
  return g.rings[static_cast<size_t>(lane) % g.rings.size()];
}

// Position of a member in ring `lane`, and the member at a position.
bool spread(const GroupShape& g) { return g.nodes() > 1 && g.per_node > 1; }

// Ring lane `lane`'s way through a node of full-mesh links (GroupShape::node_orders), when given.
const std::vector<int>* node_order(const GroupShape& g, int lane)
{
  if (g.node_orders.size() != static_cast<size_t>(g.per_node))
    return nullptr;
  return &g.node_orders[static_cast<size_t>(lane % g.per_node)];
}

int ring_position(const GroupShape& g, int lane, int member)
{
  if (laid(g)) {
    const auto& ring = laid_ring(g, lane);
    return static_cast<int>(std::find(ring.begin(), ring.end(), member) - ring.begin());
  }
  if (!spread(g))
    return member;
  const int k    = g.per_node;
  const int l    = g.local_rank[static_cast<size_t>(member)];
  const int node = g.node_of_member[static_cast<size_t>(member)];
  if (const auto* order = node_order(g, lane))
    return node * k + static_cast<int>(std::find(order->begin(), order->end(), l) - order->begin());
  return node * k + ((l - lane) % k + k) % k;
}

int ring_member(const GroupShape& g, int lane, int position)
{
  position = ((position % g.n) + g.n) % g.n;
  if (laid(g))
    return laid_ring(g, lane)[static_cast<size_t>(position)];
  if (!spread(g))
    return position;
  const int k        = g.per_node;
  const auto& node   = g.node_members[static_cast<size_t>(position / k)];
  if (const auto* order = node_order(g, lane))
    return node[static_cast<size_t>((*order)[static_cast<size_t>(position % k)])];
  return node[static_cast<size_t>((position % k + lane) % k)];
}

int ring_steps(CollectiveOp op, const GroupShape& g, double bytes)
{
  const int n = g.n;
  if (n <= 1)
    return 0;
  switch (op) {
  case CollectiveOp::AllReduce: return 2 * (n - 1);
  case CollectiveOp::AllGather:
  case CollectiveOp::ReduceScatter:
  case CollectiveOp::AllToAll: return n - 1;
  case CollectiveOp::Broadcast:
  case CollectiveOp::Reduce: return pipeline_chunks(bytes / ring_lanes(op, g, bytes)) + 1;
  }
  throw std::invalid_argument(std::string("the ring algorithm does not implement ") + collective_name(op));
}

CollectiveStep ring_step(CollectiveOp op, const GroupShape& g, double bytes, int lane, int member, int step)
{
  const int n     = g.n;
  const int lanes = ring_lanes(op, g, bytes);
  CollectiveStep s;
  if (op == CollectiveOp::AllToAll) {
    s.bytes = bytes / n;
    s.send((member + step + 1) % n);
    s.recv((member - step - 1 + n) % n);
    return s;
  }
  const int position = ring_position(g, lane, member);
  if (!rooted(op)) {
    s.bytes = bytes / lanes / n;
    s.send(ring_member(g, lane, position + 1));
    s.recv(ring_member(g, lane, position - 1));
    return s;
  }
  // The chain starts at the root (member 0) and follows the ring; a reduce runs it backwards.
  const int chunks = pipeline_chunks(bytes / lanes);
  const int hop    = (position - ring_position(g, lane, 0) + n) % n; // distance from the root
  const int from   = op == CollectiveOp::Broadcast ? hop - 1 : hop + 1;
  const int to     = op == CollectiveOp::Broadcast ? hop + 1 : hop - 1;
  const int root   = ring_position(g, lane, 0);
  s.bytes          = bytes / lanes / chunks;
  if (from >= 0 && from < n && step < chunks)
    s.recv(ring_member(g, lane, root + from));
  if (to >= 0 && to < n && step >= 1)
    s.send(ring_member(g, lane, root + to));
  return s;
}

const bool registered =
    CollectiveRegistry::add("ring",
                            "NCCL's ring: n-1 (all-reduce 2(n-1)) steps of S/n to the next member; across nodes one ring "
                            "per member of a node, spread over its NICs; broadcast and reduce a pipelined chain",
                            CollectiveAlgorithm{.name  = "ring",
                                                .lanes = ring_lanes,
                                                .steps = ring_steps,
                                                .step  = ring_step,
                                                .pick  = {},
                                                .nccl  = NcclAlgorithm::Ring,
                                                .uniform_steps = [](CollectiveOp op, const GroupShape&) {
                                                  return op != CollectiveOp::AllToAll && !rooted(op);
                                                }});

} // namespace
} // namespace stepsim
