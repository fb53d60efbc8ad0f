// A collective with one simulated member: it stands for its group, so it keeps the pace of the
// group's slowest hop, and a ring's lanes move as one transfer each (coalescing).
#include "sim/engine/collectives.hpp"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

namespace stepsim::engine {

// A lone simulated member whose steps on each lane all send to one peer (a ring) moves each
// lane's data as one transfer of all its steps' bytes, then waits the latencies of the other
// steps: the same bytes share the same links with the same other flows, in lanes + 1
// activities instead of lanes · 2(n-1). (With no other member simulated, nothing waits for
// its individual steps.)
bool Collectives::coalesce(int id)
{
  Instance& inst = instances_[static_cast<size_t>(id)];
  int m          = 0;
  while (inst.members[static_cast<size_t>(m)].task.rank_index < 0)
    ++m;
  const auto& lanes = parts_.timing.ring_lanes(inst.group, inst.op, inst.bytes, m);
  if (!lanes)
    return false;
  const Group& g = w_.groups[static_cast<size_t>(inst.group)];
  inst.tail_s    = 0;
  // A ring's steps after its first do not wait for a NIC's transport latency (PathCost::transport_s;
  // its further crossings are in the launch latency).
  const bool transport_once = inst.algorithm->nccl == NcclAlgorithm::Ring;
  for (const auto& lane : *lanes) {
    const Hop& h         = lane.slowest;
    const double latency = parts_.timing.latency(h.src, h.dst) -
                           (transport_once ? parts_.timing.transport_latency(h.src, h.dst) : 0.0);
    inst.tail_s = std::max(inst.tail_s, (inst.steps - 1) * std::max(0.0, latency));
  }
  inst.coalesced_left = static_cast<int>(lanes->size());
  const bool shadows  = shadowed(inst);
  const int src       = g.ranks[static_cast<size_t>(m)];
  for (size_t lane = 0; lane < lanes->size(); ++lane) {
    // With its peers' flows beside it, the member moves on its own hop; the slowest is among theirs.
    const auto& l = (*lanes)[lane];
    const Hop hop = shadows ? Hop{src, g.ranks[static_cast<size_t>(l.peer)]} : l.slowest;
    parts_.activities.transfer(hop.src, hop.dst, l.bytes, CoalescedTransfer{id});
    if (shadows)
      inst.coalesced_left += shadow_lane(id, m, static_cast<int>(lane), l.bytes);
  }
  return true;
}

// Every member of a ring sends as much on each lane (the lone member's lane bytes), to its
// successor of step 0.
int Collectives::shadow_lane(int id, int m, int lane, double bytes)
{
  const Instance& inst = instances_[static_cast<size_t>(id)];
  const Group& g       = w_.groups[static_cast<size_t>(inst.group)];
  int started          = 0;
  const auto send_all  = [&](const std::vector<int>& ranks, bool own_group) {
    for (int other = 0; other < static_cast<int>(ranks.size()); ++other) {
      if (own_group && other == m)
        continue;
      const CollectiveStep step = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane, other, 0);
      if (step.sends != 1)
        continue;
      parts_.activities.transfer(ranks[static_cast<size_t>(other)], ranks[static_cast<size_t>(step.send_to[0])], bytes,
                                 CoalescedTransfer{id});
      ++started;
    }
  };
  for_group_and_copies(g, send_all);
  shadow_flows_ += started;
  return started;
}

void Collectives::coalesced_transfer_done(int id)
{
  Instance& inst = instances_[static_cast<size_t>(id)];
  if (--inst.coalesced_left > 0)
    return;
  if (inst.tail_s <= 0) {
    delay_done(id);
    return;
  }
  parts_.activities.delay(inst.tail_s, CollectiveDelay{id});
}

} // namespace stepsim::engine
