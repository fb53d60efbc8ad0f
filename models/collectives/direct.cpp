// Direct collectives: every member sends its chunk (S/n) straight to every peer, one peer per
// step. In step k member m sends to m+k+1 and receives from m-k-1 (mod n), so each step is a
// permutation: no member receives from two peers at once and, on a non-blocking fabric, no two
// flows share a link. All-gather, reduce-scatter and all-to-all take n-1 steps of S/n; an
// all-reduce is a reduce-scatter then an all-gather, 2(n-1) steps. On an idle fabric an
// all-gather costs (n-1)·(α + S/(nB)), the ring's cost, but with one hop instead of n-1 for any
// one chunk; on a fabric where distance costs (several leaves) the rotation spreads the load.
#include "models/collectives/collective.hpp"

#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

int direct_steps(CollectiveOp op, const GroupShape& g, double)
{
  const int n = g.n;
  switch (op) {
  case CollectiveOp::AllReduce: return n <= 1 ? 0 : 2 * (n - 1);
  case CollectiveOp::AllGather:
  case CollectiveOp::ReduceScatter:
  case CollectiveOp::AllToAll: return n <= 1 ? 0 : n - 1;
  case CollectiveOp::Broadcast:
  case CollectiveOp::Reduce: break;
  }
  // A rooted collective is not a rotation: its steps are not permutations of the members.
  throw std::invalid_argument(std::string("the direct algorithm does not implement ") + collective_name(op));
}

CollectiveStep direct_step(CollectiveOp op, const GroupShape& g, double bytes, int, int member, int step)
{
  const int n = g.n;
  // The all-reduce's all-gather half repeats the rotation of its reduce-scatter half.
  const int k = op == CollectiveOp::AllReduce && n > 1 ? step % (n - 1) : step;
  CollectiveStep s;
  s.bytes     = bytes / n;
  s.send((member + k + 1) % n);
  s.recv(((member - k - 1) % n + n) % n);
  return s;
}

const bool registered = CollectiveRegistry::add(
    "direct", "each member sends its S/n chunk straight to every peer, one peer per step (n-1 steps; all-reduce 2(n-1))",
    CollectiveAlgorithm{"direct", {}, direct_steps, direct_step, {}});

} // namespace
} // namespace stepsim
