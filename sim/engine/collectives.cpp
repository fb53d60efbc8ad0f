#include "sim/engine/collectives.hpp"

#include "sim/engine/shadows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

namespace stepsim::engine {

std::map<std::string, std::string> collective_algorithms(CollectiveTiming& timing,
                                                         const CollectiveAlgorithm& algorithm)
{
  std::map<std::string, std::string> algorithms;
  std::map<std::string, std::set<std::string>> used;
  for (const CollectiveKind& t : timing.kinds()) {
    const GroupShape& g = timing.shape(t.group);
    if (g.n > 1)
      used[collective_name(t.op)].insert(concrete_algorithm(algorithm, t.op, g, t.bytes).name);
  }
  for (const auto& [op, names] : used) {
    std::string joined;
    for (const auto& name : names)
      joined += (joined.empty() ? "" : "+") + name;
    algorithms[op] = joined;
  }
  return algorithms;
}

void Collectives::post(const TaskRef& t)
{
  const Task& task = parts_.scheduler.task_of(t);
  const Group& g   = w_.groups[static_cast<size_t>(task.group)];
  const int me     = w_.ranks[t.rank_index].rank;
  size_t mine      = 0;
  while (mine < g.ranks.size() && g.ranks[mine] != me)
    ++mine;
  if (mine == g.ranks.size()) // find_graph_problems refuses such a graph before the replay
    throw std::logic_error(fmt::format("rank {} posts a collective of group {}, which it is not a member of", me, g.name));
  int seq          = seq_[seq_offset_[static_cast<size_t>(task.group)] + mine]++;
  long long key    = static_cast<long long>(task.group) * (1LL << 32) + seq;
  auto [it, fresh] = instance_ids_.try_emplace(key, 0);
  if (fresh) {
    it->second = allocate_instance();
    Instance& inst = instances_[static_cast<size_t>(it->second)];
    inst.group     = task.group;
    inst.op        = task.op;
    inst.bytes     = task.bytes;
    const auto& plan = parts_.timing.plan(task.group, task.op, task.bytes);
    inst.shape       = plan.shape;
    inst.algorithm   = plan.algorithm;
    inst.steps       = plan.steps;
    inst.lanes       = plan.lanes;
    inst.slots       = std::clamp(plan.slots, 1, kNcclSteps);
    inst.members.assign(g.ranks.size(), Member{});
    inst.simulated = parts_.simulated.in_group[static_cast<size_t>(task.group)];
  }
  int id         = it->second;
  Instance& inst = instances_[static_cast<size_t>(id)];
  for (size_t m = 0; m < g.ranks.size(); ++m)
    if (g.ranks[m] == me) {
      inst.members[m].task     = t;
      inst.members[m].posted_s = now();
    }
  if (++inst.posted < inst.simulated)
    return; // a collective starts when every simulated member has posted it
  instance_ids_.erase(it);
  for (size_t m = 0; m < inst.members.size(); ++m) // the last to post kept the others waiting
    if (inst.members[m].task.rank_index >= 0 && g.ranks[m] != me)
      parts_.accounting.waited(g.ranks[m], me, inst.group, now() - inst.members[m].posted_s);
  for (size_t m = 0; m < inst.members.size(); ++m)
    if (inst.members[m].task.rank_index >= 0)
      parts_.scheduler.begin(inst.members[m].task);
  if (inst.bytes <= 0 || inst.steps == 0) {
    delay_done(id);
    return;
  }
  if (parts_.timing.analytic(inst.group, inst.op)) {
    double seconds = parts_.timing.seconds(inst.group, inst.op, inst.bytes);
    if (seconds <= 0) {
      delay_done(id);
      return;
    }
    for (size_t m = 0; m < inst.members.size(); ++m)
      if (inst.members[m].task.rank_index >= 0)
        parts_.accounting.carried_by_collective(inst.group, inst.op, inst.bytes, static_cast<int>(m), now(), now() + seconds);
    parts_.activities.delay(seconds, CollectiveDelay{id});
    return;
  }
  if (const double launch_s = parts_.timing.launch_latency(inst.group, inst.op, inst.bytes); launch_s > 0 && inst.steps > 0) {
    // NCCL's launch cost (and its protocol's step latencies beyond the links'), then the steps
    parts_.activities.delay(launch_s, CollectiveLaunch{id});
    return;
  }
  start_steps(id);
}

void Collectives::start_steps(int id)
{
  Instance& inst = instances_[static_cast<size_t>(id)];
  if (inst.simulated == 1 && coalesce(id))
    return;
  // Every member simulated, no peer's flows beside them and no link's traffic to record (which
  // the representative pairs would misplace): rotated lanes run as their first ones.
  if (inst.simulated == static_cast<int>(inst.members.size()) && !shadowed(inst) &&
      !parts_.accounting.records_links())
    if ((inst.rotation = parts_.timing.rotation(inst.group, inst.op, inst.bytes)) != nullptr) {
      inst.lanes = inst.rotation->lanes;
      inst.node_done.assign(inst.shape->node_members.size(), 0);
    }
  // The lanes only now: a collective timed by its closed form or coalesced never needs them
  // (allocated for every collective, they kept a full-fidelity replay in malloc and free).
  for (auto& member : inst.members)
    if (member.task.rank_index >= 0)
      member.lanes.assign(static_cast<size_t>(inst.lanes), Lane{});
  for (size_t m = 0; m < inst.members.size(); ++m)
    if (inst.members[m].task.rank_index >= 0)
      for (int lane = 0; lane < inst.lanes; ++lane)
        advance(id, static_cast<int>(m), lane);
}

int Collectives::allocate_instance()
{
  if (!free_instances_.empty()) {
    int id = free_instances_.back();
    free_instances_.pop_back();
    instances_[static_cast<size_t>(id)] = Instance{};
    return id;
  }
  instances_.emplace_back();
  return static_cast<int>(instances_.size() - 1);
}

Collectives::Inbox& Collectives::inbox(Lane& lane, int from)
{
  for (auto& box : lane.inboxes)
    if (box.from == from)
      return box;
  lane.inboxes.push_back(Inbox{from, 0, 0});
  return lane.inboxes.back();
}

// True when every receive of the member's step k-1 from a simulated member has arrived; then
// takes them. (A member that is not simulated behaves like this one: it is not waited for.)
bool Collectives::take_receives(Instance& inst, int m, Lane& lane, int lane_index, int k)
{
  if (k == 0)
    return true;
  const CollectiveStep prev = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane_index, m, k - 1);
  for (int r = 0; r < prev.recvs; ++r) {
    const int from = prev.recv_from[static_cast<size_t>(r)];
    if (!simulated_member(inst, from))
      continue;
    int same = 0;
    for (int q = 0; q < r; ++q)
      same += prev.recv_from[static_cast<size_t>(q)] == from ? 1 : 0;
    const Inbox& box = inbox(lane, from);
    if (box.arrived <= box.consumed + same)
      return false;
  }
  for (int r = 0; r < prev.recvs; ++r)
    if (simulated_member(inst, prev.recv_from[static_cast<size_t>(r)]))
      ++inbox(lane, prev.recv_from[static_cast<size_t>(r)]).consumed;
  return true;
}

