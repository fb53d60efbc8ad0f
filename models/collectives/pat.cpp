// PAT, NCCL's Parallel Aggregated Trees (NCCL 2.23 and later), for all-gather and reduce-scatter
// with one member per node: a Bruck-style exchange in ceil(log2 n) steps for any n. All-gather:
// in step k a member sends what it holds, min(2^k, n - 2^k) of the n blocks of S/n, to the member
// 2^k below it and receives as much from the member 2^k above. Reduce-scatter is its mirror image:
// the steps in reverse order, each sending partial sums to the member 2^k above. Every member
// moves the ring's (n-1)/n·S in log2 n latencies instead of n-1.
//
// As NCCL runs it (src/graph/tuning.cc, v2.23 onwards): only all-gather and reduce-scatter, only
// the Simple protocol, only where every rank is on a node of its own (ncclPatEnable: nNodes ==
// nRanks). NCCL's tuner (ncclTopoTuneModel) takes .75 of the ring's bus bandwidth for PAT and
// times its latency as 8 us + log2(nNodes) · interLat / 3.5 + nRanks · 2.8 us ("still a linear
// part"). `auto` here does not consider PAT: it runs where a scenario names it
// (simulation.collective_algorithm, per type) or with `stepsim collective --algorithm pat`, its
// steps timed on the links, with the base latency of an algorithm NCCL does not name.
#include "models/collectives/collective.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace stepsim {
namespace {

int pat_levels(CollectiveOp op, const GroupShape& g)
{
  if (op != CollectiveOp::AllGather && op != CollectiveOp::ReduceScatter)
    throw std::invalid_argument(std::string("the pat algorithm runs all-gather and reduce-scatter only, as in NCCL, not ") +
                                collective_name(op));
  if (g.per_node > 1)
    throw std::invalid_argument("the pat algorithm needs one member per node, as NCCL enables it (nNodes == nRanks); "
                                "this group has " + std::to_string(g.per_node) + " on a node (use ring)");
  int levels = 0;
  while ((1 << levels) < g.n)
    ++levels;
  return levels;
}

int pat_steps(CollectiveOp op, const GroupShape& g, double) { return pat_levels(op, g); }

CollectiveStep pat_step(CollectiveOp op, const GroupShape& g, double bytes, int, int member, int step)
{
  const int n      = g.n;
  const int levels = pat_levels(op, g);
  // All-gather doubles what it forwards; reduce-scatter runs the same exchanges backwards.
  const int distance = 1 << (op == CollectiveOp::AllGather ? step : levels - 1 - step);
  CollectiveStep s;
  s.bytes = std::min(distance, n - distance) * bytes / n;
  if (op == CollectiveOp::AllGather) {
    s.send((member - distance + n) % n);
    s.recv((member + distance) % n);
  } else {
    s.send((member + distance) % n);
    s.recv((member - distance + n) % n);
  }
  return s;
}

const bool registered = CollectiveRegistry::add(
    "pat",
    "NCCL's PAT (2.23+): all-gather and reduce-scatter in ceil(log2 n) Bruck steps, one member per node, Simple protocol",
    CollectiveAlgorithm{.name                 = "pat",
                        .lanes                = {},
                        .steps                = pat_steps,
                        .step                 = pat_step,
                        .pick                 = {},
                        .nccl                 = NcclAlgorithm::Other,
                        .simple_protocol_only = true});

} // namespace
} // namespace stepsim
