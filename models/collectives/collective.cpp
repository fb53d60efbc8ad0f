#include "models/collectives/collective.hpp"
#include "models/link_calibration.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace stepsim {

GroupShape group_shape(int n)
{
  std::vector<int> node(static_cast<size_t>(std::max(n, 0)));
  for (int m = 0; m < n; ++m)
    node[static_cast<size_t>(m)] = m;
  return group_shape(node);
}

GroupShape group_shape(const std::vector<int>& node, bool in_switch_reduction, int channels)
{
  GroupShape g;
  g.n = static_cast<int>(node.size());
  g.in_switch_reduction = in_switch_reduction;
  g.channels            = channels;
  std::unordered_map<int, int> index; // node id -> its position in order of first appearance
  for (int m = 0; m < g.n; ++m) {
    auto [it, fresh] = index.try_emplace(node[static_cast<size_t>(m)], static_cast<int>(g.node_members.size()));
    if (fresh)
      g.node_members.emplace_back();
    auto& members = g.node_members[static_cast<size_t>(it->second)];
    g.node_of_member.push_back(it->second);
    g.local_rank.push_back(static_cast<int>(members.size()));
    members.push_back(m);
  }
  g.per_node = g.node_members.empty() ? 0 : static_cast<int>(g.node_members[0].size());
  for (const auto& members : g.node_members)
    if (static_cast<int>(members.size()) != g.per_node)
      g.per_node = 0;
  return g;
}

double nvls_reduction(const GroupShape& g)
{
  return g.in_switch_reduction_Bps > 0 ? g.in_switch_reduction_Bps : link_efficiency().nvls_reduction_Bps;
}

GroupShape group_shape(const Group& group, const std::function<PathCost(int, int)>& path)
{
  const int n = static_cast<int>(group.ranks.size());
  GroupShape g = group.node_of_member.size() == group.ranks.size()
                     ? group_shape(group.node_of_member, group.in_switch_reduction, group.channels)
                     : group_shape(n);
  if (group.node_of_member.size() != group.ranks.size()) {
    g.in_switch_reduction = group.in_switch_reduction;
    g.channels            = group.channels;
  }
  g.in_switch_reduction_Bps = group.in_switch_reduction_Bps;
  g.in_network_reduction = group.in_network_reduction && g.nodes() > 1;
  g.full_mesh            = group.full_mesh;
  g.msccl                = group.msccl && group.full_mesh && g.nodes() == 1;
  g.nccl                 = group.nccl;
  // On full-mesh nodes the rings take different links (mesh_rings.cpp): inside one node the
  // directed rings over its members, across nodes the paths each ring takes through a node.
  if (g.full_mesh && n > 1) {
    if (g.nodes() == 1)
      g.rings = mesh_rings(n);
    else if (g.per_node > 1)
      g.node_orders = mesh_paths(g.per_node);
  }
  if (path && n > 1) {
    for (const auto& members : g.node_members)
      if (members.size() > 1 && g.intra.bandwidth_Bps <= 0)
        g.intra = path(members[0], members[1]);
    if (g.nodes() > 1)
      g.inter = path(g.node_members[0][0], g.node_members[1][0]);
    // A group on one node of direct links: the rings NCCL finds on them (at most 8 members, the
    // largest node of direct links stepsim has, the DGX-1; the search is exhaustive).
    if (g.nodes() == 1 && n >= 3 && n <= 8 && !g.full_mesh) {
      std::vector<std::vector<PathCost>> cost(static_cast<size_t>(n), std::vector<PathCost>(static_cast<size_t>(n)));
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b)
          if (a != b)
            cost[static_cast<size_t>(a)][static_cast<size_t>(b)] = path(a, b);
      g.rings = find_rings(cost);
    }
    // Across nodes of such links, each ring lane crosses a node along direct links, as NCCL's
    // search lays its rings (src/graph/search.cc: a ring enters a node by one GPU, visits every
    // GPU of it over NVLink and leaves by another): lane c enters by local rank c and follows one
    // of the rings find_rings finds on one node (each both ways, one after another), leaving by
    // the member before c on it. Going up the local ranks instead sent a DGX-1's 3 -> 4 and 7 -> 0,
    // which no NVLink joins, over two hops that other lanes' flows also took: two DGX-1 on 4 x
    // EDR gave 25.7 GB/s of all-reduce bus bandwidth, where NCCL's maintainer gives 48 with its
    // four NICs (https://github.com/NVIDIA/nccl-tests/issues/29). The rings also mark the links
    // as direct, so that flows to different peers leave by different links (per peer).
    const int k = g.per_node;
    if (g.nodes() > 1 && k >= 3 && k <= 8 && !g.full_mesh) {
      const auto& node = g.node_members[0];
      std::vector<std::vector<PathCost>> cost(static_cast<size_t>(k), std::vector<PathCost>(static_cast<size_t>(k)));
      for (int a = 0; a < k; ++a)
        for (int b = 0; b < k; ++b)
          if (a != b)
            cost[static_cast<size_t>(a)][static_cast<size_t>(b)] = path(node[static_cast<size_t>(a)], node[static_cast<size_t>(b)]);
      const auto rings = find_rings(cost);
      if (!rings.empty()) {
        std::vector<std::vector<int>> directed;
        for (const auto& r : rings) {
          directed.push_back(r);
          directed.emplace_back(r.rbegin(), r.rend());
        }
        // Each member leaves by exactly one lane, as it enters by one: the lanes' exits a
        // permutation, so that every NIC sends as many lanes as it receives, whichever GPUs
        // share it (two to a NIC on a DGX-1). Lane c's exit on directed ring d is the member
        // before c; the search takes, lane by lane, the least used ring whose exit is still free.
        const size_t D = directed.size();
        auto exit_of   = [&](size_t d, int c) {
          const auto& cycle = directed[d];
          const auto at     = std::find(cycle.begin(), cycle.end(), c) - cycle.begin();
          return cycle[static_cast<size_t>((at + k - 1) % k)];
        };
        std::vector<size_t> pick(static_cast<size_t>(k), 0), uses(D, 0);
        std::vector<char> taken(static_cast<size_t>(k), 0);
        std::function<bool(int)> assign = [&](int c) {
          if (c == k)
            return true;
          std::vector<size_t> order(D);
          for (size_t d = 0; d < D; ++d)
            order[d] = (static_cast<size_t>(c) + d) % D;
          std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return uses[x] < uses[y]; });
          for (size_t d : order) {
            const int e = exit_of(d, c);
            if (taken[static_cast<size_t>(e)])
              continue;
            taken[static_cast<size_t>(e)] = 1;
            ++uses[d];
            pick[static_cast<size_t>(c)] = d;
            if (assign(c + 1))
              return true;
            --uses[d];
            taken[static_cast<size_t>(e)] = 0;
          }
          return false;
        };
        if (!assign(0)) // no such permutation: lane c on ring c, as they come
          for (int c = 0; c < k; ++c)
            pick[static_cast<size_t>(c)] = static_cast<size_t>(c) % D;
        for (int c = 0; c < k; ++c) {
          const auto& cycle = directed[pick[static_cast<size_t>(c)]];
          const auto at     = std::find(cycle.begin(), cycle.end(), c) - cycle.begin();
          std::vector<int> order;
          for (int i = 0; i < k; ++i)
            order.push_back(cycle[static_cast<size_t>((at + i) % k)]);
          g.node_orders.push_back(std::move(order));
        }
        g.rings = rings;
      }
    }
  }
  return g;
}

