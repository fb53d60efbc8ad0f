// Which collectives can be timed by their closed form instead of flow by flow, and how long they
// take.
//
// A collective's flows add nothing to its closed form when no other traffic of the workload can
// share a link with them and its own flows do not share links within a step. Then each step takes
// the path latency plus the step's bytes over the path's bottleneck bandwidth, exactly what the
// flow-level replay gives on an idle path (CM02 without cross traffic), and the collective is the
// sum of its steps. Typical case: tensor-parallel all-reduces inside an NVSwitch node whose links
// carry nothing else. The test is made on the SimGrid routes of the built platform, so it holds
// for any topology.
#pragma once

#include "models/collectives/collective.hpp"
#include "sim/core/task_graph.hpp"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace simgrid::s4u {
class Host;
class Link;
} // namespace simgrid::s4u

namespace stepsim {

class CollectiveTiming {
public:
  // `all_analytic`: time every collective by its closed form, shared links or not (the analytic
  // network fidelity). `base_latency_s`: NCCL's fixed cost per collective, added to seconds().
  CollectiveTiming(const Workload& w, const std::vector<simgrid::s4u::Host*>& hosts,
                   const CollectiveAlgorithm& algorithm, bool all_analytic = false, double base_latency_s = 0);

  // True when collectives `op` of group `group` may be timed by seconds().
  bool analytic(int group, CollectiveOp op) const;
  // True when they may also be timed inside a chain of the rank's compute (sim/engine/compute.hpp),
  // slowed with it by interference: those whose links no other flow of the workload can cross
  // (not those that only the lone member's hops make analytic, lone_members: they stay apart
  // from compute, as their flows would).
  bool analytic_in_chain(int group, CollectiveOp op) const;
  // The group's collectives share links with shadow flows (sim/engine/shadows.hpp): they are
  // replayed as flows, not by their closed form (unless every collective is, all_analytic).
  void contended(int group);
  // Where one simulated member stands for its group (`lone_member[group]`: its position in the
  // group, or -1) and its collective is a ring, the collective's flows run only on the hops that
  // member's lanes are timed on (ring_lanes), not on every member's: the links the other members'
  // hops cross carry none of its flows. Redoes the test of the constructor with those hops as the
  // group's links; a ring whose links then carry no other flow of the replay is timed by its
  // closed form, which is what its lanes alone on those links take. Only for a replay without
  // shadows (whose peers' flows do cross the other hops).
  void lone_members(const std::vector<int>& lone_member);
  // The closed-form duration of one collective on idle paths (uncontended_seconds).
  double seconds(int group, CollectiveOp op, double bytes);
  // NCCL's base latency for a collective of this group; none on a group whose paths have zero
  // latency (an idealised, free network).
  double base_latency(int group)
  {
    const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
    return ranks.size() > 1 && latency(ranks[0], ranks[1]) > 0 ? base_latency_s_ : 0.0;
  }
  // What a collective pays before its steps: for an algorithm run with one of NCCL's protocols
  // its launch_seconds (models/collectives/protocol.hpp), else base_latency().
  double launch_latency(int group, CollectiveOp op, double bytes);
  // Latency of the path between two ranks' GPUs.
  double latency(int src_rank, int dst_rank) { return path(src_rank, dst_rank).latency_s; }
  // The part of it that is a NIC kind's transport (PathCost::transport_s).
  double transport_latency(int src_rank, int dst_rank) { return path(src_rank, dst_rank).transport_s; }
  // Closed form of one transfer between two ranks' GPUs: latency + bytes / bottleneck bandwidth.
  double transfer_seconds(int src_rank, int dst_rank, double bytes)
  {
    const Path& p = path(src_rank, dst_rank);
    return p.latency_s + bytes / p.bandwidth_Bps;
  }
  // The links of the route between two ranks' GPUs.
  const std::vector<const simgrid::s4u::Link*>& links(int src_rank, int dst_rank) { return path(src_rank, dst_rank).links; }
  // The first link of that route (the one leaving the source GPU), or none.
  const simgrid::s4u::Link* first_link(int src_rank, int dst_rank)
  {
    const auto& l = links(src_rank, dst_rank);
    return l.empty() ? nullptr : l.front();
  }
  // The workload's distinct collectives (distinct_collectives), found once here.
  const std::vector<CollectiveKind>& kinds() const { return kinds_; }
  // The group as collective algorithms see it, with the latency and bandwidth of its paths.
  const GroupShape& shape(int group);
  // How a collective of this group and size runs: the concrete algorithm ("auto" and the
  // per-type choices pick per group and size), its steps and its lanes. Found once per group,
  // operation and size (a replay posts the same few hundred thousands of times).
  struct Plan {
    const CollectiveAlgorithm* algorithm = nullptr;
    const GroupShape* shape              = nullptr;
    int steps = 0, lanes = 1;
    int slots = 1; // steps a lane may have on the wire at once (flow_slots)
  };
  const Plan& plan(int group, CollectiveOp op, double bytes);
  // Latency and bottleneck bandwidth between two members of a group.
  PathCost member_path(int group, int member_a, int member_b);

  // A transfer between two ranks' GPUs (global ranks).
  struct Hop {
    int src = -1, dst = -1;
  };
  // A lone member's lane of a ring: every step sends to one peer, so the lane moves as one
  // transfer of all its steps' bytes (collectives.hpp, coalescing), timed on the group's slowest
  // hop of the lane (each member sends as much at the same time, and each step forwards what
  // the step before delivered). Ties keep the member's own hop.
  struct RingLane {
    int peer = -1; // the member's own successor (position in the group)
    double bytes = 0;
    Hop slowest;
  };
  // The lanes of member `member` when its collective is a ring on every lane, or none.
  const std::optional<std::vector<RingLane>>& ring_lanes(int group, CollectiveOp op, double bytes, int member);
  // The hop a lone member's send of step k on a lane is timed on: the slowest of the step's sends
  // over every member; ties keep its own.
  Hop step_bottleneck(int group, CollectiveOp op, double bytes, int lane, int k, Hop own, double step_bytes);

