// Direct collectives: every member sends its chunk (S/n) straight to every peer, one peer per
// step. In step k member m sends to m+k+1 and receives from m-k-1 (mod n), so each step is a
// permutation: no member receives from two peers at once and, on a non-blocking fabric, no two
// flows share a link. All-gather, reduce-scatter and all-to-all take n-1 steps of S/n; an
// all-reduce is a reduce-scatter then an all-gather, 2(n-1) steps. On an idle fabric an
// all-gather costs (n-1)·(α + S/(nB)), the ring's cost, but with one hop instead of n-1 for any
// one chunk; on a fabric where distance costs (several leaves) the rotation spreads the load.
//
// Inside one full-mesh node (an AMD Instinct node's xGMI links, GroupShape::full_mesh) the n-1
// sends run side by side instead, one lane each (lane l: to m+l+1), in one step (an all-reduce
// two): NCCL and RCCL post all of an all-to-all's sends and receives in one group (nccl-tests'
// alltoall, PyTorch's all_to_all_single: ncclGroupStart, ncclSend/ncclRecv to every peer,
// ncclGroupEnd) and run them over their channels at once. On a switch that changes nothing but the latency the
// steps pay in turn (every flow crosses the GPU's one link), so the rotation stays there; on a
// mesh each peer has its own link, and one peer at a time would leave six of an MI300X's seven
// idle (45 GB/s of bus bandwidth instead of seven links' worth).
//
// Across nodes (every node holding p members) the peers in the member's own node and those in
// other nodes are two rotations side by side, one lane each: the first over the p-1 peers of the
// node, the second over the (N-1)p peers of the other N-1 nodes, node after node. The two go over
// different links (the node's NVLink or PCIe, the NICs) and NCCL progresses them at once, so the
// collective takes as long as the NICs need for the bytes that leave the node: NCCL's maintainers
// give an all-to-all's bus bandwidth on 2 nodes as twice the network bandwidth per GPU, falling
// to once with many nodes, N/(N-1) times it (https://github.com/NVIDIA/nccl-tests/issues/130).
// One rotation over all n-1 peers would put a peer across the nodes into nearly every step and
// make every step wait for the NIC: the network bandwidth per GPU on 2 nodes, half of that.
#include "models/collectives/collective.hpp"

#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

// The peers at once, one lane each (see the header). Inside one node: across nodes most of the
// bytes cross the NICs, which the rotation shares as it does on switch nodes, and n-1 lanes of n
// flows each at once would grow with the square of the group.
bool side_by_side(const GroupShape& g) { return g.full_mesh && g.n > 1 && g.nodes() == 1; }

// The peers inside the node and those outside it as two lanes (see the header): a group over
// several nodes of the same number of members, more than one each.
bool split_by_node(const GroupShape& g) { return g.nodes() > 1 && g.per_node > 1; }

int direct_lanes(CollectiveOp, const GroupShape& g, double)
{
  return side_by_side(g) ? g.n - 1 : split_by_node(g) ? 2 : 1;
}

// Steps of a reduce-scatter, all-gather or all-to-all: the longest lane's (the peers outside the
// node, where split).
int rotation_steps(const GroupShape& g)
{
  return side_by_side(g) ? 1 : split_by_node(g) ? (g.nodes() - 1) * g.per_node : g.n - 1;
}

int direct_steps(CollectiveOp op, const GroupShape& g, double)
{
  const int n = g.n;
  const int k = rotation_steps(g);
  switch (op) {
  case CollectiveOp::AllReduce: return n <= 1 ? 0 : 2 * k;
  case CollectiveOp::AllGather:
  case CollectiveOp::ReduceScatter:
  case CollectiveOp::AllToAll: return n <= 1 ? 0 : k;
  case CollectiveOp::Broadcast:
  case CollectiveOp::Reduce: break;
  }
  // A rooted collective is not a rotation: its steps are not permutations of the members.
  throw std::invalid_argument(std::string("the direct algorithm does not implement ") + collective_name(op));
}