namespace {

// The exhaustive search of find_rings: rings (as undirected cycles through member 0, each listed
// once) chosen one after another while links remain, keeping the largest set found; stops at the
// bound (every member's links used) or after a budget of search steps.
struct RingSearch {
  int n = 0;
  std::vector<std::vector<int>> links; // links left between two members (both directions)
  std::vector<std::vector<int>> chosen, best;
  int bound   = 0;
  long budget = 200000;

  void cycles(std::vector<int>& path, std::vector<char>& used, std::vector<std::vector<int>>& out)
  {
    if (--budget < 0)
      return;
    const int last = path.back();
    if (static_cast<int>(path.size()) == n) {
      // Each cycle once: the direction whose second member is the lower.
      if (links[static_cast<size_t>(last)][0] > 0 && path[1] < path.back())
        out.push_back(path);
      return;
    }
    for (int m = 1; m < n; ++m)
      if (!used[static_cast<size_t>(m)] && links[static_cast<size_t>(last)][static_cast<size_t>(m)] > 0) {
        used[static_cast<size_t>(m)] = 1;
        path.push_back(m);
        cycles(path, used, out);
        path.pop_back();
        used[static_cast<size_t>(m)] = 0;
      }
  }

  void take(const std::vector<int>& c, int delta)
  {
    for (int i = 0; i < n; ++i) {
      const int a = c[static_cast<size_t>(i)], b = c[static_cast<size_t>((i + 1) % n)];
      links[static_cast<size_t>(a)][static_cast<size_t>(b)] += delta;
      links[static_cast<size_t>(b)][static_cast<size_t>(a)] += delta;
    }
  }

  void grow()
  {
    if (chosen.size() > best.size())
      best = chosen;
    if (static_cast<int>(best.size()) >= bound || budget < 0)
      return;
    std::vector<std::vector<int>> found;
    std::vector<int> path{0};
    std::vector<char> used(static_cast<size_t>(n), 0);
    used[0] = 1;
    cycles(path, used, found);
    for (const auto& c : found) {
      take(c, -1);
      chosen.push_back(c);
      grow();
      chosen.pop_back();
      take(c, +1);
      if (static_cast<int>(best.size()) >= bound || budget < 0)
        return;
    }
  }
};

} // namespace

