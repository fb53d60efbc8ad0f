// NVLS-tree (NCCL 2.18+, NCCL_ALGO_NVLS_TREE): all-reduce across nodes whose NVSwitch reduces in
// the switch (H100, H200, B200 nodes). Inside a node the buffer is split over its k GPUs, each
// the head of S/k; the NVSwitch reduces the node's buffers into the heads (multimem loads with
// reduction) and, at the end, multicasts the result back (multimem stores). Across nodes each
// head runs NCCL's double binary tree over the nodes (src/graph/trees.cc ncclGetDtree) with the
// heads of the same index on the other nodes, through its own NIC. NCCL runs the four parts at
// once on different chunks (src/device/all_reduce.h, RunWorkElement<..., NCCL_ALGO_NVLS_TREE>:
// scatter, gather, reduce and broadcast warps side by side), so a large all-reduce takes the
// longest of the NVSwitch part and the tree part, not their sum.
//
// Bytes per link. Across nodes a tree over 2 nodes moves S per node and direction (each node
// is the child in one of the two trees: it sends S/2 up and receives S/2 down in each), half of
// what a ring moves through the NICs; over more nodes a node internal in one tree sends 2S, as
// much as the ring. Inside the node each GPU link carries S + S/k in each direction (S into the
// switch and its S/k share back; its share out and the S result back), and the switch reduces at
// links.json nvswitch.in_switch_reduction per GPU (as for nvls), which bounds that part to S over
// that rate.
//
// As flows: lanes 0..2k-1 are the trees, lane l tree l % 2 among the heads of index (l / 2) % k,
// each on S/(2k), pipelined in chunks (reduce up to the root, then broadcast down, as "tree").
// The last lane is the NVSwitch's share: SimGrid transfers run between hosts and the switch is a
// router, so, as nvls does, each member sends to the next member of its node, which puts the same
// load on every GPU link (S(1 + 1/k), or S x link rate / reduction rate when the switch is the
// slower, in each direction), in one transfer that runs alongside the trees' chunks (it shares no
// link with them: a GPU reaches its NIC without crossing the NVSwitch). Its start-up is paid by
// the trees' first chunk, as NCCL's NVLS part starts with its first chunk too.
// The switch part reaches less of the switch's reduction rate than one node's NVLS does
// (links.json protocols.nvls_tree.switch_share, fitted on the two-node H100 curves): with a tree
// above it, each NVLS_TREE channel gives 4 of its 20 warps to the broadcast from the network,
// leaving 6 and 5 to the scatter into the switch and the gather out of it, against 8 and 7 on one
// node (src/device/all_reduce.h, RunWorkColl<..., NCCL_ALGO_NVLS_TREE> and <..., NCCL_ALGO_NVLS>,
// the same split since NCCL 2.18). Beyond two nodes the NICs bound it first.
// Needs at least two nodes with the same number (>= 2) of members each, every node's switch
// reducing; all-reduce only.
#include "models/collectives/collective.hpp"
#include "models/collectives/nccl_trees.hpp"
#include "models/collectives/requirements.hpp"
#include "models/link_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

void check(CollectiveOp op, const GroupShape& g)
{
  require_all_reduce("nvls_tree", op); // as in NCCL
  if (g.n <= 1)
    return;
  if (g.nodes() < 2)
    throw std::invalid_argument("the nvls_tree algorithm runs across nodes (NCCL enables NVLS_TREE only with 2 "
                                "nodes or more); inside one node use nvls");
  if (!g.in_switch_reduction)
    throw std::invalid_argument("the nvls_tree algorithm needs nodes whose NVSwitch reduces in the switch "
                                "(NVSwitch nodes of H100, H200 or B200 GPUs, intra_node.nvls not false)");
  require_same_members_per_node("nvls_tree", g, 2);
}