// Starts the member's next steps on a lane while it may (the lane has fewer steps on the wire
// than the algorithm's pipeline slots and the receives each needs have arrived), or finishes the
// lane (and the member) once its last step's sends have arrived.
void Collectives::advance(int id, int m, int lane_index)
{
  Instance& inst = instances_[static_cast<size_t>(id)];
  Member& me     = inst.members[static_cast<size_t>(m)];
  Lane& lane     = me.lanes[static_cast<size_t>(lane_index)];
  if (me.done || lane.step > inst.steps)
    return;
  const Group& g = w_.groups[static_cast<size_t>(inst.group)];
  while (true) {
    const int k = lane.step;
    if (k - lane.oldest >= inst.slots || (k == inst.steps && lane.oldest < k))
      return; // the window is full, or the last sends are still moving
    if (!take_receives(inst, m, lane, lane_index, k))
      return;
    if (k == inst.steps) {
      lane.step = inst.steps + 1; // finished
      if (++me.lanes_done < inst.lanes)
        return;
      me.done = true;
      if (inst.rotation != nullptr) {
        // Its lane l + d·r is what the member r places before it runs on lane l: it ends when
        // every member of its node has run the d lanes.
        const auto node = static_cast<size_t>(inst.shape->node_of_member[static_cast<size_t>(m)]);
        const auto& of_node = inst.shape->node_members[node];
        if (++inst.node_done[node] < static_cast<int>(of_node.size()))
          return;
        for (int q : of_node)
          parts_.scheduler.complete(inst.members[static_cast<size_t>(q)].task);
        if ((inst.finished += static_cast<int>(of_node.size())) == inst.simulated)
          free_instances_.push_back(id);
        return;
      }
      parts_.scheduler.complete(me.task);
      if (++inst.finished == inst.simulated)
        free_instances_.push_back(id);
      return;
    }
    const CollectiveStep s = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane_index, m, k);
    auto& in_flight        = lane.in_flight[static_cast<size_t>(k % inst.slots)];
    ++lane.step;
    if (s.sends == 0 || s.bytes <= 0) { // delivered at once
      for (int q = 0; q < s.sends; ++q)
        arrived(id, m, s.send_to[static_cast<size_t>(q)], lane_index);
      in_flight = 0;
      retire(lane, inst.slots);
      continue;
    }
    in_flight          = static_cast<int16_t>(s.sends);
    const bool shadows = shadowed(inst);
    // A ring's steps after its first do not wait for a NIC's transport (PathCost::transport_s;
    // its further crossings are in the launch latency).
    const bool owes_transport = !(inst.algorithm->nccl == NcclAlgorithm::Ring && k > 0);
    for (int q = 0; q < s.sends; ++q) {
      const int to = s.send_to[static_cast<size_t>(q)];
      Hop hop{g.ranks[static_cast<size_t>(m)], g.ranks[static_cast<size_t>(to)]};
      if (inst.simulated == 1 && !shadows)
        hop = parts_.timing.step_bottleneck(inst.group, inst.op, inst.bytes, lane_index, k, hop, s.bytes);
      else if (inst.rotation != nullptr)
        hop = parts_.timing.rotated_hop(*inst.rotation, inst.group, m, to);
      parts_.activities.transfer(hop.src, hop.dst, s.bytes, CollectiveSend{id, m, lane_index, to, k}, owes_transport);
    }
    if (shadows)
      in_flight = static_cast<int16_t>(in_flight + shadow_step(id, m, lane_index, k));
  }
}