std::vector<std::vector<int>> find_rings(const std::vector<std::vector<PathCost>>& cost)
{
  const int n = static_cast<int>(cost.size());
  if (n < 3)
    return {};
  double lowest = std::numeric_limits<double>::infinity(), narrowest = std::numeric_limits<double>::infinity();
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b)
        lowest = std::min(lowest, cost[static_cast<size_t>(a)][static_cast<size_t>(b)].latency_s);
  // Direct: within a tenth of the lowest latency (a pair routed through another GPU has two hops).
  auto direct = [&](int a, int b) {
    return cost[static_cast<size_t>(a)][static_cast<size_t>(b)].latency_s <= lowest * 1.1 + 1e-12;
  };
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b && direct(a, b))
        narrowest = std::min(narrowest, cost[static_cast<size_t>(a)][static_cast<size_t>(b)].bandwidth_Bps);
  if (!(narrowest > 0) || !std::isfinite(narrowest))
    return {};
  RingSearch search;
  search.n = n;
  search.links.assign(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), 0));
  bool alike = true;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) {
        const auto& c = cost[static_cast<size_t>(a)][static_cast<size_t>(b)];
        const int links = direct(a, b) ? static_cast<int>(std::lround(c.bandwidth_Bps / narrowest)) : 0;
        search.links[static_cast<size_t>(a)][static_cast<size_t>(b)] = links;
        alike = alike && links == 1;
      }
  if (alike)
    return {};
  search.bound = std::numeric_limits<int>::max();
  for (int a = 0; a < n; ++a) {
    int sum = 0;
    for (int b = 0; b < n; ++b)
      sum += search.links[static_cast<size_t>(a)][static_cast<size_t>(b)];
    search.bound = std::min(search.bound, sum / 2);
  }
  if (search.bound == 0)
    return {};
  search.grow();
  std::vector<std::vector<int>> rings;
  for (const auto& c : search.best) {
    rings.push_back(c);
    std::vector<int> back{c[0]};
    back.insert(back.end(), c.rbegin(), c.rend() - 1);
    rings.push_back(back);
  }
  return rings;
}

const CollectiveAlgorithm& concrete_algorithm(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g,
                                              double bytes)
{
  return a.pick ? a.pick(op, g, bytes) : a;
}

void follow_pick(CollectiveAlgorithm& c)
{
  c.lanes = [pick = c.pick](CollectiveOp op, const GroupShape& g, double bytes) {
    return lanes_of(pick(op, g, bytes), op, g, bytes);
  };
  c.steps = [pick = c.pick](CollectiveOp op, const GroupShape& g, double bytes) {
    return pick(op, g, bytes).steps(op, g, bytes);
  };
  c.step = [pick = c.pick](CollectiveOp op, const GroupShape& g, double bytes, int lane, int member, int step) {
    return pick(op, g, bytes).step(op, g, bytes, lane, member, step);
  };
}

int lanes_of(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes)
{
  return a.lanes ? std::max(1, a.lanes(op, g, bytes)) : 1;
}

namespace {

double bytes_moved(const CollectiveAlgorithm& a0, CollectiveOp op, const GroupShape& g, double bytes, int member,
                   bool sent)
{
  const auto& a   = concrete_algorithm(a0, op, g, bytes);
  const int lanes = lanes_of(a, op, g, bytes);
  const int steps = a.steps(op, g, bytes);
  double total    = 0;
  for (int lane = 0; lane < lanes; ++lane)
    for (int k = 0; k < steps; ++k) {
      CollectiveStep s = a.step(op, g, bytes, lane, member, k);
      if (sent) {
        total += s.sends * s.bytes;
        continue;
      }
      // What arrives is what the peers send: find each receive's matching send by its bytes.
      for (int r = 0; r < s.recvs; ++r) {
        // The i-th receive from a peer is the i-th send of that peer to this member.
        int index = 0;
        for (int j = 0; j < k; ++j) {
          CollectiveStep earlier = a.step(op, g, bytes, lane, member, j);
          for (int q = 0; q < earlier.recvs; ++q)
            index += earlier.recv_from[static_cast<size_t>(q)] == s.recv_from[static_cast<size_t>(r)] ? 1 : 0;
        }
        for (int q = 0; q < r; ++q)
          index += s.recv_from[static_cast<size_t>(q)] == s.recv_from[static_cast<size_t>(r)] ? 1 : 0;
        const int peer = s.recv_from[static_cast<size_t>(r)];
        for (int j = 0, seen = 0; j < steps; ++j) {
          CollectiveStep ps = a.step(op, g, bytes, lane, peer, j);
          bool found        = false;
          for (int q = 0; q < ps.sends && !found; ++q)
            if (ps.send_to[static_cast<size_t>(q)] == member && seen++ == index) {
              total += ps.bytes;
              found = true;
            }
          if (found)
            break;
        }
      }
    }
  return total;
}

} // namespace

double bytes_sent_per_member(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes,
                             int member)
{
  return bytes_moved(a, op, g, bytes, member, true);
}

double bytes_sent_per_member(const CollectiveAlgorithm& a, CollectiveOp op, int n, double bytes)
{
  return bytes_moved(a, op, group_shape(n), bytes, 0, true);
}

double bytes_received_per_member(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes,
                                 int member)
{
  return bytes_moved(a, op, g, bytes, member, false);
}