// The tree lanes: two trees per head (simulation.nccl_channels, even, when given).
int tree_lanes(const GroupShape& g)
{
  if (g.channels > 0)
    return std::max(2, g.channels - g.channels % 2);
  return 2 * std::max(1, g.per_node);
}

int lanes(CollectiveOp, const GroupShape& g, double) { return tree_lanes(g) + 1; }

// The rate at which the switch part reduces S, bytes per second (0: no limit beyond the links).
double switch_reduction(const GroupShape& g) { return nvls_reduction(g) * link_efficiency().nvls_tree_switch_share; }

// NCCL's NVLS_TREE chunking (src/enqueue.cc, calcCollChunking, NCCL 2.2x): a chunk of NVLS's
// chunk size (NCCL_NVLS_CHUNKSIZE, 128 KiB), at most 64 KiB on 4 nodes or more
// (NCCL_NVLSTREE_MAX_CHUNKSIZE's default), cut to 64 and 32 KiB for small buffers; one loop moves a
// chunk per channel (nvlsChannels, 16) and per head. A lane (one tree of one head) carries its
// head's share of a loop on half the channels: each chunk step here is one such loop, so a buffer
// of a few loops pays the pipeline's fill and drain over loops of megabytes, as NCCL does (the
// published two-node H100 curves: a fixed 0.2 ms up to 1 GiB). At most 64 steps per phase (the
// fill is then under 2 % of the time), as pipeline_chunks keeps the flows few.
constexpr double kNvlsChannels = 16; // NCCL's nvlsChannels on Hopper (NCCL_NVLS_NCHANNELS default)

// The bytes of one loop: a chunk per channel and per head.
double loop_bytes(const GroupShape& g, double bytes)
{
  double chunk     = g.nodes() >= 4 ? 65536 : 131072;
  const double ops = kNvlsChannels * std::max(1, g.per_node); // concurrentOps
  if (bytes < 4 * ops * chunk && chunk > 65536)
    chunk = 65536;
  if (bytes < ops * chunk && chunk > 32768)
    chunk = 32768;
  return ops * chunk;
}

int chunks(const GroupShape& g, double bytes)
{
  return static_cast<int>(std::clamp(std::ceil(bytes / loop_bytes(g, bytes)), 1.0, 64.0));
}

// The pipeline's fill and drain. Each loop is reduced in the switch, climbs the tree, comes down
// it and is multicast back: 2 + 2·depth stages, a loop's worth each at the pace of the slowest
// part (the switch's reduction, or the node's NICs). The first loop reaches the end that many
// stages less one after the pipeline starts, beside the S the slowest part moves. The published
// two-node H100 curves (issue309_qoofyk in nccl_tests_published.json; the held-out Nebius
// logs) take a fixed 0.2 ms more than their bandwidth from 64 MiB to 1 GiB: 3 loops of 16 MiB at
// 274 GB/s is 0.18 ms. Seconds.
double fill_seconds(const GroupShape& g, double bytes)
{
  int depth = 0;
  while ((1 << depth) < g.nodes())
    ++depth;
  double rate = switch_reduction(g); // of S per second
  if (g.inter.bandwidth_Bps > 0) {
    const double nics = g.per_node * g.inter.bandwidth_Bps; // each head's share through its NIC
    rate              = rate > 0 ? std::min(rate, nics) : nics;
  }
  if (!(rate > 0))
    return 0;
  return (1 + 2 * depth) * std::min(bytes, loop_bytes(g, bytes)) / rate;
}

int steps(CollectiveOp op, const GroupShape& g, double bytes)
{
  check(op, g);
  if (g.n <= 1)
    return 0;
  return 2 * (chunks(g, bytes) + 1);
}

// What each GPU link carries per direction for the NVSwitch's part (see the header).
double switch_bytes(const GroupShape& g, double bytes)
{
  const double links     = bytes * (1.0 + 1.0 / g.per_node);
  const double reduction = switch_reduction(g);
  if (reduction > 0 && g.intra.bandwidth_Bps > 0)
    return std::max(links, bytes * g.intra.bandwidth_Bps / reduction);
  return links;
}

