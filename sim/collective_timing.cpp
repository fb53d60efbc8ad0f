#include "sim/collective_timing.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <limits>
#include <set>

namespace stepsim {

namespace sg4 = simgrid::s4u;

CollectiveTiming::CollectiveTiming(const Workload& w, const std::vector<sg4::Host*>& hosts,
                                   const CollectiveAlgorithm& algorithm)
    : w_(w), hosts_(hosts), algorithm_(algorithm)
{
  // Who uses each link: a group (its index) or point-to-point traffic (-1).
  std::set<std::pair<int, CollectiveOp>> used;
  std::set<std::pair<int, int>> pairs;
  for (const auto& program : w.ranks) {
    for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
      const Task& t = program.graph[v];
      if (t.kind == TaskKind::Collective)
        used.emplace(t.group, t.op);
      else if (t.kind == TaskKind::Send && t.bytes > 0)
        pairs.emplace(program.rank, t.peer);
    }
  }
  std::unordered_map<const sg4::Link*, std::set<int>> users;
  std::map<std::pair<int, CollectiveOp>, std::vector<const sg4::Link*>> links;
  std::set<std::pair<int, CollectiveOp>> contended;
  for (const auto& key : used) {
    if (!links_of(key.first, key.second, links[key]))
      contended.insert(key);
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
    analytic_[key] = alone;
  }
}

bool CollectiveTiming::analytic(int group, CollectiveOp op) const
{
  auto it = analytic_.find({group, op});
  return it != analytic_.end() && it->second;
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
      it->second.bandwidth_Bps = std::min(it->second.bandwidth_Bps, link->get_bandwidth());
    }
  }
  return it->second;
}

bool CollectiveTiming::links_of(int group, CollectiveOp op, std::vector<const sg4::Link*>& links)
{
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  const int n       = static_cast<int>(ranks.size());
  const int steps   = algorithm_.steps(op, n);
  std::set<const sg4::Link*> all;
  bool alone = true;
  std::vector<int> peers(static_cast<size_t>(n)), previous;
  for (int k = 0; k < steps; ++k) {
    for (int m = 0; m < n; ++m)
      peers[static_cast<size_t>(m)] = algorithm_.step(op, n, m, k, 1.0).send_to;
    if (peers == previous) // a ring repeats its pattern at every step
      continue;
    previous = peers;
    std::set<const sg4::Link*> in_step;
    for (int m = 0; m < n; ++m) {
      if (peers[static_cast<size_t>(m)] < 0)
        continue;
      for (const auto* link : path(ranks[static_cast<size_t>(m)], ranks[static_cast<size_t>(peers[static_cast<size_t>(m)])]).links) {
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
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  const int n       = static_cast<int>(ranks.size());
  double total = 0, slowest = 0;
  std::vector<CollectiveStep> steps(static_cast<size_t>(n)), previous;
  auto same = [](const CollectiveStep& a, const CollectiveStep& b) { return a.send_to == b.send_to && a.bytes == b.bytes; };
  for (int k = 0, count = algorithm_.steps(op, n); k < count; ++k) {
    for (int m = 0; m < n; ++m)
      steps[static_cast<size_t>(m)] = algorithm_.step(op, n, m, k, bytes);
    if (previous.empty() || !std::equal(steps.begin(), steps.end(), previous.begin(), same)) {
      slowest = 0;
      for (int m = 0; m < n; ++m) {
        const CollectiveStep& step = steps[static_cast<size_t>(m)];
        if (step.send_to < 0 || step.bytes <= 0)
          continue;
        const Path& p = path(ranks[static_cast<size_t>(m)], ranks[static_cast<size_t>(step.send_to)]);
        slowest       = std::max(slowest, p.latency_s + step.bytes / p.bandwidth_Bps);
      }
      previous = steps;
    }
    total += slowest;
  }
  return it->second = total;
}

} // namespace stepsim
