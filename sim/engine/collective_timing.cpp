#include "sim/engine/collective_timing.hpp"
#include "models/collectives/protocol.hpp"
#include "sim/core/link_bandwidth.hpp"
#include "topologies/platform.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>
#include <string_view>
#include <unordered_set>

namespace stepsim {

namespace sg4 = simgrid::s4u;

CollectiveTiming::CollectiveTiming(const Workload& w, const std::vector<sg4::Host*>& hosts,
                                   const CollectiveAlgorithm& algorithm, bool all_analytic, double base_latency_s)
    : w_(w), hosts_(hosts), algorithm_(algorithm), base_latency_s_(base_latency_s), all_analytic_(all_analytic)
{
  kinds_ = distinct_collectives(w);
  for (const CollectiveKind& k : kinds_)
    sizes_[{k.group, k.op}].insert(k.bytes);
  std::vector<std::pair<int, int>> pairs;
  for (const auto& program : w.ranks)
    for (auto v : boost::make_iterator_range(boost::vertices(program.graph))) {
      const Task& t = program.graph[v];
      if (t.kind == TaskKind::Send && t.bytes > 0 && (pairs.empty() || pairs.back() != std::pair{program.rank, t.peer}))
        pairs.emplace_back(program.rank, t.peer);
    }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  for (const auto& [src, dst] : pairs)
    for (const auto* link : path(src, dst).links)
      point_to_point_links_.push_back(link);
  for (const auto& [key, sizes] : sizes_) {
    std::set<const sg4::Link*> all;
    // Every collective is timed by its closed form whatever links it shares (find_analytic): its
    // links are not looked for (every member's every step of every lane: on a tree over 4,096
    // GPUs, 29 % of the time of one size of nccl-tests' table).
    if (all_analytic_) {
      links_[key] = {};
      continue;
    }
    for (double bytes : sizes) {
      std::vector<const sg4::Link*> of_size;
      if (!links_of(key.first, key.second, bytes, of_size))
        shared_in_step_.insert(key);
      all.insert(of_size.begin(), of_size.end());
    }
    links_[key].assign(all.begin(), all.end());
  }
  find_analytic(links_);
  in_chain_ = analytic_;
  index_flags();
  // The collectives whose links no other group or operation, and no point-to-point transfer,
  // crosses (rotation: representative pairs stand for the group's own flows only).
  std::unordered_map<const sg4::Link*, int> keys_on;
  for (const auto& [key, of_key] : links_)
    for (const auto* link : of_key)
      ++keys_on[link];
  for (const auto* link : point_to_point_links_)
    ++keys_on[link];
  for (const auto& [key, of_key] : links_)
    if (std::all_of(of_key.begin(), of_key.end(), [&](const sg4::Link* link) { return keys_on[link] == 1; }))
      exclusive_.insert(key);
}

void CollectiveTiming::index_flags()
{
  static_assert(static_cast<int>(CollectiveOp::Reduce) + 1 == kOps, "one flag per operation");
  analytic_at_.assign(w_.groups.size() * kOps, 0);
  in_chain_at_.assign(w_.groups.size() * kOps, 0);
  for (const auto& [key, on] : analytic_)
    analytic_at_[static_cast<size_t>(key.first) * kOps + static_cast<size_t>(key.second)] = on ? 1 : 0;
  for (const auto& [key, on] : in_chain_)
    in_chain_at_[static_cast<size_t>(key.first) * kOps + static_cast<size_t>(key.second)] = on ? 1 : 0;
}

void CollectiveTiming::find_analytic(const std::map<Key, std::vector<const sg4::Link*>>& links)
{
  // Who uses each link: a group (its index) or point-to-point traffic (-1).
  std::unordered_map<const sg4::Link*, std::set<int>> users;
  for (const auto& [key, of_key] : links)
    for (const auto* link : of_key)
      users[link].insert(key.first);
  for (const auto* link : point_to_point_links_)
    users[link].insert(-1);
  for (const auto& [key, of_key] : links) {
    bool alone = !shared_in_step_.count(key);
    for (const auto* link : of_key)
      alone = alone && users[link].size() == 1;
    analytic_[key] = alone || all_analytic_;
  }
}

void CollectiveTiming::lone_members(const std::vector<int>& lone_member)
{
  if (all_analytic_)
    return;
  std::map<Key, std::vector<const sg4::Link*>> links;
  for (const auto& [key, sizes] : sizes_) {
    const int group = key.first;
    const int m     = lone_member[static_cast<size_t>(group)];
    const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
    if (m < 0 || ranks.size() < 2) {
      links[key] = links_[key];
      continue;
    }
    std::set<const sg4::Link*> hops;
    const auto add = [&](const Hop& h) {
      for (const auto* link : path(h.src, h.dst).links)
        hops.insert(link);
    };
    // A ring's lanes, each one transfer on its slowest hop: alone on those links they take the
    // ring's closed form. (A collective run step by step, a tree, keeps every member's hops: its
    // closed form follows each member's chunks, which its lone member's steps do not.)
    bool rings = true;
    for (double bytes : sizes) {
      const auto& lanes = ring_lanes(group, key.second, bytes, m);
      if (!lanes) {
        rings = false;
        break;
      }
      for (const RingLane& lane : *lanes)
        add(lane.slowest);
    }
    if (!rings) {
      links[key] = links_[key];
      continue;
    }
    links[key].assign(hops.begin(), hops.end());
  }
  find_analytic(links);
  index_flags();
}

bool CollectiveTiming::analytic(int group, CollectiveOp op) const
{
  const size_t at = static_cast<size_t>(group) * kOps + static_cast<size_t>(op);
  return group >= 0 && at < analytic_at_.size() && analytic_at_[at] != 0;
}

bool CollectiveTiming::analytic_in_chain(int group, CollectiveOp op) const
{
  const size_t at = static_cast<size_t>(group) * kOps + static_cast<size_t>(op);
  return group >= 0 && at < in_chain_at_.size() && in_chain_at_[at] != 0;
}

void CollectiveTiming::contended(int group)
{
  if (all_analytic_)
    return;
  for (auto* flags : {&analytic_, &in_chain_})
    for (auto& [key, analytic] : *flags)
      if (key.first == group)
        analytic = false;
  index_flags();
}

const CollectiveTiming::Path& CollectiveTiming::path(int src_rank, int dst_rank)
{
  long long key = static_cast<long long>(src_rank) << 32 | static_cast<unsigned>(dst_rank);
  auto [it, fresh] = paths_.try_emplace(key);
  if (fresh) {
    std::vector<sg4::Link*> route;
    double latency = 0;
    hosts_[static_cast<size_t>(src_rank)]->route_to(hosts_[static_cast<size_t>(dst_rank)], route, &latency);
    // Device to device over Wi-Fi the air's latency, across NICs of a kind other than InfiniBand
    // their transport's: owed beyond what SimGrid charges.
    it->second.transport_s   = transport_latency_of(route);
    it->second.latency_s     = latency + air_latency_owed(route) + it->second.transport_s;
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
  if (fresh) {
    const Group& g = w_.groups[static_cast<size_t>(group)];
    it->second     = group_shape(g, [&](int a, int b) { return member_path(group, a, b); });
    // The lowest of the members' built on the platform (none known: 0).
    double ratio = 0;
    for (int rank : g.ranks) {
      const sg4::Host* host = static_cast<size_t>(rank) < hosts_.size() ? hosts_[static_cast<size_t>(rank)] : nullptr;
      if (host == nullptr)
        continue;
      const char* value = host->get_property(kNicFeedRatioProperty);
      if (value == nullptr) {
        ratio = 0;
        break;
      }
      const double r = std::strtod(value, nullptr);
      ratio          = ratio > 0 ? std::min(ratio, r) : r;
    }
    it->second.nic_feed_ratio = ratio;
    // The NIC of each member (none known on one node, or where a member has none: each its own).
    std::vector<int> nics;
    for (int rank : g.ranks) {
      const sg4::Host* host = static_cast<size_t>(rank) < hosts_.size() ? hosts_[static_cast<size_t>(rank)] : nullptr;
      const char* nic       = host != nullptr ? host->get_property(kNicProperty) : nullptr;
      if (nic == nullptr) {
        nics.clear();
        break;
      }
      nics.push_back(std::atoi(nic));
    }
    // Only where two members share one does it change a closed form (and it costs a pass over
    // the members per step of a tree's walk: 16,384 of them on 130 steps).
    std::vector<int> sorted = nics;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end())
      nics.clear();
    it->second.nic_of_member = std::move(nics);
    // The thinned uplinks above each member's NIC (kUplinksProperty, "name=bandwidth"), as
    // indices, each with its bandwidth as built. None on a non-blocking fabric.
    std::vector<std::vector<int>> uplinks;
    std::vector<double> uplink_Bps;
    std::unordered_map<std::string, int> uplink_index;
    for (int rank : g.ranks) {
      const sg4::Host* host = static_cast<size_t>(rank) < hosts_.size() ? hosts_[static_cast<size_t>(rank)] : nullptr;
      const char* listed    = host != nullptr ? host->get_property(kUplinksProperty) : nullptr;
      uplinks.emplace_back();
      for (std::string_view rest = listed != nullptr ? listed : ""; !rest.empty();) {
        const std::string_view item = rest.substr(0, rest.find(','));
        rest                        = item.size() < rest.size() ? rest.substr(item.size() + 1) : std::string_view{};
        const size_t equals         = item.rfind('=');
        if (equals == std::string_view::npos)
          throw std::logic_error("a GPU's uplinks property reads \"" + std::string(listed) + "\"");
        auto [at, added] = uplink_index.try_emplace(std::string(item.substr(0, equals)), static_cast<int>(uplink_Bps.size()));
        if (added)
          uplink_Bps.push_back(std::strtod(std::string(item.substr(equals + 1)).c_str(), nullptr));
        uplinks.back().push_back(at->second);
      }
    }
    if (!uplink_Bps.empty()) {
      it->second.uplinks_of_member = std::move(uplinks);
      it->second.uplink_Bps        = std::move(uplink_Bps);
    }
    // NCCL's tuner takes the CPU of the rank's own node; the members' nodes are alike where it
    // matters (all AMD), else the first row of its table applies.
    bool amd = !g.ranks.empty();
    for (int rank : g.ranks) {
      const sg4::Host* host = static_cast<size_t>(rank) < hosts_.size() ? hosts_[static_cast<size_t>(rank)] : nullptr;
      const char* vendor    = host != nullptr ? host->get_property(kCpuVendorProperty) : nullptr;
      amd                   = amd && vendor != nullptr && std::string(vendor) == "amd";
    }
    it->second.amd_hosts = amd;
  }
  return it->second;
}

const CollectiveTiming::Plan& CollectiveTiming::plan(int group, CollectiveOp op, double bytes)
{
  auto [it, fresh] = plans_.try_emplace({group, op, bytes});
  if (fresh) {
    Plan& p     = it->second;
    p.shape     = &shape(group);
    p.algorithm = &concrete_algorithm(algorithm_, op, *p.shape, bytes);
    p.steps     = w_.groups[static_cast<size_t>(group)].ranks.size() > 1 ? p.algorithm->steps(op, *p.shape, bytes) : 0;
    p.lanes     = lanes_of(*p.algorithm, op, *p.shape, bytes);
    p.slots     = p.steps > 0 ? flow_slots(*p.algorithm, op, *p.shape, bytes) : 1;
  }
  return it->second;
}

PathCost CollectiveTiming::member_path(int group, int member_a, int member_b)
{
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  const Path& p     = path(ranks[static_cast<size_t>(member_a)], ranks[static_cast<size_t>(member_b)]);
  return PathCost{p.latency_s, p.bandwidth_Bps, p.transport_s};
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
  const double total = uncontended_seconds(
      algorithm_, op, shape(group), bytes, [&](int a, int b) { return member_path(group, a, b); }, false, true);
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

const std::optional<std::vector<CollectiveTiming::RingLane>>&
CollectiveTiming::ring_lanes(int group, CollectiveOp op, double bytes, int member)
{
  auto [it, fresh] = ring_lanes_.try_emplace({group, op, bytes, member});
  if (!fresh)
    return it->second;
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  const Plan& p     = plan(group, op, bytes);
  std::vector<RingLane> found;
  for (int lane = 0; lane < p.lanes; ++lane) {
    RingLane l;
    for (int k = 0; k < p.steps; ++k) {
      const CollectiveStep step = p.algorithm->step(op, *p.shape, bytes, lane, member, k);
      if (step.sends != 1 || (l.peer >= 0 && step.send_to[0] != l.peer))
        return it->second; // none
      l.peer = step.send_to[0];
      l.bytes += step.bytes;
    }
    if (l.peer < 0 || l.bytes <= 0)
      return it->second;
    found.push_back(l);
  }
  if (found.empty())
    return it->second;
  // A group over two nodes whose own hop stays inside the node still waits for the NIC hop.
  // The member's own hop is timed with every lane that leaves its GPU on the same link (its
  // NVLink, where the other lanes leave through other members' NICs): each member carries its
  // lanes so, and a lane timed on another member's NIC alone would not share the link (72
  // lanes on an NVL72 rack's NVLink made a 144-GPU ring 3.9 times faster than its NVLink).
  const int src = ranks[static_cast<size_t>(member)];
  std::vector<double> own_bytes(found.size(), 0.0);
  for (size_t lane = 0; lane < found.size(); ++lane)
    for (size_t other = 0; other < found.size(); ++other)
      if (first_link(src, ranks[static_cast<size_t>(found[other].peer)]) ==
          first_link(src, ranks[static_cast<size_t>(found[lane].peer)]))
        own_bytes[lane] += found[other].bytes;
  // On thinned uplinks a hop across them carries the lane with every lane of every member that
  // crosses them too (UplinkLoad): the slowest hop is then one across the most crowded uplink,
  // and the lanes timed on hops across it share it in the replay as the group's flows do.
  const UplinkLoad* uplinks = uplink_load(group, op, bytes);
  for (size_t lane = 0; lane < found.size(); ++lane) {
    const double lane_bytes = found[lane].bytes;
    const auto cost         = [&](const Hop& h, int from, int to, double bytes_on_link) {
      double wire = transfer_seconds(h.src, h.dst, bytes_on_link);
      if (uplinks != nullptr)
        wire = std::max(wire, latency(h.src, h.dst) + lane_bytes * uplinks->seconds_per_byte(from, to, 0));
      return wire + (p.steps - 1) * latency(h.src, h.dst);
    };
    Hop slowest{src, ranks[static_cast<size_t>(found[lane].peer)]};
    double worst = cost(slowest, member, found[lane].peer, own_bytes[lane]);
    for (int other = 0; other < static_cast<int>(ranks.size()); ++other) {
      const CollectiveStep step = p.algorithm->step(op, *p.shape, bytes, static_cast<int>(lane), other, 0);
      if (other == member || step.sends != 1)
        continue;
      const Hop hop{ranks[static_cast<size_t>(other)], ranks[static_cast<size_t>(step.send_to[0])]};
      if (const double c = cost(hop, other, step.send_to[0], lane_bytes); c > worst) {
        worst   = c;
        slowest = hop;
      }
    }
    found[lane].slowest = slowest;
  }
  it->second = std::move(found);
  return it->second;
}

const UplinkLoad* CollectiveTiming::uplink_load(int group, CollectiveOp op, double bytes)
{
  auto [it, fresh] = uplink_loads_.try_emplace({group, op, bytes});
  if (fresh) {
    const Plan& p = plan(group, op, bytes);
    if (p.shape->uplinks_of_member.empty() || p.steps == 0)
      return nullptr;
    const int n     = static_cast<int>(w_.groups[static_cast<size_t>(group)].ranks.size());
    const int steps = p.algorithm->uniform_steps && p.algorithm->uniform_steps(op, *p.shape) ? 1 : p.steps;
    it->second      = std::make_unique<UplinkLoad>(*p.shape, steps);
    for (int lane = 0; lane < p.lanes; ++lane)
      for (int m = 0; m < n; ++m)
        for (int k = 0; k < steps; ++k) {
          const CollectiveStep step = p.algorithm->step(op, *p.shape, bytes, lane, m, k);
          for (int q = 0; q < step.sends; ++q)
            it->second->add(m, step.send_to[static_cast<size_t>(q)], k);
        }
  }
  return it->second.get();
}

CollectiveTiming::Hop CollectiveTiming::step_bottleneck(int group, CollectiveOp op, double bytes, int lane, int k, Hop own,
                                                        double step_bytes)
{
  const auto key = std::make_tuple(group, static_cast<int>(op), bytes, lane, k, own.src, own.dst);
  auto [it, fresh] = bottlenecks_.try_emplace(key, own);
  if (!fresh)
    return it->second;
  const Plan& p     = plan(group, op, bytes);
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  // The own hop with the member's sends of this step on every lane that leave on its link, as
  // ring_lanes times it.
  double own_bytes = 0;
  const auto* own_link = first_link(own.src, own.dst);
  for (int member = 0; member < static_cast<int>(ranks.size()); ++member) {
    if (ranks[static_cast<size_t>(member)] != own.src)
      continue;
    for (int l = 0; l < p.lanes; ++l) {
      const CollectiveStep step = p.algorithm->step(op, *p.shape, bytes, l, member, k);
      for (int q = 0; q < step.sends && step.bytes > 0; ++q)
        if (first_link(own.src, ranks[static_cast<size_t>(step.send_to[static_cast<size_t>(q)])]) == own_link)
          own_bytes += step.bytes;
    }
    break;
  }
  double worst = transfer_seconds(own.src, own.dst, std::max(step_bytes, own_bytes));
  // A send across thinned uplinks shares them with the step's other sends across them, every
  // member's on every lane (as ring_lanes).
  const UplinkLoad* uplinks = uplink_load(group, op, bytes);
  const int uplink_step     = p.algorithm->uniform_steps && p.algorithm->uniform_steps(op, *p.shape) ? 0 : k;
  for (int other = 0; other < static_cast<int>(ranks.size()); ++other) {
    const CollectiveStep step = p.algorithm->step(op, *p.shape, bytes, lane, other, k);
    if (step.bytes <= 0)
      continue;
    for (int q = 0; q < step.sends; ++q) {
      const int to = step.send_to[static_cast<size_t>(q)];
      const Hop hop{ranks[static_cast<size_t>(other)], ranks[static_cast<size_t>(to)]};
      double c = transfer_seconds(hop.src, hop.dst, step.bytes);
      if (uplinks != nullptr)
        c = std::max(c, latency(hop.src, hop.dst) + step.bytes * uplinks->seconds_per_byte(other, to, uplink_step));
      if (c > worst) {
        worst      = c;
        it->second = hop;
      }
    }
  }
  return it->second;
}

const CollectiveTiming::Rotation* CollectiveTiming::rotation(int group, CollectiveOp op, double bytes)
{
  // Every size of the group's operation folds, or none: two of its collectives may be on the
  // wire at once (a data-parallel step's buckets), and one on the representative pairs beside
  // one on every member's own would not meet on the links they would share.
  auto [key, first_ask] = key_folds_.try_emplace({group, op}, true);
  if (first_ask) {
    const auto sizes = sizes_.find({group, op});
    if (sizes == sizes_.end())
      key->second = false;
    else
      for (double size : sizes->second)
        key->second = key->second && size_rotation(group, op, size) != nullptr;
  }
  return key->second ? size_rotation(group, op, bytes) : nullptr;
}

const CollectiveTiming::Rotation* CollectiveTiming::size_rotation(int group, CollectiveOp op, double bytes)
{
  auto [it, fresh] = rotations_.try_emplace({group, op, bytes});
  if (!fresh)
    return it->second.get();
  const Plan& p       = plan(group, op, bytes);
  const GroupShape& g = *p.shape;
  const int k         = g.per_node;
  if (all_analytic_ || !p.algorithm->rotated_lanes || p.steps == 0 || k < 2 || exclusive_.count({group, op}) == 0)
    return nullptr;
  const int d = p.algorithm->rotated_lanes(op, g, bytes);
  if (d <= 0 || p.lanes != d * k)
    return nullptr;
  const auto& ranks = w_.groups[static_cast<size_t>(group)].ranks;
  auto r   = std::make_unique<Rotation>();
  r->lanes = d;
  for (const auto& members : g.node_members) {
    r->first.push_back(ranks[static_cast<size_t>(members[0])]);
    r->second.push_back(ranks[static_cast<size_t>(members[1])]);
  }
  if (rotation_holds(p, group, op, bytes, *r))
    it->second = std::move(r);
  return it->second.get();
}

CollectiveTiming::Hop CollectiveTiming::rotated_hop(const Rotation& r, int group, int from, int to)
{
  const GroupShape& g = shape(group);
  const auto a        = static_cast<size_t>(g.node_of_member[static_cast<size_t>(from)]);
  const auto b        = static_cast<size_t>(g.node_of_member[static_cast<size_t>(to)]);
  return a == b ? Hop{r.first[a], r.second[a]} : Hop{r.first[a], r.first[b]};
}

bool CollectiveTiming::rotation_holds(const Plan& p, int group, CollectiveOp op, double bytes, const Rotation& r)
{
  const GroupShape& g          = *p.shape;
  const CollectiveAlgorithm& a = *p.algorithm;
  const auto& ranks            = w_.groups[static_cast<size_t>(group)].ranks;
  const int n = g.n, k = g.per_node, d = r.lanes;
  // The member `places` places after m in m's node.
  const auto moved = [&](int m, int places) {
    const auto& node = g.node_members[static_cast<size_t>(g.node_of_member[static_cast<size_t>(m)])];
    return node[static_cast<size_t>((g.local_rank[static_cast<size_t>(m)] + places) % k)];
  };
  // Every link of a representative pair.
  std::unordered_set<const sg4::Link*> represented;
  for (int lane = 0; lane < d; ++lane)
    for (int m = 0; m < n; ++m)
      for (int k_step = 0; k_step < p.steps; ++k_step) {
        const CollectiveStep s = a.step(op, g, bytes, lane, m, k_step);
        for (int q = 0; q < s.sends && s.bytes > 0; ++q) {
          const Hop h = rotated_hop(r, group, m, s.send_to[static_cast<size_t>(q)]);
          for (const auto* link : path(h.src, h.dst).links)
            if (link->get_sharing_policy() != sg4::Link::SharingPolicy::FATPIPE) // a flow's own bound, shared by none
              represented.insert(link);
        }
      }
  // Per link, the rotations' crossings less the representative's: zero everywhere, except on
  // `unbalanced` links (below).
  std::vector<std::pair<const sg4::Link*, int>> balance;
  std::set<const sg4::Link*> unbalanced;
  const auto add = [&balance](const sg4::Link* link, int by) {
    for (auto& [l, c] : balance)
      if (l == link) {
        c += by;
        return;
      }
    balance.emplace_back(link, by);
  };
  for (int lane = 0; lane < d; ++lane)
    for (int m = 0; m < n; ++m)
      for (int k_step = 0; k_step < p.steps; ++k_step) {
        const CollectiveStep s = a.step(op, g, bytes, lane, m, k_step);
        // Lane lane + d·places runs this step with every member moved `places` places.
        for (int places = 1; places < k; ++places) {
          const CollectiveStep t = a.step(op, g, bytes, lane + d * places, moved(m, places), k_step);
          if (t.sends != s.sends || t.recvs != s.recvs || t.bytes != s.bytes)
            return false;
          for (int q = 0; q < s.sends; ++q)
            if (t.send_to[static_cast<size_t>(q)] != moved(s.send_to[static_cast<size_t>(q)], places))
              return false;
          for (int q = 0; q < s.recvs; ++q)
            if (t.recv_from[static_cast<size_t>(q)] != moved(s.recv_from[static_cast<size_t>(q)], places))
              return false;
        }
        for (int q = 0; q < s.sends && s.bytes > 0; ++q) {
          const int to  = s.send_to[static_cast<size_t>(q)];
          const Hop h   = rotated_hop(r, group, m, to);
          const Path rep = path(h.src, h.dst);
          balance.clear();
          for (const auto* link : rep.links)
            if (represented.count(link) != 0)
              add(link, -1);
          for (int places = 0; places < k; ++places) {
            const Path& own = path(ranks[static_cast<size_t>(moved(m, places))], ranks[static_cast<size_t>(moved(to, places))]);
            if (own.latency_s != rep.latency_s || own.transport_s != rep.transport_s ||
                own.bandwidth_Bps != rep.bandwidth_Bps || own.links.size() != rep.links.size())
              return false;
            for (size_t i = 0; i < own.links.size(); ++i) {
              const auto* link = own.links[i];
              if (link_bandwidth(link) != link_bandwidth(rep.links[i]) ||
                  link->get_latency() != rep.links[i]->get_latency() ||
                  link->get_sharing_policy() != rep.links[i]->get_sharing_policy())
                return false;
              if (represented.count(link) != 0)
                add(link, 1);
            }
          }
          for (const auto& [link, c] : balance)
            if (c != 0)
              unbalanced.insert(link);
        }
      }
  if (unbalanced.empty())
    return true;
  // A link the rotations load otherwise than the representatives (an uplink above whole nodes)
  // still changes nothing where it can never be what holds a flow back: where the first links of
  // the flows that cross it (every lane's and every representative's), or their last links,
  // cannot together fill it, the rates those links allow fit under it too, and max-min fairness
  // gives each flow what it gets without the link (a non-blocking fat tree's leaf uplinks: the
  // NICs below them up, and down).
  struct Ends {
    std::set<const sg4::Link*> first, last;
    bool is_end = false; // the link is a flow's first or last itself
  };
  std::unordered_map<const sg4::Link*, Ends> ends;
  const auto note = [&](const Path& route) {
    for (const auto* link : route.links)
      if (unbalanced.count(link) != 0) {
        Ends& e = ends[link];
        e.is_end = e.is_end || link == route.links.front() || link == route.links.back();
        e.first.insert(route.links.front());
        e.last.insert(route.links.back());
      }
  };
  for (int lane = 0; lane < p.lanes; ++lane)
    for (int m = 0; m < n; ++m)
      for (int k_step = 0; k_step < p.steps; ++k_step) {
        const CollectiveStep s = a.step(op, g, bytes, lane, m, k_step);
        for (int q = 0; q < s.sends && s.bytes > 0; ++q) {
          const int to = s.send_to[static_cast<size_t>(q)];
          note(path(ranks[static_cast<size_t>(m)], ranks[static_cast<size_t>(to)]));
          if (lane < d) {
            const Hop h = rotated_hop(r, group, m, to);
            note(path(h.src, h.dst));
          }
        }
      }
  // Summed smallest first, so that the sum (and a tie with the link) does not depend on where
  // the links lie in memory.
  const auto total = [](const std::set<const sg4::Link*>& links) {
    std::vector<double> bandwidths;
    for (const auto* link : links)
      bandwidths.push_back(link_bandwidth(link));
    std::sort(bandwidths.begin(), bandwidths.end());
    double sum = 0;
    for (double b : bandwidths)
      sum += b;
    return sum;
  };
  for (const auto* link : unbalanced) {
    const Ends& e = ends[link];
    if (e.is_end || link_bandwidth(link) < std::min(total(e.first), total(e.last)))
      return false;
  }
  return true;
}

} // namespace stepsim