CollectiveStep step(CollectiveOp, const GroupShape& g, double bytes, int lane, int member, int step)
{
  const int T      = tree_lanes(g);
  const int C      = chunks(g, bytes);
  const bool up    = step <= C;
  const int k      = up ? step : step - (C + 1);
  const int node   = g.node_of_member[static_cast<size_t>(member)];
  const int local  = g.local_rank[static_cast<size_t>(member)];
  const int per    = g.per_node;
  const auto& here = g.node_members[static_cast<size_t>(node)];
  CollectiveStep s;
  if (lane == T) { // the NVSwitch's share, one transfer alongside the trees' chunks
    if (step == 0) {
      // With the pipeline's fill, as the time it holds the GPU's link at the link's rate.
      s.bytes = switch_bytes(g, bytes) + fill_seconds(g, bytes) * g.intra.bandwidth_Bps;
      s.send(here[static_cast<size_t>((local + 1) % per)]);
      s.recv(here[static_cast<size_t>((local - 1 + per) % per)]);
    }
    return s;
  }
  const int head = (lane / 2) % per;
  if (local != head)
    return s;
  const TreeLinks t = nccl_dtree(g.nodes(), node, lane % 2);
  auto head_of      = [&](int other) { return g.node_members[static_cast<size_t>(other)][static_cast<size_t>(head)]; };
  s.bytes           = bytes / T / C;
  if (up) { // receive chunk k from the children, pass chunk k-1 up
    if (k < C)
      for (int c : t.children)
        if (c >= 0)
          s.recv(head_of(c));
    if (k >= 1 && t.parent >= 0)
      s.send(head_of(t.parent));
  } else { // receive chunk k from the parent, pass chunk k-1 down
    if (k < C && t.parent >= 0)
      s.recv(head_of(t.parent));
    if (k >= 1)
      for (int c : t.children)
        if (c >= 0)
          s.send(head_of(c));
  }
  return s;
}

// A step is one of NCCL's loops (chunks), whose stages, from the switch's reduction to its
// multicast, are paid as the pipeline's fill on the NVSwitch's share (fill_seconds); the published
// NVLS-tree runs across nodes take about 0.2 ms more than their bandwidth from 64 MiB to 1 GiB,
// which the fill gives. Its tree lanes keep up to NCCL_STEPS loops on the wire
// (CollectiveAlgorithm::pipeline_slots), as the tree's do: NVLS_TREE's warps that reduce up the
// tree and receive from the network run on the Simple protocol's primitives (src/device/
// all_reduce.h, RunWorkColl<..., NCCL_ALGO_NVLS_TREE, NCCL_PROTO_SIMPLE>: Primitives<...,
// ProtoSimple<1, 1, ...>> for "Recv from network, broadcast"), whose connections hold NCCL_STEPS
// slots (src/device/prims_simple.h waitPeer), so a loop's latency hides behind the loops before
// it. With one slot, EFA's step (31.1 us) was paid by each of 64 loops and held two p5 nodes at
// 279 GB/s from 256 MiB to 1 GiB, where AWS's Slurm log climbs from 343 to 437
// (configs/calibration/nccl_tests_published.json).
const bool registered = CollectiveRegistry::add(
    "nvls_tree",
    "NCCL's NVLS_TREE across nodes whose NVSwitch reduces (H100/H200/B200): the switch reduces inside each node, "
    "each GPU runs the double binary tree across nodes on its S/k through its NIC",
    CollectiveAlgorithm{.name                 = "nvls_tree",
                        .lanes                = lanes,
                        .steps                = steps,
                        .step                 = step,
                        .pick                 = {},
                        .nccl                 = NcclAlgorithm::NvlsTree,
                        .simple_protocol_only = true,
                        .pipeline_slots       = kNcclSteps});

} // namespace
} // namespace stepsim
