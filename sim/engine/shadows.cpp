#include "sim/engine/shadows.hpp"

#include "sim/core/link_bandwidth.hpp"
#include "sim/engine/collective_timing.hpp"
#include "sim/engine/ranks.hpp"

#include <simgrid/s4u/Link.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

namespace stepsim::engine {

namespace sg4 = simgrid::s4u;

namespace {

// The step's flows, each a pair of ranks with the links of its route, and the links they share.
struct FlowSet {
  struct Flow {
    std::vector<int> links; // shared links (indices into capacity)
    double cap = std::numeric_limits<double>::infinity(); // the slowest link that does not share (FATPIPE)
    bool simulated = false; // replayed without shadows
  };
  std::vector<Flow> flows;
  std::vector<double> capacity;
  std::vector<std::vector<int>> on_link; // flows crossing each link

  int flow(CollectiveTiming& timing, int src, int dst)
  {
    auto [it, fresh] = index_.try_emplace({src, dst}, static_cast<int>(flows.size()));
    if (!fresh)
      return it->second;
    Flow f;
    for (const sg4::Link* link : timing.links(src, dst)) {
      if (link->get_sharing_policy() == sg4::Link::SharingPolicy::FATPIPE) {
        f.cap = std::min(f.cap, link_bandwidth(link));
        continue;
      }
      auto [l, added] = links_.try_emplace(link, static_cast<int>(capacity.size()));
      if (added) {
        capacity.push_back(link_bandwidth(link));
        on_link.emplace_back();
      }
      f.links.push_back(l->second);
      on_link[static_cast<size_t>(l->second)].push_back(it->second);
    }
    flows.push_back(std::move(f));
    return it->second;
  }

private:
  std::map<std::pair<int, int>, int> index_;
  std::unordered_map<const sg4::Link*, int> links_;
};

// Max-min fair rates of the flows in `active` (progressive filling): the link with the smallest
// fair share fixes the rate of every flow still rising on it, which leaves the others' shares no
// smaller, so a heap of shares taken lazily gives the links in order. `bottleneck` gets the link
// that fixed each flow's rate (-1: its own cap).
std::vector<double> max_min_rates(const FlowSet& s, const std::vector<char>& active, std::vector<int>& bottleneck)
{
  const size_t n_links = s.capacity.size();
  std::vector<double> remaining = s.capacity;
  std::vector<int> rising(n_links, 0);
  std::vector<double> rate(s.flows.size(), 0);
  std::vector<char> fixed(s.flows.size(), 0);
  bottleneck.assign(s.flows.size(), -1);
  for (size_t f = 0; f < s.flows.size(); ++f)
    if (active[f])
      for (int l : s.flows[f].links)
        ++rising[static_cast<size_t>(l)];
  // (share, -1 - flow) for a flow's own cap, (share, link) for a link.
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  const auto share = [&](size_t l) { return remaining[l] / rising[l]; };
  for (size_t l = 0; l < n_links; ++l)
    if (rising[l] > 0)
      heap.emplace(share(l), static_cast<int>(l));
  for (size_t f = 0; f < s.flows.size(); ++f)
    if (active[f] && std::isfinite(s.flows[f].cap))
      heap.emplace(s.flows[f].cap, -1 - static_cast<int>(f));
  const auto fix = [&](size_t f, double r, int link) {
    fixed[f]      = 1;
    rate[f]       = r;
    bottleneck[f] = link;
    for (int l : s.flows[f].links) {
      const auto li = static_cast<size_t>(l);
      remaining[li] = std::max(0.0, remaining[li] - r);
      if (--rising[li] > 0)
        heap.emplace(share(li), l);
    }
  };
  while (!heap.empty()) {
    const auto [value, id] = heap.top();
    heap.pop();
    if (id < 0) {
      const auto f = static_cast<size_t>(-1 - id);
      if (!fixed[f])
        fix(f, value, -1);
      continue;
    }
    const auto l = static_cast<size_t>(id);
    if (rising[l] == 0 || share(l) != value) // stale: the link's share has risen since
      continue;
    for (int f : s.on_link[l])
      if (active[static_cast<size_t>(f)] && !fixed[static_cast<size_t>(f)])
        fix(static_cast<size_t>(f), value, id);
  }
  for (size_t f = 0; f < s.flows.size(); ++f) // flows that cross no shared link and have no cap
    if (active[f] && !fixed[f])
      rate[f] = std::numeric_limits<double>::infinity();
  return rate;
}

// A flow of the reduced replay is short-changed when its peers' flows leave it less than this
// fraction of what it gets without them.
constexpr double kShortChanged = 0.995;

// A lone simulated member that runs its collective step by step (not one transfer per ring
// lane, collectives.cpp) waits for its own receives, its peers' sends starting beside its own:
// that stands for the group only if every member meets the contention it meets. Members whose
// routes to their peers differ (a mesh's corner and its centre) do not: returns why (the replay
// then runs every rank). A ring's lanes end with the slowest member's and need no such check.
std::string check_symmetry(const Workload& w, CollectiveTiming& timing, const CollectiveAlgorithm& algorithm,
                           const SimulatedRanks& simulated, int group, const std::set<std::pair<CollectiveOp, double>>& ops)
{
  const Group& g = w.groups[static_cast<size_t>(group)];
  int lone = -1, count = 0;
  for (size_t m = 0; m < g.ranks.size(); ++m)
    if (simulated.simulated(g.ranks[m])) {
      lone = static_cast<int>(m);
      ++count;
    }
  if (count != 1)
    return "";
  const GroupShape& shape = timing.shape(group);
  bool step_by_step       = false;
  for (const auto& [op, bytes] : ops) {
    const CollectiveAlgorithm& a = concrete_algorithm(algorithm, op, shape, bytes);
    const int steps              = a.steps(op, shape, bytes);
    const int lanes              = lanes_of(a, op, shape, bytes);
    for (int lane = 0; lane < lanes && !step_by_step; ++lane) {
      int peer = -1;
      for (int k = 0; k < steps && !step_by_step; ++k) {
        const CollectiveStep step = a.step(op, shape, bytes, lane, lone, k);
        step_by_step              = step.sends != 1 || (peer >= 0 && step.send_to[0] != peer);
        peer                      = step.sends > 0 ? step.send_to[0] : peer;
      }
    }
  }
  if (!step_by_step)
    return "";
  // Each member's routes to the peers it sends to, over every step and copy: (latency,
  // bottleneck bandwidth) of each, sorted. Members alike (a fat-tree leaf's, Wi-Fi stations, the
  // GPUs of identical nodes) have the same list; a mesh's corner and centre do not, and there the
  // contention one meets is not the others'.
  std::vector<std::vector<int>> copies{g.ranks};
  copies.insert(copies.end(), g.copies.begin(), g.copies.end());
  std::map<int, std::vector<std::pair<double, double>>> routes;
  for (const auto& [op, bytes] : ops) {
    const CollectiveAlgorithm& a = concrete_algorithm(algorithm, op, shape, bytes);
    const int steps              = a.steps(op, shape, bytes);
    const int lanes              = lanes_of(a, op, shape, bytes);
    for (const auto& ranks : copies)
      for (int k = 0; k < steps; ++k)
        for (int lane = 0; lane < lanes; ++lane)
          for (size_t m = 0; m < ranks.size(); ++m) {
            const CollectiveStep step = a.step(op, shape, bytes, lane, static_cast<int>(m), k);
            for (int q = 0; q < step.sends && step.bytes > 0; ++q) {
              const int dst = ranks[static_cast<size_t>(step.send_to[static_cast<size_t>(q)])];
              routes[ranks[m]].emplace_back(timing.latency(ranks[m], dst),
                                            timing.transfer_seconds(ranks[m], dst, 1.0) - timing.latency(ranks[m], dst));
            }
          }
  }
  const std::vector<std::pair<double, double>>* first = nullptr;
  int unlike                                          = 0;
  for (auto& [rank, list] : routes) {
    std::sort(list.begin(), list.end());
    if (first == nullptr)
      first = &list;
    else if (list != *first)
      ++unlike;
  }
  if (unlike == 0)
    return "";
  return fmt::format("the members of {} do not all reach their peers over alike routes ({} of {} differ from "
                     "the first's), so the contention one meets is not the others' and one member cannot stand for "
                     "them",
                     g.name, unlike, routes.size());
}

} // namespace

Shadows::Shadows(const Workload& w, CollectiveTiming& timing, const CollectiveAlgorithm& algorithm,
                 const SimulatedRanks& simulated, bool enabled)
    : groups_(w.groups.size(), 0)
{
  if (!enabled || !w.peers_may_contend || w.ranks.size() == static_cast<size_t>(w.world_size))
    return;

  // The collectives the simulated ranks run: per group, the operations and sizes.
  std::map<int, std::set<std::pair<CollectiveOp, double>>> collectives;
  for (const auto& program : w.ranks)
    for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
      const Task& t = program.graph[v];
      if (t.kind == TaskKind::Collective && t.bytes > 0 && w.groups[static_cast<size_t>(t.group)].ranks.size() > 1)
        collectives[t.group].emplace(t.op, t.bytes);
    }

