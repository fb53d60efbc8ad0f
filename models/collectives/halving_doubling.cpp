// Recursive halving-doubling (Rabenseifner; MPICH's all-reduce for long messages) for a
// power-of-two number of members n = 2^L. Reduce-scatter by recursive halving: in step k a member
// exchanges with member XOR 2^k and sends the half of its current range that the partner keeps,
// S/2, S/4, ..., S/n. All-gather by recursive doubling, the mirror image: in step j it exchanges
// with member XOR 2^(L-1-j) and sends all it holds, S/n, 2S/n, ..., S/2, so that the big
// transfers go to the nearest partners in both halves. An all-reduce is both: 2L steps, and on an
// idle non-blocking fabric 2L·α + 2(n-1)/n·S/B, the ring's bandwidth term with log2 n latencies
// instead of 2(n-1).
#include "models/collectives/collective.hpp"

#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

int log2_members(CollectiveOp op, int n)
{
  if (n < 1 || (n & (n - 1)) != 0)
    throw std::invalid_argument("the halving_doubling algorithm needs a power-of-two number of members, got " +
                                std::to_string(n) + " (use ring or direct)");
  int levels = 0;
  while ((1 << levels) < n)
    ++levels;
  switch (op) {
  case CollectiveOp::AllReduce:
  case CollectiveOp::AllGather:
  case CollectiveOp::ReduceScatter: return levels;
  case CollectiveOp::AllToAll:
  case CollectiveOp::Broadcast:
  case CollectiveOp::Reduce: break;
  }
  // Bruck's all-to-all and binomial trees are different algorithms, not this one.
  throw std::invalid_argument(std::string("the halving_doubling algorithm does not implement ") + collective_name(op));
}

int halving_doubling_steps(CollectiveOp op, const GroupShape& g, double)
{
  const int levels = log2_members(op, g.n);
  return op == CollectiveOp::AllReduce ? 2 * levels : levels;
}

CollectiveStep halving_doubling_step(CollectiveOp op, const GroupShape& g, double bytes, int, int member, int step)
{
  const int n      = g.n;
  const int levels = log2_members(op, n);
  CollectiveStep s;
  int distance = 0;
  if (op == CollectiveOp::ReduceScatter || (op == CollectiveOp::AllReduce && step < levels)) {
    distance = 1 << step; // halving: S/2 to the nearest partner first
    s.bytes  = bytes / (2.0 * distance);
  } else {
    const int j = op == CollectiveOp::AllReduce ? step - levels : step;
    distance    = 1 << (levels - 1 - j); // doubling: S/n to the farthest partner first
    s.bytes     = bytes / n * (1 << j);
  }
  s.send(member ^ distance);
  s.recv(member ^ distance);
  return s;
}

const bool registered = CollectiveRegistry::add(
    "halving_doubling",
    "recursive halving (reduce-scatter) and doubling (all-gather), power-of-two groups: 2·log2(n) steps per all-reduce",
    CollectiveAlgorithm{"halving_doubling", {}, halving_doubling_steps, halving_doubling_step, {}});

} // namespace
} // namespace stepsim