UplinkLoad::UplinkLoad(const GroupShape& g, int steps, bool on)
    : g_(&g), uplinks_(on && g.uplinks_of_member.size() == static_cast<size_t>(g.n) ? g.uplink_Bps.size() : 0)
{
  const size_t slots = static_cast<size_t>(std::max(steps, 0)) * uplinks_ * 2;
  if (slots <= kDense)
    dense_.assign(slots, 0);
}

void UplinkLoad::add(int from, int to, int k)
{
  crossed(from, to, [&](size_t u, size_t d) {
    const size_t i = index(k, u, d);
    if (i < dense_.size())
      ++dense_[i];
    else
      ++sparse_[i];
  });
}

double UplinkLoad::seconds_per_byte(int from, int to, int k) const
{
  double worst = 0;
  crossed(from, to, [&](size_t u, size_t d) {
    const size_t i  = index(k, u, d);
    long long flows = 0;
    if (i < dense_.size())
      flows = dense_[i];
    else if (auto at = sparse_.find(i); at != sparse_.end())
      flows = at->second;
    worst = std::max(worst, static_cast<double>(flows) / g_->uplink_Bps[u]);
  });
  return worst;
}

namespace {

// Members that share a NIC (GroupShape::nic_of_member) share its flows across nodes: each one's
// count of flows it starts (receives) across nodes, `counts[m][1]` ([m][3]), becomes its NIC's.
template <typename Counts>
void share_nics(const GroupShape& g, std::vector<Counts>& counts, size_t per_member = 1)
{
  if (g.nic_of_member.size() != static_cast<size_t>(g.n))
    return;
  using Count = typename Counts::value_type;
  const Count most = std::numeric_limits<Count>::max();
  for (size_t slot = 0; slot < per_member; ++slot) {
    std::unordered_map<int, std::array<long long, 2>> on_nic;
    for (size_t m = 0; m < static_cast<size_t>(g.n); ++m) {
      auto& nic = on_nic[g.nic_of_member[m]];
      nic[0] += counts[m * per_member + slot][1];
      nic[1] += counts[m * per_member + slot][3];
    }
    for (size_t m = 0; m < static_cast<size_t>(g.n); ++m) {
      const auto& nic                     = on_nic[g.nic_of_member[m]];
      counts[m * per_member + slot][1] = static_cast<Count>(std::min<long long>(nic[0], most));
      counts[m * per_member + slot][3] = static_cast<Count>(std::min<long long>(nic[1], most));
    }
  }
}

// uncontended_seconds of an algorithm whose members each send to one peer and receive from one,
// the same bytes at every step (CollectiveAlgorithm::uniform_steps): member m's step costs the
// same c(m) every time, shared as the general walk below shares it (the flows of one kind that
// the member starts, and that its peer receives, in the step over all lanes). Its step k starts
// when its own step k-1 and its predecessor's have ended, S(m,k) = max(S(m,k-1) + c(m),
// S(pred,k-1) + c(pred)), so the longest path stays on the slowest member: K · max c(m), the
// walk's result in n + lanes·n steps instead of lanes·n·K (a ring of 16,384 members has 32,766).
double uniform_steps_seconds(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes, int lanes,
                             int K, const std::function<PathCost(int, int)>& path, bool shared_uplinks)
{
  UplinkLoad uplinks(g, 1, shared_uplinks); // every step alike: the first stands for all
  const int n    = g.n;
  auto across    = [&g](int x, int y) {
    return g.node_of_member[static_cast<size_t>(x)] != g.node_of_member[static_cast<size_t>(y)] ? 1 : 0;
  };
  std::vector<CollectiveStep> first(static_cast<size_t>(lanes) * static_cast<size_t>(n));
  std::vector<std::array<int, 4>> share(static_cast<size_t>(n), {0, 0, 0, 0});
  std::unordered_map<long long, int> to_peer; // sends of a member to one peer over all lanes
  const bool per_peer = !g.rings.empty() || g.full_mesh;
  for (int lane = 0; lane < lanes; ++lane)
    for (int m = 0; m < n; ++m) {
      const CollectiveStep s = first[static_cast<size_t>(lane) * static_cast<size_t>(n) + static_cast<size_t>(m)] =
          a.step(op, g, bytes, lane, m, 0);
      if (s.sends != 1 || s.recvs != 1)
        throw std::logic_error("collective algorithm " + a.name + " declares uniform steps but member " +
                               std::to_string(m) + " does not send to one peer and receive from one");
      ++share[static_cast<size_t>(m)][static_cast<size_t>(across(m, s.send_to[0]))];
      ++share[static_cast<size_t>(m)][2 + static_cast<size_t>(across(m, s.recv_from[0]))];
      if (per_peer)
        ++to_peer[static_cast<long long>(m) * n + s.send_to[0]];
      uplinks.add(m, s.send_to[0], 0);
    }
  share_nics(g, share);
  // A ring pays a NIC's transport latency on its first step only (PathCost::transport_s).
  const bool transport_once = a.nccl == NcclAlgorithm::Ring;
  double end = 0;
  for (int lane = 0; lane < lanes; ++lane) {
    double slowest = 0, slowest_after = 0;
    for (int m = 0; m < n; ++m) {
      const CollectiveStep& s = first[static_cast<size_t>(lane) * static_cast<size_t>(n) + static_cast<size_t>(m)];
      const int to            = s.send_to[0];
      const size_t kind       = static_cast<size_t>(across(m, to));
      int sharing = std::max({1, share[static_cast<size_t>(m)][kind], share[static_cast<size_t>(to)][2 + kind]});
      if (per_peer && kind == 0)
        sharing = std::max(1, to_peer[static_cast<long long>(m) * n + to]);
      const PathCost p = path(m, to);
      double wire      = p.bandwidth_Bps > 0 ? s.bytes * sharing / p.bandwidth_Bps : 0.0;
      if (!uplinks.empty())
        wire = std::max(wire, s.bytes * uplinks.seconds_per_byte(m, to, 0));
      slowest       = std::max(slowest, p.latency_s + wire);
      slowest_after = std::max(slowest_after, (transport_once ? std::max(0.0, p.latency_s - p.transport_s) : p.latency_s) + wire);
    }
    // Added step by step, as the walk adds them, so that the sum rounds as it does.
    const int lane_K = a.lane_steps ? std::min(K, a.lane_steps(op, g, bytes, lane)) : K;
    double lane_end  = 0;
    for (int k = 0; k < lane_K; ++k)
      lane_end += k == 0 ? slowest : slowest_after;
    end = std::max(end, lane_end);
  }
  return end;
}

} // namespace