  FlowSet s;
  std::map<int, std::vector<int>> group_flows; // the peers' flows of each group
  // The simulated ranks' own flows of each group ({group, -1}) and of each transfer ({src, dst}).
  std::map<std::pair<int, int>, std::vector<int>> simulated_flows;
  for (const auto& [group, ops] : collectives) {
    const Group& g      = w.groups[static_cast<size_t>(group)];
    const GroupShape& shape = timing.shape(group);
    const int n         = static_cast<int>(g.ranks.size());
    std::set<std::pair<int, int>> pairs; // member -> member, over every step, lane, operation and size
    std::set<std::tuple<const CollectiveAlgorithm*, CollectiveOp, int, int>> done; // sizes that add no pairs
    for (const auto& [op, bytes] : ops) {
      const CollectiveAlgorithm& a = concrete_algorithm(algorithm, op, shape, bytes);
      const int steps              = a.steps(op, shape, bytes);
      const int lanes              = lanes_of(a, op, shape, bytes);
      if (!done.emplace(&a, op, steps, lanes).second)
        continue;
      // Uniform steps (a ring's) repeat their first step's peers: that one alone (a ring over
      // 1,440 GPUs: 300 million member-steps otherwise).
      const int distinct = a.uniform_steps && a.uniform_steps(op, shape) ? std::min(steps, 1) : steps;
      for (int k = 0; k < distinct; ++k)
        for (int lane = 0; lane < lanes; ++lane)
          for (int m = 0; m < n; ++m) {
            const CollectiveStep step = a.step(op, shape, bytes, lane, m, k);
            if (step.bytes > 0)
              for (int q = 0; q < step.sends; ++q)
                pairs.emplace(m, step.send_to[static_cast<size_t>(q)]);
          }
    }
    auto& peers = group_flows[group];
    for (const auto& [m, q] : pairs) {
      const int own = s.flow(timing, g.ranks[static_cast<size_t>(m)], g.ranks[static_cast<size_t>(q)]);
      if (simulated.simulated(g.ranks[static_cast<size_t>(m)])) {
        s.flows[static_cast<size_t>(own)].simulated = true;
        simulated_flows[{group, -1}].push_back(own);
      } else {
        peers.push_back(own);
      }
      for (const auto& copy : g.copies)
        peers.push_back(s.flow(timing, copy[static_cast<size_t>(m)], copy[static_cast<size_t>(q)]));
    }
  }
  std::map<std::pair<int, int>, std::vector<int>> transfer_flows;
  for (const auto& [key, copies] : w.transfer_copies) {
    if (key.second < 0) // host copies are not checked yet
      continue;
    const int own = s.flow(timing, key.first, key.second);
    s.flows[static_cast<size_t>(own)].simulated = true;
    simulated_flows[key].push_back(own);
    auto& peers = transfer_flows[key];
    for (const auto& [src, dst] : copies)
      peers.push_back(s.flow(timing, src, dst));
  }

