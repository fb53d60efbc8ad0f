// NCCL's trees. Across nodes a binary tree joins the nodes (NCCL's ncclGetBtree on node indices,
// src/graph/trees.cc); inside a node the members form a chain below the node's first member. An
// all-reduce runs two trees at once (NCCL's double binary tree, ncclGetDtree: the second tree is
// the first mirrored, or shifted by one for an odd number of nodes, so that a node that is
// internal in one tree is a leaf in the other), each on half the buffer: reduce up to the root,
// then broadcast down, both pipelined in chunks (tree_chunks, NCCL's chunk sizing). In step k of the reduce a
// member receives chunk k from each child and sends chunk k-1 to its parent; the broadcast mirrors
// it. Across nodes with k members on each, 2k lanes (NCCL's channels): lane l runs tree l % 2
// with each node's chain rotated to start at its (l / 2)-th member, so every NIC carries trees.
// With C chunks and a tree of height H a phase takes about (C + H - 1) chunk times, and a node
// sending to two children (or receiving from two) shares its link between them: on an idle
// non-blocking fabric an all-reduce costs about 2·(C + H - 1)·(α + S/(C·B)), the ring's bandwidth
// 2S/B with 2H latencies instead of 2(n-1). Broadcast and reduce run one tree rooted at member 0.
#include "models/collectives/collective.hpp"
#include "models/collectives/nccl_trees.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace stepsim {

TreeLinks nccl_btree(int n, int rank)
{
  TreeLinks out;
  int bit = 1;
  while (bit < n && (bit & rank) == 0)
    bit <<= 1;
  if (rank == 0) {
    out.children[1] = n > 1 ? bit >> 1 : -1;
    return out;
  }
  int up = (rank ^ bit) | (bit << 1);
  if (up >= n)
    up = rank ^ bit;
  out.parent      = up;
  int lowbit      = bit >> 1;
  out.children[0] = lowbit == 0 ? -1 : rank - lowbit;
  int down1       = lowbit == 0 ? -1 : rank + lowbit;
  while (down1 >= n) {
    lowbit >>= 1;
    down1 = lowbit == 0 ? -1 : rank + lowbit;
  }
  out.children[1] = down1;
  return out;
}

TreeLinks nccl_dtree(int n, int rank, int tree)
{
  if (tree == 0)
    return nccl_btree(n, rank);
  auto map = [&](int r, bool back) {
    if (r < 0)
      return -1;
    if (n % 2 == 1)
      return back ? (r + 1) % n : (r - 1 + n) % n;
    return n - 1 - r;
  };
  TreeLinks t = nccl_btree(n, map(rank, false));
  return TreeLinks{map(t.parent, true), {map(t.children[0], true), map(t.children[1], true)}};
}

