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
  const Group& g = w_.groups[static_cast<size_t>(inst.group)];
  std::vector<std::pair<int, double>> lanes; // peer, bytes
  for (int lane = 0; lane < inst.lanes; ++lane) {
    int peer     = -1;
    double bytes = 0;
    for (int k = 0; k < inst.steps; ++k) {
      CollectiveStep step = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane, m, k);
      if (step.sends != 1 || (peer >= 0 && step.send_to[0] != peer))
        return false;
      peer = step.send_to[0];
      bytes += step.bytes;
    }
    if (peer < 0 || bytes <= 0)
      return false;
    lanes.emplace_back(peer, bytes);
  }
  if (lanes.empty())
    return false;
  // Every member of the ring sends as much at the same time, and each step forwards what the
  // step before delivered: the ring moves at the pace of its slowest hop. The lone member's
  // lane is timed on that hop (a group over two nodes whose own hop stays inside the node still
  // waits for the NIC hop); ties keep its own hop.
  const int src = g.ranks[static_cast<size_t>(m)];
  std::vector<Hop> hops;
  for (size_t lane = 0; lane < lanes.size(); ++lane) {
    const int peer     = lanes[lane].first;
    const double bytes = lanes[lane].second;
    auto cost          = [&](const Hop& h) {
      return parts_.timing.transfer_seconds(h.src, h.dst, bytes) + (inst.steps - 1) * parts_.timing.latency(h.src, h.dst);
    };
    Hop slowest{src, g.ranks[static_cast<size_t>(peer)]};
    double worst = cost(slowest);
    for (int other = 0; other < static_cast<int>(g.ranks.size()); ++other) {
      const CollectiveStep step = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, static_cast<int>(lane), other, 0);
      if (other == m || step.sends != 1)
        continue;
      const Hop hop{g.ranks[static_cast<size_t>(other)], g.ranks[static_cast<size_t>(step.send_to[0])]};
      if (const double c = cost(hop); c > worst) {
        worst   = c;
        slowest = hop;
      }
    }
    hops.push_back(slowest);
  }
  inst.tail_s = 0;
  for (const Hop& h : hops)
    inst.tail_s = std::max(inst.tail_s, (inst.steps - 1) * parts_.timing.latency(h.src, h.dst));
  inst.coalesced_left = static_cast<int>(lanes.size());
  const bool shadows  = shadowed(inst);
  for (size_t lane = 0; lane < lanes.size(); ++lane) {
    // With its peers' flows beside it, the member moves on its own hop; the slowest is among theirs.
    const Hop hop = shadows ? Hop{src, g.ranks[static_cast<size_t>(lanes[lane].first)]} : hops[lane];
    parts_.activities.transfer(hop.src, hop.dst, lanes[lane].second, CoalescedTransfer{id});
    if (shadows)
      inst.coalesced_left += shadow_lane(id, m, static_cast<int>(lane), lanes[lane].second);
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

// The hop a lone simulated member's send of step k is timed on: the slowest of the step's
// sends over every member (each sends at the same time, and the next step forwards what this
// one delivered), so a member that stands for its group waits for the group's slowest hop, not
// only its own. Ties keep its own hop. Remembered per group, operation, size, lane and step.
Collectives::Hop Collectives::step_bottleneck(const Instance& inst, int lane, int k, Hop own, double bytes)
{
  const auto key = std::make_tuple(inst.group, static_cast<int>(inst.op), inst.bytes, lane, k, own.src, own.dst);
  auto [it, fresh] = bottlenecks_.try_emplace(key, own);
  if (!fresh)
    return it->second;
  const Group& g = w_.groups[static_cast<size_t>(inst.group)];
  double worst   = parts_.timing.transfer_seconds(own.src, own.dst, bytes);
  for (int other = 0; other < static_cast<int>(g.ranks.size()); ++other) {
    const CollectiveStep step = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane, other, k);
    if (step.bytes <= 0)
      continue;
    for (int q = 0; q < step.sends; ++q) {
      const Hop hop{g.ranks[static_cast<size_t>(other)], g.ranks[static_cast<size_t>(step.send_to[static_cast<size_t>(q)])]};
      if (const double c = parts_.timing.transfer_seconds(hop.src, hop.dst, step.bytes); c > worst) {
        worst      = c;
        it->second = hop;
      }
    }
  }
  return it->second;
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