double uncontended_seconds(const CollectiveAlgorithm& a0, CollectiveOp op, const GroupShape& g, double bytes,
                           const std::function<PathCost(int, int)>& path, bool paths_by_node, bool shared_uplinks)
{
  const auto& a   = concrete_algorithm(a0, op, g, bytes);
  const int n     = g.n;
  const int lanes = lanes_of(a, op, g, bytes);
  const int K     = n > 1 ? a.steps(op, g, bytes) : 0;
  if (K == 0)
    return 0;
  if ((a.uniform_steps && a.uniform_steps(op, g)) || (a.steps_alike && a.steps_alike(op, g)))
    return uniform_steps_seconds(a, op, g, bytes, lanes, K, path, shared_uplinks);
  const auto slot = [K](int m, int k) { return static_cast<size_t>(m) * static_cast<size_t>(K) + static_cast<size_t>(k); };
  auto across     = [&g](int x, int y) {
    return g.node_of_member[static_cast<size_t>(x)] != g.node_of_member[static_cast<size_t>(y)] ? 1 : 0;
  };
  // Flows a member starts (receives) in one step, over all lanes, inside its node and across:
  // those of one kind leave (enter) through the same link and share it.
  std::vector<std::array<uint8_t, 4>> share(static_cast<size_t>(n) * static_cast<size_t>(K), {0, 0, 0, 0});
  // On a node of direct links (g.rings, a full mesh) flows to different peers leave by different
  // links: only those to the same peer share one (counted per sender, step and peer).
  std::unordered_map<long long, int> to_peer;
  const bool per_peer = !g.rings.empty() || g.full_mesh;
  auto peer_key = [n, K](int m, int k, int peer) { return (static_cast<long long>(m) * K + k) * n + peer; };
  // Lanes that rotate the first `walked` inside every node take as long as those (a tree over
  // 1,024 GPUs: 2 lanes walked of 16) where each rotated pair's path costs what the pair it
  // rotates costs: always on paths by node; on measured paths (a platform's), checked pair by
  // pair. Over all rotations a member plays every place of its node once, so the flows it starts
  // over all lanes are its node's over the walked ones.
  int walked       = lanes;
  bool check_paths = false;
  if (a.rotated_lanes && !per_peer && g.per_node > 1) {
    const int d = a.rotated_lanes(op, g, bytes);
    if (d > 0 && d < lanes && lanes == d * g.per_node) {
      walked      = d;
      check_paths = !paths_by_node;
    }
  }
  // The walked lanes' receivers of each member, to check: a member sends to the same few peers
  // (a tree node's parent, children and chain) step after step, so each is kept once.
  std::vector<std::vector<int>> peers;
  auto count_flows = [&](int counted) {
    for (auto& s : share)
      s = {0, 0, 0, 0};
    for (int lane = 0; lane < counted; ++lane)
      for (int m = 0; m < n; ++m)
        for (int k = 0; k < K; ++k) {
          const CollectiveStep s = a.step(op, g, bytes, lane, m, k);
          for (int q = 0; q < s.sends; ++q) {
            const int to = s.send_to[static_cast<size_t>(q)];
            ++share[slot(m, k)][static_cast<size_t>(across(m, to))];
            if (per_peer)
              ++to_peer[peer_key(m, k, to)];
            if (check_paths) {
              auto& of = peers[static_cast<size_t>(m)];
              if (std::find(of.begin(), of.end(), to) == of.end())
                of.push_back(to);
            }
          }
          for (int q = 0; q < s.recvs; ++q)
            ++share[slot(m, k)][2 + static_cast<size_t>(across(m, s.recv_from[static_cast<size_t>(q)]))];
        }
  };
  if (check_paths)
    peers.resize(static_cast<size_t>(n));
  count_flows(walked);
  // Member m's place in its node moved r places on (a rotated lane's member for m's).
  auto rotated = [&g](int m, int r) {
    const auto& members = g.node_members[static_cast<size_t>(g.node_of_member[static_cast<size_t>(m)])];
    return members[static_cast<size_t>((g.local_rank[static_cast<size_t>(m)] + r) % g.per_node)];
  };
  if (check_paths) {
    bool alike = true;
    for (int x = 0; x < n && alike; ++x)
      for (size_t i = 0; i < peers[static_cast<size_t>(x)].size() && alike; ++i) {
        const int y      = peers[static_cast<size_t>(x)][i];
        const PathCost p = path(x, y);
        for (int r = 1; r < g.per_node && alike; ++r) {
          const PathCost q = path(rotated(x, r), rotated(y, r));
          alike            = q.latency_s == p.latency_s && q.bandwidth_Bps == p.bandwidth_Bps;
        }
      }
    if (!alike) {
      walked      = lanes;
      check_paths = false;
      count_flows(lanes);
    }
  }
  if (walked < lanes)
    for (const auto& members : g.node_members)
      for (int k = 0; k < K; ++k) {
        std::array<uint8_t, 4> node{0, 0, 0, 0};
        for (int m : members)
          for (size_t i = 0; i < 4; ++i)
            node[i] = static_cast<uint8_t>(node[i] + share[slot(m, k)][i]);
        for (int m : members)
          share[slot(m, k)] = node;
      }
  share_nics(g, share, static_cast<size_t>(K));
  // The flows of each step over the fabric's thinned uplinks, every lane's: the rotations of a
  // walked lane send from other members of the same nodes, behind other uplinks on a rail fabric.
  UplinkLoad uplinks(g, K, shared_uplinks);
  const int rotations = walked < lanes ? g.per_node : 1;
  if (!uplinks.empty())
    for (int lane = 0; lane < walked; ++lane)
      for (int m = 0; m < n; ++m)
        for (int k = 0; k < K; ++k) {
          const CollectiveStep s = a.step(op, g, bytes, lane, m, k);
          for (int q = 0; q < s.sends; ++q)
            for (int r = 0; r < rotations; ++r)
              uplinks.add(r == 0 ? m : rotated(m, r), r == 0 ? s.send_to[static_cast<size_t>(q)]
                                                              : rotated(s.send_to[static_cast<size_t>(q)], r), k);
        }
  double end = 0;
  // One lane's steps, each member's each step asked of the algorithm once (the walk below reads
  // each two or three times; a tree over 1,024 GPUs has 16 lanes of 130 steps).
  std::vector<CollectiveStep> lane_steps(static_cast<size_t>(n) * static_cast<size_t>(K));
  // Per receiver, each member it receives from on the lane, in order of member (a ring's one, a
  // tree node's parent, children and chain; all the others in an all-to-all): the receiver's
  // steps that take its messages, when they arrive (in send order), and how many were sent and
  // taken. Found by bisection, not hashed: on a tree over 1,024 GPUs hashing every pair on every
  // step was most of an `auto` pick.
  struct Incoming {
    int from = 0;
    std::vector<int> steps;
    std::vector<double> arrivals;
    int sent = 0, consumed = 0;
  };
  std::vector<std::vector<Incoming>> incoming(static_cast<size_t>(n));
  auto incoming_of = [&incoming](int to, int from) -> Incoming& {
    auto& list = incoming[static_cast<size_t>(to)];
    auto at    = std::lower_bound(list.begin(), list.end(), from,
                                  [](const Incoming& in, int member) { return in.from < member; });
    if (at == list.end() || at->from != from)
      at = list.insert(at, Incoming{from, {}, {}, 0, 0});
    return *at;
  };
  const int slots = std::max(1, a.pipeline_slots);
  // Flows inside a node on pipelined lanes that put a member at every place of a chain
  // (CollectiveAlgorithm::chain_places: the tree's rotated chains) are staggered in time: a chain
  // forwards a chunk one hop after another, so the member's sends at place p leave about one hop
  // later than those at place p + 1. With C chunks per phase each lane keeps the member's link
  // busy for C of the chain's k hops, and only about share × min(1, C / k) of the flows counted
  // for a step are on the link at once. (Across nodes a member sends only where it heads its
  // chain: those flows are not staggered.) Counting them all as concurrent made a tree of one or
  // two chunks over four H100 nodes 44 % slower than its flows at 512 KiB (114 against 79 us;
  // now 82), and `auto` picked NVLS-tree there.
  double inside_concurrency = 1;
  if (slots > 1 && a.chain_places && !per_peer) {
    const int places = a.chain_places(op, g, bytes);
    if (places > 1) {
      const int chunks   = std::max(1, (op == CollectiveOp::AllReduce ? K / 2 : K) - 1);
      inside_concurrency = std::min(1.0, static_cast<double>(chunks) / places);
    }
  }
  std::vector<double> delivered, link_free, started;
  for (int lane = 0; lane < walked; ++lane) {
    for (int m = 0; m < n; ++m)
      for (int k = 0; k < K; ++k)
        lane_steps[slot(m, k)] = a.step(op, g, bytes, lane, m, k);
    // For each pair, the steps of the receiver that take its messages, in order.
    for (auto& list : incoming)
      list.clear();
    for (int m = 0; m < n; ++m)
      for (int k = 0; k < K; ++k) {
        const CollectiveStep& s = lane_steps[slot(m, k)];
        for (int r = 0; r < s.recvs; ++r)
          incoming_of(m, s.recv_from[static_cast<size_t>(r)]).steps.push_back(k);
      }
    std::vector<int> next(static_cast<size_t>(n), 0);
    std::vector<double> ready(static_cast<size_t>(n), 0.0); // when the member's previous step's sends ended
    // With several slots (a.pipeline_slots): when each step's sends had all arrived, when the
    // member's link is next free, and when its previous step started.
    if (slots > 1) {
      delivered.assign(static_cast<size_t>(n) * static_cast<size_t>(K), 0.0);
      link_free.assign(static_cast<size_t>(n), 0.0);
      started.assign(static_cast<size_t>(n), 0.0);
    }
    int done = 0;
    while (done < n) {
      bool progress = false;
      for (int m = 0; m < n; ++m) {
        int& k = next[static_cast<size_t>(m)];
        while (k <= K) {
          // The receives of step k-1 must have arrived (earlier ones were checked before). With
          // several slots, the sends of step k - slots (and step k-1 must have started).
          double start = ready[static_cast<size_t>(m)];
          if (slots > 1)
            start = std::max(started[static_cast<size_t>(m)], k >= slots ? delivered[slot(m, k - slots)] : 0.0);
          bool waiting = false;
          if (k > 0) {
            const CollectiveStep& prev = lane_steps[slot(m, k - 1)];
            for (int r = 0; r < prev.recvs && !waiting; ++r) {
              const int from = prev.recv_from[static_cast<size_t>(r)];
              int same       = 0; // earlier receives from the same peer in this step
              for (int q = 0; q < r; ++q)
                same += prev.recv_from[static_cast<size_t>(q)] == from ? 1 : 0;
              const Incoming& in = incoming_of(m, from);
              const auto& times  = in.arrivals;
              const auto index   = static_cast<size_t>(in.consumed + same);
              if (times.size() <= index)
                waiting = true;
              else
                start = std::max(start, times[index]);
            }
            if (waiting)
              break;
            for (int r = 0; r < prev.recvs; ++r)
              ++incoming_of(m, prev.recv_from[static_cast<size_t>(r)]).consumed;
          }
          if (k == K) {
            if (slots > 1) // the member is done when the sends still in flight have arrived
              for (int j = std::max(0, K - slots); j < K; ++j)
                start = std::max(start, delivered[slot(m, j)]);
            end = std::max(end, start);
            ++k;
            ++done;
            progress = true;
            break;
          }
          const CollectiveStep& s = lane_steps[slot(m, k)];
          double finished         = start;
          // With several slots the step's sends leave once the link has sent the steps before.
          const double leave = slots > 1 ? std::max(start, link_free[static_cast<size_t>(m)]) : start;
          for (int q = 0; q < s.sends; ++q) {
            const int to         = s.send_to[static_cast<size_t>(q)];
            Incoming& in         = incoming_of(to, m);
            const int index      = in.sent++;
            const auto& steps_of = in.steps;
            const size_t kind    = static_cast<size_t>(across(m, to));
            int sharing          = std::max<int>(1, share[slot(m, k)][kind]);
            if (index < static_cast<int>(steps_of.size()))
              sharing = std::max<int>(sharing, share[slot(to, steps_of[static_cast<size_t>(index)])][2 + kind]);
            if (per_peer && kind == 0)
              sharing = std::max(1, to_peer[peer_key(m, k, to)]);
            const PathCost p = path(m, to);
            const double flows = kind == 0 ? std::max(1.0, sharing * inside_concurrency) : sharing;
            double wire        = p.bandwidth_Bps > 0 ? s.bytes * flows / p.bandwidth_Bps : 0.0;
            if (!uplinks.empty() && kind == 1) { // the walked lane stands for its rotations: the slowest
              double per_byte = 0;
              for (int r = 0; r < rotations; ++r)
                per_byte = std::max(per_byte, uplinks.seconds_per_byte(r == 0 ? m : rotated(m, r),
                                                                       r == 0 ? to : rotated(to, r), k));
              wire = std::max(wire, s.bytes * per_byte);
            }
            double t          = start + p.latency_s + wire;
            if (slots > 1) {
              t = leave + wire + p.latency_s;
              link_free[static_cast<size_t>(m)] = std::max(link_free[static_cast<size_t>(m)], leave + wire);
            }
            in.arrivals.push_back(t);
            finished = std::max(finished, t);
          }
          ready[static_cast<size_t>(m)] = finished;
          if (slots > 1) {
            delivered[slot(m, k)]         = finished;
            started[static_cast<size_t>(m)] = start;
          }
          ++k;
          progress = true;
        }
      }
      if (!progress)
        throw std::logic_error("collective algorithm " + a.name + ": the steps of " + collective_name(op) +
                               " wait for each other (a receive no member sends)");
    }
  }
  return end;
}