namespace {

// nccl_dtree(nodes, node, tree), from a table of every node's links in both trees, made once per
// node count (kept for each count asked: the replay interleaves the steps of groups over
// different numbers of nodes): a walk asks it for every member on every step (tools/bench: the
// `auto` table over 1,024 GPUs).
TreeLinks dtree_of(int nodes, int node, int tree)
{
  thread_local std::vector<std::pair<int, std::vector<TreeLinks>>> tables;
  thread_local size_t last = 0;
  if (last >= tables.size() || tables[last].first != nodes) {
    last = 0;
    while (last < tables.size() && tables[last].first != nodes)
      ++last;
    if (last == tables.size()) {
      std::vector<TreeLinks> table(2 * static_cast<size_t>(nodes));
      for (int r = 0; r < nodes; ++r)
        for (int t = 0; t < 2; ++t)
          table[2 * static_cast<size_t>(r) + static_cast<size_t>(t)] = nccl_dtree(nodes, r, t);
      tables.emplace_back(nodes, std::move(table));
    }
  }
  return tables[last].second[2 * static_cast<size_t>(node) + static_cast<size_t>(tree)];
}

// A member's parent and children in tree `tree` over the nodes, with a chain inside each node.
struct MemberLinks {
  int parent = -1;
  int children[3] = {-1, -1, -1};
  int child_count = 0;
};

// Lane `lane` runs tree lane % 2 with each node's chain starting at its (lane / 2)-th member, so
// that across lanes every member heads its node (and its NIC carries a tree) once.
MemberLinks member_links(const GroupShape& g, int lane, int member)
{
  MemberLinks out;
  const int node    = g.node_of_member[static_cast<size_t>(member)];
  const auto& chain = g.node_members[static_cast<size_t>(node)];
  const int k       = static_cast<int>(chain.size());
  const int rotate  = lane / 2;
  const int at      = ((g.local_rank[static_cast<size_t>(member)] - rotate) % k + k) % k; // position in the chain
  auto member_at    = [&](const std::vector<int>& c, int position) {
    const int size = static_cast<int>(c.size());
    return c[static_cast<size_t>((position + rotate) % size)];
  };
  const TreeLinks t = dtree_of(g.nodes(), node, lane % 2);
  if (at > 0)
    out.parent = member_at(chain, at - 1);
  else if (t.parent >= 0)
    out.parent = member_at(g.node_members[static_cast<size_t>(t.parent)], 0);
  if (at + 1 < k)
    out.children[out.child_count++] = member_at(chain, at + 1);
  if (at == 0)
    for (int c : t.children)
      if (c >= 0)
        out.children[out.child_count++] = member_at(g.node_members[static_cast<size_t>(c)], 0);
  return out;
}

// The chunks a lane's share is cut into, as NCCL sizes the tree's (src/enqueue.cc, v2.20, tree
// with Simple): from the 512 KiB slot, halve the chunk while a channel would get fewer than
// 8 x depth chunks (not below 128 KiB), 4 x depth (not below 64 KiB), depth (not below 32 KiB),
// so that a deep tree fills its pipeline with small chunks. depth: the longest chain inside a node
// plus the height of the binary tree over the nodes. LL and LL128 forward data at least as finely
// (flagged lines), so every protocol takes these chunks. At most 64 chunks (pipeline_chunks' cap).
int tree_chunks(const GroupShape& g, double lane_bytes)
{
  if (!(lane_bytes > 0))
    return 1;
  // Asked for every member's every step: the last answer is kept, by the figures it depends on.
  thread_local std::tuple<int, int, double, int> last{-1, -1, 0.0, 0};
  if (g.per_node > 0 && std::get<0>(last) == g.per_node && std::get<1>(last) == g.nodes() &&
      std::get<2>(last) == lane_bytes)
    return std::get<3>(last);
  // The longest chain is per_node when nodes are alike.
  int chain = std::max(1, g.per_node);
  if (g.per_node == 0)
    for (const auto& members : g.node_members)
      chain = std::max(chain, static_cast<int>(members.size()));
  int height = 0;
  while ((1 << height) < g.nodes())
    ++height;
  const double depth = chain + height;
  double chunk       = 512.0 * 1024;
  while (lane_bytes / chunk < depth * 8 && chunk > 131072)
    chunk /= 2;
  while (lane_bytes / chunk < depth * 4 && chunk > 65536)
    chunk /= 2;
  while (lane_bytes / chunk < depth && chunk > 32768)
    chunk /= 2;
  const int chunks = static_cast<int>(std::clamp(std::ceil(lane_bytes / chunk), 1.0, 64.0));
  if (g.per_node > 0)
    last = {g.per_node, g.nodes(), lane_bytes, chunks};
  return chunks;
}

void check(CollectiveOp op)
{
  if (op != CollectiveOp::AllReduce && op != CollectiveOp::Broadcast && op != CollectiveOp::Reduce)
    throw std::invalid_argument(std::string("the tree algorithm does not implement ") + collective_name(op) +
                                " (all_reduce, broadcast and reduce only, as in NCCL)");
}

// All-reduce: two trees, times the rotations that spread the trees over every member's NIC (one
// per member of a node when the group spans nodes with several on each, or simulation.nccl_channels).
int tree_lanes(CollectiveOp op, const GroupShape& g, double)
{
  if (op != CollectiveOp::AllReduce)
    return 1;
  if (g.channels > 0)
    return std::max(2, g.channels - g.channels % 2);
  return g.nodes() > 1 && g.per_node > 1 ? 2 * g.per_node : 2;
}

// Lane l is lane l % 2 with every node's chain rotated by l / 2 (member_links), once for every
// rotation when there is a lane per tree and member of a node.
int tree_rotated_lanes(CollectiveOp op, const GroupShape& g, double bytes)
{
  return op == CollectiveOp::AllReduce && g.per_node > 1 && tree_lanes(op, g, bytes) == 2 * g.per_node ? 2 : 0;
}

// Over the rotations a member takes every place of its node's chain.
int tree_chain_places(CollectiveOp op, const GroupShape& g, double bytes)
{
  return tree_rotated_lanes(op, g, bytes) > 0 ? g.per_node : 0;
}

int tree_steps(CollectiveOp op, const GroupShape& g, double bytes)
{
  check(op);
  if (g.n <= 1)
    return 0;
  const int phase = tree_chunks(g, bytes / tree_lanes(op, g, bytes)) + 1;
  return op == CollectiveOp::AllReduce ? 2 * phase : phase;
}

CollectiveStep tree_step(CollectiveOp op, const GroupShape& g, double bytes, int lane, int member, int step)
{
  const int chunks = tree_chunks(g, bytes / tree_lanes(op, g, bytes));
  const MemberLinks t = member_links(g, lane, member);
  CollectiveStep s;
  s.bytes = bytes / tree_lanes(op, g, bytes) / chunks;
  const bool up = op == CollectiveOp::Reduce || (op == CollectiveOp::AllReduce && step <= chunks);
  const int k   = op == CollectiveOp::AllReduce && !up ? step - (chunks + 1) : step;
  if (up) {
    if (k < chunks)
      for (int c = 0; c < t.child_count; ++c)
        s.recv(t.children[c]);
    if (k >= 1 && t.parent >= 0)
      s.send(t.parent);
  } else {
    if (k < chunks && t.parent >= 0)
      s.recv(t.parent);
    if (k >= 1)
      for (int c = 0; c < t.child_count; ++c)
        s.send(t.children[c]);
  }
  return s;
}

const bool registered = CollectiveRegistry::add(
    "tree",
    "NCCL's double binary tree over nodes (chains inside nodes), pipelined in chunks: all-reduce on two trees of S/2; "
    "broadcast and reduce on one",
    CollectiveAlgorithm{.name = "tree", .lanes = tree_lanes, .steps = tree_steps, .step = tree_step, .pick = {},
                        .nccl = NcclAlgorithm::Tree, .rotated_lanes = tree_rotated_lanes,
                        .chain_places = tree_chain_places, .pipeline_slots = kNcclSteps});

} // namespace
} // namespace stepsim
