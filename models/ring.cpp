// Ring collectives (NCCL's ring): the buffer is cut into n chunks that travel around the ring.
// All-reduce = reduce-scatter (n-1 steps) then all-gather (n-1 steps), each step moving S/n per
// member, so an all-reduce costs 2(n-1)/n·S/B + 2(n-1)·latency. All-to-all sends each peer its
// chunk directly, one peer per step. Broadcast and reduce are not implemented here yet.
#include "models/collective.hpp"

#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

int ring_steps(CollectiveOp op, int n)
{
  if (n <= 1)
    return 0;
  switch (op) {
  case CollectiveOp::AllReduce: return 2 * (n - 1);
  case CollectiveOp::AllGather:
  case CollectiveOp::ReduceScatter:
  case CollectiveOp::AllToAll: return n - 1;
  case CollectiveOp::Broadcast:
  case CollectiveOp::Reduce: break;
  }
  // A rooted chain needs per-step receive tracking the engine does not have yet; nothing lowers
  // one today, and a silent zero-cost collective would be a wrong answer.
  throw std::invalid_argument(std::string("the ring algorithm does not implement ") + collective_name(op));
}

CollectiveStep ring_step(CollectiveOp op, int n, int member, int step, double bytes)
{
  CollectiveStep s;
  s.bytes = bytes / n;
  if (op == CollectiveOp::AllToAll) {
    s.send_to   = (member + step + 1) % n;
    s.recv_from = (member - step - 1 + n) % n;
    return s;
  }
  s.send_to   = (member + 1) % n;
  s.recv_from = (member - 1 + n) % n;
  return s;
}

const bool registered = CollectiveRegistry::add("ring", "NCCL's ring: n-1 (or 2(n-1)) steps of S/n to the next member",
                                                CollectiveAlgorithm{ring_steps, ring_step});

} // namespace
} // namespace stepsim