int pipeline_chunks(double lane_bytes)
{
  constexpr double kSlotBytes = 512.0 * 1024; // NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8
  constexpr int kMaxChunks    = 64;           // (depth-1)/64 of fill: under 15 % on 1,024 nodes
  if (!(lane_bytes > 0))
    return 1;
  return static_cast<int>(std::clamp(std::ceil(lane_bytes / kSlotBytes), 1.0, double(kMaxChunks)));
}

int flow_slots(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes)
{
  if (a.pipeline_slots <= 1 || g.n <= 1)
    return 1;
  const int steps = a.steps(op, g, bytes);
  if (steps < 2)
    return 1;
  // A chunk's time on a link: its bytes times the flows a member starts or takes in one step
  // (a tree node sends to, or receives from, two children at once), at the first and last steps
  // of lane 0 (a tree's reduce and its broadcast).
  double chunk = 0;
  int fan      = 1;
  for (int k : {1, steps - 1})
    for (int m = 0; m < g.n; ++m) {
      const CollectiveStep s = a.step(op, g, bytes, 0, m, k);
      chunk                  = std::max(chunk, s.bytes);
      fan                    = std::max({fan, s.sends, s.recvs});
    }
  if (!(chunk > 0))
    return 1;
  // Per phase (an all-reduce has two: up and down) C chunks cross H hops of each path kind. W
  // fairly shared slots cost each chunk α/W of latency and each hop W·t of fill:
  // C·α/W + H·W·t, least at W = sqrt(C·α / (H·t)).
  const double C = op == CollectiveOp::AllReduce ? steps / 2.0 : steps;
  int height     = 0;
  while ((1 << height) < g.nodes())
    ++height;
  int chain = std::max(1, g.per_node);
  if (g.per_node == 0)
    for (const auto& members : g.node_members)
      chain = std::max(chain, static_cast<int>(members.size()));
  int slots = 1;
  const std::pair<PathCost, int> kinds[] = {{g.intra, chain - 1}, {g.inter, height}};
  for (const auto& [p, hops] : kinds)
    if (hops > 0 && p.latency_s > 0 && p.bandwidth_Bps > 0) {
      const double t = chunk * fan / p.bandwidth_Bps;
      slots          = std::max(slots, static_cast<int>(std::lround(std::sqrt(C * p.latency_s / (hops * t)))));
    }
  return std::min(slots, a.pipeline_slots);
}

