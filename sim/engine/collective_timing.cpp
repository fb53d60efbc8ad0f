#include "sim/engine/collective_timing.hpp"
#include "models/collectives/protocol.hpp"
#include "sim/core/link_bandwidth.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <limits>
#include <set>

namespace stepsim {

namespace sg4 = simgrid::s4u;

CollectiveTiming::CollectiveTiming(const Workload& w, const std::vector<sg4::Host*>& hosts,
                                   const CollectiveAlgorithm& algorithm, bool all_analytic, double base_latency_s)
    : w_(w), hosts_(hosts), algorithm_(algorithm), base_latency_s_(base_latency_s), all_analytic_(all_analytic)
{
  // Who uses each link: a group (its index) or point-to-point traffic (-1).
  std::set<std::pair<int, CollectiveOp>> used;
  std::map<std::pair<int, CollectiveOp>, std::set<double>> sizes; // an algorithm may depend on the size ("auto")
  kinds_ = distinct_collectives(w);
  for (const CollectiveKind& k : kinds_) {
    used.emplace(k.group, k.op);
    sizes[{k.group, k.op}].insert(k.bytes);
  }
  std::vector<std::pair<int, int>> pairs;
  for (const auto& program : w.ranks)
    for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
      const Task& t = program.graph[v];
      if (t.kind == TaskKind::Send && t.bytes > 0 && (pairs.empty() || pairs.back() != std::pair{program.rank, t.peer}))
        pairs.emplace_back(program.rank, t.peer);
    }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  std::unordered_map<const sg4::Link*, std::set<int>> users;
  std::map<std::pair<int, CollectiveOp>, std::vector<const sg4::Link*>> links;
  std::set<std::pair<int, CollectiveOp>> contended;
  for (const auto& key : used) {
    std::set<const sg4::Link*> all;
    for (double bytes : sizes[key]) {
      std::vector<const sg4::Link*> of_size;
      if (!links_of(key.first, key.second, bytes, of_size))
        contended.insert(key);
      all.insert(of_size.begin(), of_size.end());
    }
    links[key].assign(all.begin(), all.end());
    for (const auto* link : links[key])
      users[link].insert(key.first);
  }
  for (const auto& [src, dst] : pairs)
    for (const auto* link : path(src, dst).links)
      users[link].insert(-1);
  for (const auto& key : used) {
    bool alone = !contended.count(key);
    for (const auto* link : links[key])
      alone = alone && users[link].size() == 1;
    analytic_[key] = alone || all_analytic;
  }
}

bool CollectiveTiming::analytic(int group, CollectiveOp op) const
{
  auto it = analytic_.find({group, op});
  return it != analytic_.end() && it->second;
}

void CollectiveTiming::contended(int group)
{
  if (all_analytic_)
    return;
  for (auto& [key, analytic] : analytic_)
    if (key.first == group)
      analytic = false;
}

const CollectiveTiming::Path& CollectiveTiming::path(int src_rank, int dst_rank)
{
  long long key = static_cast<long long>(src_rank) << 32 | static_cast<unsigned>(dst_rank);
  auto [it, fresh] = paths_.try_emplace(key);
  if (fresh) {
    std::vector<sg4::Link*> route;
    double latency = 0;
    hosts_[static_cast<size_t>(src_rank)]->route_to(hosts_[static_cast<size_t>(dst_rank)], route, &latency);
    it->second.latency_s     = latency;
    it->second.bandwidth_Bps = std::numeric_limits<double>::infinity();
    for (const auto* link : route) {
      it->second.links.push_back(link);
      it->second.bandwidth_Bps = std::min(it->second.bandwidth_Bps, link_bandwidth(link));
    }
  }
  return it->second;
}

const GroupShape& CollectiveTiming::shape(int group)
{
  auto [it, fresh] = shapes_.try_emplace(group);
  if (fresh)
    it->second = group_shape(w_.groups[static_cast<size_t>(group)],
                             [&](int a, int b) { return member_path(group, a, b); });
  return it->second;
}

PathCost CollectiveTiming::member_path(int group, int member_a, int member_b)
{
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  const Path& p     = path(ranks[static_cast<size_t>(member_a)], ranks[static_cast<size_t>(member_b)]);
  return PathCost{p.latency_s, p.bandwidth_Bps};
}

bool CollectiveTiming::links_of(int group, CollectiveOp op, double bytes, std::vector<const sg4::Link*>& links)
{
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  const int n       = static_cast<int>(ranks.size());
  const GroupShape& g = shape(group);
  const auto& a     = concrete_algorithm(algorithm_, op, g, bytes);
  const int steps   = n > 1 ? a.steps(op, g, bytes) : 0;
  const int lanes   = lanes_of(a, op, g, bytes);
  std::set<const sg4::Link*> all;
  bool alone = true;
  // The lanes run side by side: their steps k are taken as concurrent. Uniform steps (a ring)
  // repeat their first step's pattern: that one alone.
  const int distinct = a.uniform_steps && a.uniform_steps(op, g) ? std::min(steps, 1) : steps;
  std::vector<int> peers, previous;
  for (int k = 0; k < distinct; ++k) {
    peers.clear();
    for (int lane = 0; lane < lanes; ++lane)
      for (int m = 0; m < n; ++m) {
        const CollectiveStep s = a.step(op, g, bytes, lane, m, k);
        for (int q = 0; q < s.sends; ++q)
          peers.push_back(m * n + s.send_to[static_cast<size_t>(q)]);
        peers.push_back(-1);
      }
    if (peers == previous) // a ring repeats its pattern at every step
      continue;
    previous = peers;
    std::set<const sg4::Link*> in_step;
    for (int pair : peers) {
      if (pair < 0)
        continue;
      for (const auto* link : path(ranks[static_cast<size_t>(pair / n)], ranks[static_cast<size_t>(pair % n)]).links) {
        alone = in_step.insert(link).second && alone;
        all.insert(link);
      }
    }
  }
  links.assign(all.begin(), all.end());
  return alone;
}

double CollectiveTiming::seconds(int group, CollectiveOp op, double bytes)
{
  auto [it, fresh] = seconds_.try_emplace({group, op, bytes}, 0.0);
  if (!fresh)
    return it->second;
  const double total = uncontended_seconds(algorithm_, op, shape(group), bytes,
                                           [&](int a, int b) { return member_path(group, a, b); });
  return it->second = total > 0 ? total + launch_latency(group, op, bytes) : 0.0;
}

double CollectiveTiming::launch_latency(int group, CollectiveOp op, double bytes)
{
  auto [it, fresh] = launch_.try_emplace({group, op, bytes}, 0.0);
  if (!fresh)
    return it->second;
  const GroupShape& g = shape(group);
  const auto& a       = concrete_algorithm(algorithm_, op, g, bytes);
  return it->second = a.protocol >= 0 ? launch_seconds(a, op, g, bytes) : base_latency(group);
}

} // namespace stepsim