  // Rotated lanes run as their first d. Where a collective's lanes are rotations of its first d
  // inside every node (CollectiveAlgorithm::rotated_lanes: the tree's 2k channels over nodes of k
  // members, lane l + d·r running lane l with every node's members moved r places), a member's
  // lane l + d·r takes exactly what the member r places before it takes on lane l, on a machine
  // that looks alike from every member of a node. Replayed with every member simulated, the
  // collective then needs only lanes 0 to d-1 (a member ends once every member of its node has
  // run them), provided every link carries what all the lanes would put on it: each send of
  // those lanes is timed on a representative pair of GPUs (rotated_hop), the first GPU of the
  // sender's node to the first of the receiver's across nodes, the first to the second inside a
  // node, so that the first GPU's links out carry the sends of its whole node and the receivers'
  // links in all their receives. Checked here on the built routes, send by send: every rotated
  // pair's route is its representative's hop by hop (bandwidth, latency, sharing), and the send's
  // k rotations cross each link of the representative pairs exactly as often as the
  // representative does. A link they load otherwise (an uplink above whole nodes) passes only
  // where the first links of the flows across it, or their last, cannot together fill it, so
  // that it never binds. Only for a group and operation whose links nothing else of the workload
  // crosses, and where every size of it in the workload folds (several may be on the wire at
  // once). A tree over 16 nodes of 8 H100 ran 64 MiB in 25 s flow by flow (SimGrid 3.32 walks a
  // list of every live transfer each time one ends): 8 times fewer transfers, 8 times fewer
  // live. Null where it does not hold.
  struct Rotation {
    int lanes = 0;                    // d: the lanes replayed
    std::vector<int> first, second;   // per node of the group: the global ranks of its first two members
  };
  const Rotation* rotation(int group, CollectiveOp op, double bytes);
  // The pair of GPUs a send from member `from` to member `to` is timed on under `r`.
  Hop rotated_hop(const Rotation& r, int group, int from, int to);

private:
  // rotation() for one size, whatever the group's other sizes do.
  const Rotation* size_rotation(int group, CollectiveOp op, double bytes);
  std::map<std::tuple<int, CollectiveOp, double>, std::unique_ptr<Rotation>> rotations_;
  std::map<std::pair<int, CollectiveOp>, bool> key_folds_; // every size of the key folds
  // rotation()'s check, on a plan with rotated lanes; false where it does not hold.
  bool rotation_holds(const Plan& p, int group, CollectiveOp op, double bytes, const Rotation& r);
  // The flows of a collective's steps over the fabric's thinned uplinks, every member's on every
  // lane (step 0 alone for a ring, whose steps repeat it), or null where the group crosses none.
  const UplinkLoad* uplink_load(int group, CollectiveOp op, double bytes);
  std::map<std::tuple<int, CollectiveOp, double>, std::unique_ptr<UplinkLoad>> uplink_loads_;
  struct Path {
    double latency_s = 0, bandwidth_Bps = 0, transport_s = 0;
    std::vector<const simgrid::s4u::Link*> links;
  };
  const Path& path(int src_rank, int dst_rank);
  // Links the collective's flows use, or false when two flows of one step share a link.
  bool links_of(int group, CollectiveOp op, double bytes, std::vector<const simgrid::s4u::Link*>& links);

  using Key = std::pair<int, CollectiveOp>;
  // Marks analytic the collectives whose links (`links`) carry no other group's flows and no
  // point-to-point transfer's.
  void find_analytic(const std::map<Key, std::vector<const simgrid::s4u::Link*>>& links);

  const Workload& w_;
  const std::vector<simgrid::s4u::Host*>& hosts_;
  const CollectiveAlgorithm& algorithm_;
  std::vector<CollectiveKind> kinds_;
  std::map<Key, std::set<double>> sizes_;    // an algorithm may depend on the size ("auto")
  std::map<Key, std::vector<const simgrid::s4u::Link*>> links_; // every member's hops
  std::set<Key> shared_in_step_;             // two flows of one step share a link
  std::set<Key> exclusive_;                  // no other collective or transfer crosses their links
  std::vector<const simgrid::s4u::Link*> point_to_point_links_;
  std::map<std::tuple<int, CollectiveOp, double, int>, std::optional<std::vector<RingLane>>> ring_lanes_;
  std::map<std::tuple<int, CollectiveOp, double>, Plan> plans_;
  std::map<std::tuple<int, int, double, int, int, int, int>, Hop> bottlenecks_;
  std::unordered_map<long long, Path> paths_;
  std::map<int, GroupShape> shapes_;
  std::map<std::pair<int, CollectiveOp>, bool> analytic_, in_chain_;
  // The two flags by group and operation, for the lookups of a replay (index_flags()).
  static constexpr int kOps = 6;
  std::vector<char> analytic_at_, in_chain_at_;
  void index_flags();
  struct SizeKey {
    int group;
    CollectiveOp op;
    double bytes;
    bool operator==(const SizeKey&) const = default;
  };
  struct SizeKeyHash {
    size_t operator()(const SizeKey& k) const
    {
      return std::hash<double>()(k.bytes) * 31 + static_cast<size_t>(k.group) * kOps + static_cast<size_t>(k.op);
    }
  };
  std::unordered_map<SizeKey, double, SizeKeyHash> seconds_, launch_;
  double base_latency_s_ = 0;
  bool all_analytic_     = false;
};

} // namespace stepsim