  std::vector<char> every(s.flows.size(), 1), alone(s.flows.size(), 0);
  for (size_t f = 0; f < s.flows.size(); ++f)
    alone[f] = s.flows[f].simulated ? 1 : 0;
  std::vector<int> bottleneck_with, bottleneck_alone;
  const std::vector<double> with  = max_min_rates(s, every, bottleneck_with);
  const std::vector<double> without = max_min_rates(s, alone, bottleneck_alone);
  std::vector<char> short_changed(s.capacity.size(), 0);
  const auto mark = [&](const std::vector<double>& with_peers, const std::vector<double>& without_peers,
                        const std::vector<int>& bottleneck, const std::vector<int>& of) {
    for (int fi : of) {
      const auto f = static_cast<size_t>(fi);
      if (with_peers[f] < kShortChanged * without_peers[f] && bottleneck[f] >= 0)
        if (!short_changed[static_cast<size_t>(bottleneck[f])]++)
          ++short_changed_links_;
    }
  };
  std::vector<int> all_simulated;
  for (size_t f = 0; f < s.flows.size(); ++f)
    if (s.flows[f].simulated)
      all_simulated.push_back(static_cast<int>(f));
  mark(with, without, bottleneck_with, all_simulated);
  // Each collective group and each transfer also on its own, with its peers' flows and without:
  // taken all at once, a simulated rank's other flows (its data-parallel ring on the NIC its
  // pipeline send takes) may already hold a flow to the share its peers would leave it, and hide
  // a link its peers do saturate whenever it runs apart from the rest (the pipeline sends of a
  // stage crossing an oversubscribed uplink together).
  for (const auto& [key, own] : simulated_flows) {
    const auto& peers = key.second < 0 ? group_flows[key.first] : transfer_flows[key];
    std::vector<char> with_class(s.flows.size(), 0), own_class(s.flows.size(), 0);
    for (int f : own)
      with_class[static_cast<size_t>(f)] = own_class[static_cast<size_t>(f)] = 1;
    for (int f : peers)
      with_class[static_cast<size_t>(f)] = 1;
    std::vector<int> bottleneck_class, unused;
    const std::vector<double> rates_with    = max_min_rates(s, with_class, bottleneck_class);
    const std::vector<double> rates_without = max_min_rates(s, own_class, unused);
    mark(rates_with, rates_without, bottleneck_class, own);
  }
  if (short_changed_links_ == 0)
    return;
  const auto crosses = [&](const std::vector<int>& flows) {
    for (int f : flows)
      for (int l : s.flows[static_cast<size_t>(f)].links)
        if (short_changed[static_cast<size_t>(l)])
          return true;
    return false;
  };
  for (const auto& [group, flows] : group_flows)
    if (crosses(flows)) {
      groups_[static_cast<size_t>(group)] = 1;
      ++shadowed_groups_;
      timing.contended(group);
      if (symmetry_broken_.empty())
        symmetry_broken_ = check_symmetry(w, timing, algorithm, simulated, group, collectives.at(group));
    }
  for (const auto& [key, flows] : transfer_flows)
    if (crosses(flows)) {
      transfers_[key] = &w.transfer_copies.at(key);
      // The transfer's end waits for its images' (point_to_point.cpp): every replica at the pace
      // of the slowest, which stands for them only if their routes are alike.
      const auto route = [&](int src, int dst) {
        return std::make_pair(timing.latency(src, dst), timing.transfer_seconds(src, dst, 1.0) - timing.latency(src, dst));
      };
      int unlike = 0;
      for (const auto& [src, dst] : w.transfer_copies.at(key))
        unlike += route(src, dst) != route(key.first, key.second) ? 1 : 0;
      if (unlike > 0 && symmetry_broken_.empty())
        symmetry_broken_ = fmt::format("the transfers that rank {} to rank {} stands for do not all take alike routes "
                                       "({} of {} differ from its own), so one cannot stand for the others",
                                       key.first, key.second, unlike, w.transfer_copies.at(key).size());
    }
}

const std::vector<std::pair<int, int>>* Shadows::transfer(int src, int dst) const
{
  auto it = transfers_.find({src, dst});
  return it == transfers_.end() ? nullptr : it->second;
}

} // namespace stepsim::engine