CollectiveStep direct_step(CollectiveOp op, const GroupShape& g, double bytes, int lane, int member, int step)
{
  const int n = g.n;
  CollectiveStep s;
  s.bytes = bytes / n;
  if (split_by_node(g)) {
    const int p = g.per_node, nodes = g.nodes();
    const int k = op == CollectiveOp::AllReduce ? step % rotation_steps(g) : step;
    const int node = g.node_of_member[static_cast<size_t>(member)];
    const int l    = g.local_rank[static_cast<size_t>(member)];
    auto at        = [&g](int node_index, int local) {
      return g.node_members[static_cast<size_t>(node_index)][static_cast<size_t>(local)];
    };
    if (lane == 0) { // the node's own peers, p - 1 steps; the lane idles after them
      if (k < p - 1) {
        s.send(at(node, (l + 1 + k) % p));
        s.recv(at(node, ((l - 1 - k) % p + p) % p));
      }
      return s;
    }
    // The other nodes' members: node by node (the next node first), each node's from the member
    // one place past the sender's own on (its own place last); a permutation at every step. The
    // first step goes to another place, on a rail-optimized fabric another rail: it stands for
    // all the steps where the group is timed by its closed form (steps_alike, below).
    const int hop = 1 + k / p, shift = (k + 1) % p;
    s.send(at((node + hop) % nodes, (l + shift) % p));
    s.recv(at(((node - hop) % nodes + nodes) % nodes, ((l - shift) % p + p) % p));
    return s;
  }
  // The all-reduce's all-gather half repeats the rotation of its reduce-scatter half. Side by
  // side, the lane is the peer's offset.
  const int k = side_by_side(g) ? lane : op == CollectiveOp::AllReduce && n > 1 ? step % (n - 1) : step;
  s.send((member + k + 1) % n);
  s.recv(((member - k - 1) % n + n) % n);
  return s;
}

// Over more than kWalkedMembers members across nodes every step of a lane is costed as its first
// (CollectiveAlgorithm::steps_alike): each step is a permutation in which every member sends S/n
// through its own NIC (lane 1) or its own NVLink or PCIe link (lane 0), so on a fabric that does
// not tell one node from another every step of a lane costs the same. Walking them all takes
// n (n-1) member-steps: on 1,000 nodes of 8 GPUs an all-to-all table did not end in 300 s and held
// 5 GB. 256, as the collectives that `stepsim collective` times by their closed form over a
// fat-tree or rail fabric (tools/driver/collective_bench.hpp kFlowMembers).
constexpr int kWalkedMembers = 256;

CollectiveAlgorithm make_direct()
{
  CollectiveAlgorithm a{"direct", direct_lanes, direct_steps, direct_step, {}};
  a.point_to_point = true; // NCCL's all-to-all: sends and receives, LL or Simple
  a.steps_alike = [](CollectiveOp op, const GroupShape& g) {
    return op != CollectiveOp::Broadcast && op != CollectiveOp::Reduce && split_by_node(g) && g.n > kWalkedMembers;
  };
  // The node's own rotation (lane 0) runs p-1 steps of each half; the other nodes' all of them.
  a.lane_steps = [](CollectiveOp op, const GroupShape& g, double, int lane) {
    const int halves = op == CollectiveOp::AllReduce ? 2 : 1;
    return lane == 0 && split_by_node(g) ? halves * (g.per_node - 1) : halves * rotation_steps(g);
  };
  return a;
}

const bool registered = CollectiveRegistry::add(
    "direct",
    "each member sends its S/n chunk straight to every peer, one peer per step (n-1 steps; all-reduce 2(n-1)); in a "
    "full-mesh node to every peer at once; across nodes the node's peers and the other nodes' side by side",
    make_direct());

} // namespace
} // namespace stepsim
