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
#include "models/collectives/collective.hpp"

#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

// The peers at once, one lane each (see the header). Inside one node: across nodes most of the
// bytes cross the NICs, which the rotation shares as it does on switch nodes, and n-1 lanes of n
// flows each at once would grow with the square of the group.
bool side_by_side(const GroupShape& g) { return g.full_mesh && g.n > 1 && g.nodes() == 1; }

int direct_lanes(CollectiveOp, const GroupShape& g, double) { return side_by_side(g) ? g.n - 1 : 1; }

int direct_steps(CollectiveOp op, const GroupShape& g, double)
{
  const int n = g.n;
  const int k = side_by_side(g) ? 1 : n - 1; // steps of a reduce-scatter, all-gather or all-to-all
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
  // The all-reduce's all-gather half repeats the rotation of its reduce-scatter half. Side by
  // side, the lane is the peer's offset.
  const int k = side_by_side(g) ? lane : op == CollectiveOp::AllReduce && n > 1 ? step % (n - 1) : step;
  CollectiveStep s;
  s.bytes     = bytes / n;
  s.send((member + k + 1) % n);
  s.recv(((member - k - 1) % n + n) % n);
  return s;
}

const bool registered = CollectiveRegistry::add(
    "direct",
    "each member sends its S/n chunk straight to every peer, one peer per step (n-1 steps; all-reduce 2(n-1)); in a "
    "full-mesh node to every peer at once",
    CollectiveAlgorithm{"direct", direct_lanes, direct_steps, direct_step, {}});

} // namespace
} // namespace stepsim