CollectiveAlgorithm collective_choice(const std::string& all, const std::map<std::string, std::string>& per_op,
                                      const std::string& path)
{
  const CollectiveAlgorithm& base = CollectiveRegistry::get(all, path);
  if (per_op.empty())
    return base;
  constexpr CollectiveOp kOps[] = {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
                                   CollectiveOp::AllToAll,  CollectiveOp::Broadcast, CollectiveOp::Reduce};
  std::array<const CollectiveAlgorithm*, std::size(kOps)> chosen{};
  chosen.fill(&base);
  std::string names;
  for (CollectiveOp op : kOps)
    names += std::string(names.empty() ? "" : ", ") + "\"" + collective_name(op) + "\"";
  std::vector<std::string> problems;
  for (const auto& entry : per_op) {
    // Named copies, not a structured binding: clang before 16 cannot capture a binding in a
    // lambda, and `make fuzz` builds with clang.
    const std::string& type = entry.first;
    const std::string& name = entry.second;
    const CollectiveOp* op = std::find_if(std::begin(kOps), std::end(kOps),
                                          [&](CollectiveOp o) { return type == collective_name(o); });
    if (op == std::end(kOps)) {
      problems.push_back(fmt::format("{}.{}: unknown collective type; expected one of {}", path, type, names));
      continue;
    }
    try {
      chosen[static_cast<size_t>(*op)] = &CollectiveRegistry::get(name, path + "." + type);
    } catch (const InputError& e) {
      for (const auto& p : e.problems())
        problems.push_back(p);
    }
  }
  if (!problems.empty())
    throw InputError(problems);
  CollectiveAlgorithm c;
  c.name = "per type";
  c.pick = [chosen](CollectiveOp op, const GroupShape& g, double bytes) -> const CollectiveAlgorithm& {
    return concrete_algorithm(*chosen[static_cast<size_t>(op)], op, g, bytes);
  };
  follow_pick(c);
  c.candidates = [chosen](CollectiveOp op, const GroupShape& g) {
    const CollectiveAlgorithm* a = chosen[static_cast<size_t>(op)];
    return a->candidates ? a->candidates(op, g) : std::vector<const CollectiveAlgorithm*>{a};
  };
  return c;
}

} // namespace stepsim
