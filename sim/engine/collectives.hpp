// Collectives, expanded step by step into transfers by the collective algorithm, or timed by
// their closed form where no other traffic can share their links (collective_timing.hpp).
//
// Each member runs the algorithm's lanes side by side; on a lane, step k starts when the
// member's sends of step k-1 have finished and the receives it lists up to step k-1 have
// arrived (messages between two members are matched in order, models/collectives/collective.hpp).
// A group member that is not simulated (reduced fidelity) is taken to behave like the simulated
// ones: its sends are not replayed, and a simulated member does not wait for data from it beyond
// its own pace; a lone simulated member's transfers run on the slowest hop of each step over all
// members (the pace the group's ring or exchange keeps). Where the group's peers would take
// bandwidth from it (shadows.hpp), the lone member's transfers run on its own hops and its peers'
// run beside them as shadows; its step ends when all have arrived.
#pragma once

#include "sim/engine/accounting.hpp"
#include "sim/engine/activities.hpp"
#include "sim/engine/collective_timing.hpp"
#include "sim/engine/parts.hpp"
#include "sim/engine/scheduler.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace stepsim::engine {

// Which algorithm runs each collective type ("auto" and per-type choices pick per group and
// size), for the report: the names in order, joined by "+" when a type used several.
std::map<std::string, std::string> collective_algorithms(CollectiveTiming& timing,
                                                         const CollectiveAlgorithm& algorithm);

class Collectives {
public:
  // The concrete algorithm of each collective comes from the timing's plan (CollectiveTiming::plan).
  Collectives(const Workload& w, const Parts& parts) : w_(w), parts_(parts), seq_offset_(w.groups.size() + 1, 0)
  {
    for (size_t g = 0; g < w.groups.size(); ++g)
      seq_offset_[g + 1] = seq_offset_[g] + w.groups[g].ranks.size();
    seq_.assign(seq_offset_.back(), 0);
  }

  // A member's collective task is ready; the collective starts when every simulated member has
  // posted it.
  void post(const TaskRef& t);
  // After NCCL's launch cost: the members' first steps.
  void start_steps(int id);
  void send_done(const CollectiveSend& send);
  // A peer's send beside a simulated member's step has arrived (shadows.hpp).
  void shadow_done(const CollectiveShadow& shadow);
  long long shadow_flows() const { return shadow_flows_; }
  // A collective timed as a whole (or a coalesced one's tail) has ended: every member ends.
  void delay_done(int id);
  void coalesced_transfer_done(int id);

private:
  struct Inbox {
    int from = 0, arrived = 0, consumed = 0;
  };
  struct Lane {
    int step   = 0; // the next step to start
    int oldest = 0; // the oldest step whose sends are still moving (== step when none is)
    // Per step on the wire, at its index modulo the algorithm's pipeline slots: its sends (and
    // the shadows it waits for) still moving. A lane has at most pipeline_slots steps on the wire.
    std::array<int16_t, kNcclSteps> in_flight{};
    std::vector<Inbox> inboxes; // per peer it receives from (few: ring 1, tree up to 4)
  };
  struct Member {
    TaskRef task{-1, 0};
    std::vector<Lane> lanes;
    int lanes_done = 0;
    bool done = false;
    double posted_s = 0; // when this member posted the collective
  };
  struct Instance {
    int group = 0;
    CollectiveOp op = CollectiveOp::AllReduce;
    double bytes = 0;
    const CollectiveAlgorithm* algorithm = nullptr; // the concrete one
    const GroupShape* shape = nullptr;
    int steps = 0, lanes = 1, posted = 0, simulated = 0, finished = 0;
    int slots = 1; // steps a lane may have on the wire at once (algorithm->pipeline_slots)
    int coalesced_left = 0; // transfers of a coalesced collective still moving
    double tail_s = 0;      // latency still to wait after a coalesced transfer
    // Every member simulated and the lanes rotations of the first few: those alone, each send
    // on its representative pair (CollectiveTiming::rotation). Null otherwise.
    const CollectiveTiming::Rotation* rotation = nullptr;
    std::vector<int> node_done; // with a rotation: per node, its members that have run their lanes
    std::vector<Member> members; // by position in the group
  };
  using Hop = CollectiveTiming::Hop;

  // A lone simulated member (lone_member.cpp).
  bool coalesce(int id);
  // The peers' sends of step k on a lane beside a simulated member's own (shadows.hpp): its
  // images' in the group's copies and, for the first simulated member, those of the members
  // that are not simulated and of their images. The member's next step waits for those it
  // receives, as at full fidelity (returns how many); the others only load their links.
  int shadow_step(int id, int m, int lane, int k);
  // The same for a coalesced ring: each peer's lane as one transfer to its ring successor.
  int shadow_lane(int id, int m, int lane, double bytes);
  bool shadowed(const Instance& inst) const;
  // Calls f(ranks, own_group) on the group's members, then on each of its copies (shadows.hpp).
  template <class F> static void for_group_and_copies(const Group& g, F f)
  {
    f(g.ranks, true);
    for (const auto& copy : g.copies)
      f(copy, false);
  }

  int allocate_instance();
  bool simulated_member(const Instance& inst, int m) const
  {
    return m >= 0 && inst.members[static_cast<size_t>(m)].task.rank_index >= 0;
  }
  static Inbox& inbox(Lane& lane, int from);
  bool take_receives(Instance& inst, int m, Lane& lane, int lane_index, int k);
  void advance(int id, int m, int lane_index);
  static void retire(Lane& lane, int slots);
  void arrived(int id, int from, int to, int lane_index);

  const Workload& w_;
  Parts parts_;
  // Per group and member, the collectives of the group the member has posted (a member's count at
  // seq_offset_[group] + its position): a group's members post one after the other, so their
  // counters share a cache line.
  std::vector<size_t> seq_offset_;
  std::vector<int> seq_;
  std::vector<Instance> instances_;
  std::vector<int> free_instances_;
  std::unordered_map<long long, int> instance_ids_;
  long long shadow_flows_ = 0;
};

} // namespace stepsim::engine