// Moves the lane's oldest step past the steps whose sends have all arrived.
void Collectives::retire(Lane& lane, int slots)
{
  while (lane.oldest < lane.step && lane.in_flight[static_cast<size_t>(lane.oldest % slots)] == 0)
    ++lane.oldest;
}

void Collectives::delay_done(int id)
{
  Instance& inst = instances_[static_cast<size_t>(id)];
  for (auto& member : inst.members)
    if (member.task.rank_index >= 0)
      parts_.scheduler.complete(member.task);
  free_instances_.push_back(id);
}

void Collectives::arrived(int id, int from, int to, int lane_index)
{
  Instance& inst = instances_[static_cast<size_t>(id)];
  if (!simulated_member(inst, to))
    return;
  ++inbox(inst.members[static_cast<size_t>(to)].lanes[static_cast<size_t>(lane_index)], from).arrived;
}

bool Collectives::shadowed(const Instance& inst) const
{
  return parts_.shadows.group(inst.group);
}

int Collectives::shadow_step(int id, int m, int lane, int k)
{
  const Instance& inst = instances_[static_cast<size_t>(id)];
  const Group& g       = w_.groups[static_cast<size_t>(inst.group)];
  const int me         = g.ranks[static_cast<size_t>(m)];
  int started = 0, waited = 0;
  const bool owes_transport = !(inst.algorithm->nccl == NcclAlgorithm::Ring && k > 0); // as its own sends
  // Member m sends for its images in the copies; the first simulated member also for the members
  // that are not simulated, and for their images.
  int first = 0;
  while (!simulated_member(inst, first))
    ++first;
  const auto send_all = [&](const std::vector<int>& ranks, bool own_group) {
    for (int other = 0; other < static_cast<int>(ranks.size()); ++other) {
      if ((other != m && (m != first || simulated_member(inst, other))) || (own_group && other == m))
        continue;
      const CollectiveStep step = inst.algorithm->step(inst.op, *inst.shape, inst.bytes, lane, other, k);
      if (step.bytes <= 0)
        continue;
      for (int q = 0; q < step.sends; ++q) {
        const int dst = ranks[static_cast<size_t>(step.send_to[static_cast<size_t>(q)])];
        if (dst == me) { // the member's receive: its next step waits for it
          parts_.activities.transfer(ranks[static_cast<size_t>(other)], dst, step.bytes, CollectiveShadow{id, m, lane, k},
                                     owes_transport);
          ++waited;
        } else {
          parts_.activities.transfer(ranks[static_cast<size_t>(other)], dst, step.bytes, LooseShadow{}, owes_transport);
        }
        ++started;
      }
    }
  };
  for_group_and_copies(g, send_all);
  shadow_flows_ += started;
  return waited;
}

void Collectives::shadow_done(const CollectiveShadow& shadow)
{
  Instance& inst = instances_[static_cast<size_t>(shadow.instance)];
  Lane& lane     = inst.members[static_cast<size_t>(shadow.member)].lanes[static_cast<size_t>(shadow.lane)];
  if (--lane.in_flight[static_cast<size_t>(shadow.step % inst.slots)] == 0)
    retire(lane, inst.slots);
  advance(shadow.instance, shadow.member, shadow.lane);
}

void Collectives::send_done(const CollectiveSend& send)
{
  const int id         = send.instance;
  Instance& inst       = instances_[static_cast<size_t>(id)];
  const int lane_index = send.lane;
  const int m          = send.member;
  const int to         = send.to;
  Lane& lane           = inst.members[static_cast<size_t>(m)].lanes[static_cast<size_t>(lane_index)];
  arrived(id, m, to, lane_index);
  if (--lane.in_flight[static_cast<size_t>(send.step % inst.slots)] == 0)
    retire(lane, inst.slots);
  if (simulated_member(inst, to) && to != m)
    advance(id, to, lane_index);
  advance(id, m, lane_index);
}

} // namespace stepsim::engine
