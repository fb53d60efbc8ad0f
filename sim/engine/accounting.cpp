#include "sim/engine/accounting.hpp"

#include <simgrid/s4u/Link.hpp>

#include <algorithm>

namespace stepsim::engine {

void Accounting::carried(int src_rank, int dst_rank, double bytes, double start, double end)
{
  if (!record_links_ || bytes <= 0)
    return;
  for (const auto* link : timing_.links(src_rank, dst_rank)) {
    auto& usage = link_usage_[link];
    usage.bytes += bytes;
    if (end > start)
      usage.intervals.emplace_back(start, end);
  }
}

void Accounting::carried_by_collective(int group, CollectiveOp op, double bytes, int member, double start, double end)
{
  if (!record_links_)
    return;
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  const int n       = static_cast<int>(ranks.size());
  if (member < 0 || member >= n)
    return;
  const GroupShape& g = timing_.shape(group);
  const auto& a       = concrete_algorithm(algorithm_, op, g, bytes);
  for (int lane = 0, lanes = lanes_of(a, op, g, bytes); lane < lanes; ++lane)
    for (int k = 0, steps = n > 1 ? a.steps(op, g, bytes) : 0; k < steps; ++k) {
      const CollectiveStep step = a.step(op, g, bytes, lane, member, k);
      for (int q = 0; q < step.sends && step.bytes > 0; ++q)
        carried(ranks[static_cast<size_t>(member)], ranks[static_cast<size_t>(step.send_to[static_cast<size_t>(q)])],
                step.bytes, start, end);
    }
}

void Accounting::waited(int rank, int peer, int group, double seconds)
{
  if (seconds > 0)
    waits_[{rank, peer, group}] += seconds;
}

void Accounting::export_to(ReplayResult& result)
{
  for (auto& [link, usage] : link_usage_) {
    std::sort(usage.intervals.begin(), usage.intervals.end());
    double busy = 0, open = -1, close = -1;
    for (const auto& [a, b] : usage.intervals) {
      if (a > close) {
        busy += close - open;
        open = a;
        close = b;
      } else {
        close = std::max(close, b);
      }
    }
    busy += close - open;
    result.links.push_back(LinkTraffic{link->get_name(), usage.bytes, busy});
  }
  std::sort(result.links.begin(), result.links.end(), [](const LinkTraffic& a, const LinkTraffic& b) {
    return std::tie(b.busy_s, b.bytes, a.name) < std::tie(a.busy_s, a.bytes, b.name);
  });
  for (const auto& [key, seconds] : waits_)
    result.waits.push_back(RankWait{std::get<0>(key), std::get<1>(key), std::get<2>(key), seconds});
  std::stable_sort(result.waits.begin(), result.waits.end(),
                   [](const RankWait& a, const RankWait& b) { return a.seconds > b.seconds; });
}

} // namespace stepsim::engine
