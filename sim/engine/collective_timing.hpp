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

#include <map>
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
  // The group's collectives share links with shadow flows (sim/engine/shadows.hpp): they are
  // replayed as flows, not by their closed form (unless every collective is, all_analytic).
  void contended(int group);
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
  // Closed form of one transfer between two ranks' GPUs: latency + bytes / bottleneck bandwidth.
  double transfer_seconds(int src_rank, int dst_rank, double bytes)
  {
    const Path& p = path(src_rank, dst_rank);
    return p.latency_s + bytes / p.bandwidth_Bps;
  }
  // The links of the route between two ranks' GPUs.
  const std::vector<const simgrid::s4u::Link*>& links(int src_rank, int dst_rank) { return path(src_rank, dst_rank).links; }
  // The workload's distinct collectives (distinct_collectives), found once here.
  const std::vector<CollectiveKind>& kinds() const { return kinds_; }
  // The group as collective algorithms see it, with the latency and bandwidth of its paths.
  const GroupShape& shape(int group);
  // Latency and bottleneck bandwidth between two members of a group.
  PathCost member_path(int group, int member_a, int member_b);

private:
  struct Path {
    double latency_s = 0, bandwidth_Bps = 0;
    std::vector<const simgrid::s4u::Link*> links;
  };
  const Path& path(int src_rank, int dst_rank);
  // Links the collective's flows use, or false when two flows of one step share a link.
  bool links_of(int group, CollectiveOp op, double bytes, std::vector<const simgrid::s4u::Link*>& links);

  const Workload& w_;
  const std::vector<simgrid::s4u::Host*>& hosts_;
  const CollectiveAlgorithm& algorithm_;
  std::vector<CollectiveKind> kinds_;
  std::unordered_map<long long, Path> paths_;
  std::map<int, GroupShape> shapes_;
  std::map<std::pair<int, CollectiveOp>, bool> analytic_;
  std::map<std::tuple<int, CollectiveOp, double>, double> seconds_, launch_;
  double base_latency_s_ = 0;
  bool all_analytic_     = false;
};

} // namespace stepsim
