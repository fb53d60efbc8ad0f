#include "sim/engine/graph_check.hpp"

#include <boost/graph/depth_first_search.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

namespace stepsim {

namespace {

const char* kind_name(TaskKind k)
{
  switch (k) {
  case TaskKind::Compute: return "compute";
  case TaskKind::Send: return "send";
  case TaskKind::Recv: return "receive";
  case TaskKind::Collective: return "collective";
  case TaskKind::HostCopy: return "host copy";
  }
  return "task";
}

std::string join(const std::vector<std::string>& lines)
{
  std::string out;
  for (const auto& l : lines)
    out += (out.empty() ? "" : "\n") + l;
  return out;
}

// Records the first back edge the depth-first search meets: its target is on the current path, so
// the edge closes a cycle.
struct BackEdgeFinder : boost::default_dfs_visitor {
  std::pair<TaskId, TaskId>* found;
  bool* any;
  void back_edge(TaskGraph::edge_descriptor e, const TaskGraph& g) const
  {
    if (!*any) {
      *found = {boost::source(e, g), boost::target(e, g)};
      *any   = true;
    }
  }
};

// A send and its receive are one rendezvous: neither completes before both sides are posted. The
// workload-wide graph merges each matched pair into one node so that a cycle through two ranks
// (rank 0 receives before it sends, rank 1 the same) shows as a cycle.
class GlobalGraph {
public:
  explicit GlobalGraph(const Workload& w) : w_(w)
  {
    offset_.push_back(0);
    for (const auto& r : w.ranks)
      offset_.push_back(offset_.back() + boost::num_vertices(r.graph));
    parent_.resize(offset_.back());
    std::iota(parent_.begin(), parent_.end(), size_t{0});
  }

  size_t node(size_t rank_index, TaskId task) const { return offset_[rank_index] + task; }
  void merge(size_t a, size_t b) { parent_[find(a)] = find(b); }

  // The first cycle found, as (rank index, task) of an edge that closes it; nothing when acyclic.
  std::optional<std::pair<std::pair<size_t, TaskId>, std::pair<size_t, TaskId>>> find_cycle()
  {
    const size_t n = parent_.size();
    // Compressed adjacency over the merged nodes.
    std::vector<size_t> start(n + 1, 0);
    for (size_t ri = 0; ri < w_.ranks.size(); ++ri) {
      const auto& g = w_.ranks[ri].graph;
      for (TaskId u = 0; u < boost::num_vertices(g); ++u)
        start[find(node(ri, u)) + 1] += boost::out_degree(u, g);
    }
    std::partial_sum(start.begin(), start.end(), start.begin());
    std::vector<size_t> next(start.begin(), start.end() - 1);
    std::vector<size_t> target(start.back());
    for (size_t ri = 0; ri < w_.ranks.size(); ++ri) {
      const auto& g = w_.ranks[ri].graph;
      for (TaskId u = 0; u < boost::num_vertices(g); ++u)
        for (auto [e, end] = boost::out_edges(u, g); e != end; ++e)
          target[next[find(node(ri, u))]++] = find(node(ri, boost::target(*e, g)));
    }
    // Iterative depth-first search (graphs reach millions of tasks): 0 new, 1 on the path, 2 done.
    std::vector<uint8_t> color(n, 0);
    std::vector<std::pair<size_t, size_t>> stack; // node, next edge slot
    for (size_t root = 0; root < n; ++root) {
      if (find(root) != root || color[root] != 0)
        continue;
      stack.push_back({root, start[root]});
      color[root] = 1;
      while (!stack.empty()) {
        auto& [v, slot] = stack.back();
        if (slot == start[v + 1]) {
          color[v] = 2;
          stack.pop_back();
          continue;
        }
        size_t u = target[slot++];
        if (color[u] == 1)
          return rank_edge_between(v, u);
        if (color[u] == 0) {
          color[u] = 1;
          stack.push_back({u, start[u]});
        }
      }
    }
    return std::nullopt;
  }

private:
  // A task edge of some rank that joins merged nodes `from` and `to`, as (rank index, task) pairs.
  std::pair<std::pair<size_t, TaskId>, std::pair<size_t, TaskId>> rank_edge_between(size_t from, size_t to)
  {
    for (size_t ri = 0; ri < w_.ranks.size(); ++ri) {
      const auto& g = w_.ranks[ri].graph;
      for (TaskId u = 0; u < boost::num_vertices(g); ++u)
        for (auto [e, end] = boost::out_edges(u, g); e != end; ++e)
          if (find(node(ri, u)) == from && find(node(ri, boost::target(*e, g))) == to)
            return {{ri, u}, {ri, boost::target(*e, g)}};
    }
    return {locate(from), locate(to)};
  }

  size_t find(size_t x)
  {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x          = parent_[x];
    }
    return x;
  }
  std::pair<size_t, TaskId> locate(size_t global) const
  {
    size_t ri = static_cast<size_t>(std::upper_bound(offset_.begin(), offset_.end(), global) - offset_.begin()) - 1;
    return {ri, static_cast<TaskId>(global - offset_[ri])};
  }

  const Workload& w_;
  std::vector<size_t> offset_;
  std::vector<size_t> parent_;
};

} // namespace

GraphError::GraphError(std::vector<std::string> problems)
    : std::runtime_error(join(problems)), problems_(std::move(problems))
{
}

std::string describe_task(const TaskGraph& graph, TaskId task)
{
  const Task& t = graph[task];
  std::string what = fmt::format("{} {}", pass_name(t.pass), kind_name(t.kind));
  if (t.kind == TaskKind::Send || t.kind == TaskKind::Recv)
    what += fmt::format(" {} rank {}, tag {}", t.kind == TaskKind::Send ? "to" : "from", t.peer, t.tag);
  return fmt::format("task {} ({}, micro-batch {}, chunk {}, stream {})", task, what, t.micro_batch, t.chunk,
                     stream_name(t.stream));
}

std::vector<std::string> find_graph_problems(const Workload& w, GraphChecks checks)
{
  std::vector<std::string> problems;
  std::vector<int> simulated(static_cast<size_t>(std::max(w.world_size, 0)), -1);
  for (size_t i = 0; i < w.ranks.size(); ++i) {
    int r = w.ranks[i].rank;
    if (r < 0 || r >= w.world_size) {
      problems.push_back(fmt::format("rank {}: outside the world of {} ranks", r, w.world_size));
      return problems;
    }
    simulated[static_cast<size_t>(r)] = static_cast<int>(i);
  }

  // References and cycles inside each rank.
  for (const auto& program : w.ranks) {
    const auto& g = program.graph;
    std::vector<char> member_of(w.groups.size(), 0); // groups found to hold the rank (a rank posts thousands)
    for (TaskId v = 0; v < boost::num_vertices(g); ++v) {
      const Task& t = g[v];
      auto bad      = [&](const std::string& why) {
        problems.push_back(fmt::format("rank {}: {}: {}", program.rank, describe_task(g, v), why));
      };
      if (t.kind == TaskKind::Compute && (t.work < 0 || static_cast<size_t>(t.work) >= w.works.size()))
        bad(fmt::format("refers to work {}, but there are {}", t.work, w.works.size()));
      if ((t.kind == TaskKind::Send || t.kind == TaskKind::Recv) && (t.peer < 0 || t.peer >= w.world_size))
        bad(fmt::format("peer rank {} is outside the world of {} ranks", t.peer, w.world_size));
      if (t.kind == TaskKind::Collective) {
        if (t.group < 0 || static_cast<size_t>(t.group) >= w.groups.size()) {
          bad(fmt::format("refers to group {}, but there are {}", t.group, w.groups.size()));
        } else if (!member_of[static_cast<size_t>(t.group)]) {
          const auto& ranks = w.groups[static_cast<size_t>(t.group)].ranks;
          if (std::find(ranks.begin(), ranks.end(), program.rank) == ranks.end())
            bad(fmt::format("rank {} is not a member of group \"{}\"", program.rank,
                            w.groups[static_cast<size_t>(t.group)].name));
          else
            member_of[static_cast<size_t>(t.group)] = 1;
        }
      }
      if (!std::isfinite(t.bytes) || t.bytes < 0)
        bad(fmt::format("moves {} bytes", t.bytes));
    }
    if (checks == GraphChecks::ButCycles)
      continue;
    std::pair<TaskId, TaskId> edge{0, 0};
    bool cyclic = false;
    boost::depth_first_search(g, boost::visitor(BackEdgeFinder{{}, &edge, &cyclic}));
    if (cyclic)
      problems.push_back(fmt::format("rank {}: the task graph has a cycle: {} waits for {}, which waits for it",
                                     program.rank, describe_task(g, edge.second), describe_task(g, edge.first)));
  }
  if (!problems.empty())
    return problems;

  // Point to point between simulated ranks: each send has exactly one receive with the same
  // source, destination and tag.
  using Key = std::tuple<int, int, int>; // source, destination, tag
  struct Ends {
    std::vector<std::pair<size_t, TaskId>> sends, recvs;
  };
  std::map<Key, Ends> channels;
  for (size_t i = 0; i < w.ranks.size(); ++i) {
    const auto& g = w.ranks[i].graph;
    for (TaskId v = 0; v < boost::num_vertices(g); ++v) {
      const Task& t = g[v];
      if (t.kind != TaskKind::Send && t.kind != TaskKind::Recv)
        continue;
      if (simulated[static_cast<size_t>(t.peer)] < 0)
        continue; // the peer is represented, not simulated: the replay times this side alone
      bool send = t.kind == TaskKind::Send;
      Key key{send ? w.ranks[i].rank : t.peer, send ? t.peer : w.ranks[i].rank, t.tag};
      (send ? channels[key].sends : channels[key].recvs).push_back({i, v});
    }
  }
  std::optional<GlobalGraph> global;
  if (checks == GraphChecks::All)
    global.emplace(w);
  for (const auto& [key, ends] : channels) {
    const auto& [src, dst, tag] = key;
    for (size_t k = 0; k < std::max(ends.sends.size(), ends.recvs.size()); ++k) {
      if (k < ends.sends.size() && k < ends.recvs.size()) {
        if (global)
          global->merge(global->node(ends.sends[k].first, ends.sends[k].second),
                        global->node(ends.recvs[k].first, ends.recvs[k].second));
        continue;
      }
      bool is_send = k < ends.sends.size();
      auto [ri, v] = is_send ? ends.sends[k] : ends.recvs[k];
      problems.push_back(fmt::format("rank {}: {}: no matching {} on rank {} (source {}, destination {}, tag {})",
                                     w.ranks[ri].rank, describe_task(w.ranks[ri].graph, v),
                                     is_send ? "receive" : "send", is_send ? dst : src, src, dst, tag));
    }
  }
  if (!problems.empty() || w.ranks.size() < 2 || !global)
    return problems;

  if (auto cycle = global->find_cycle()) {
    auto [from, to] = *cycle;
    problems.push_back(fmt::format("rank {}: the task graphs deadlock across ranks: {} waits for {}, which waits "
                                   "for it through sends and receives of other ranks",
                                   w.ranks[to.first].rank, describe_task(w.ranks[to.first].graph, to.second),
                                   describe_task(w.ranks[from.first].graph, from.second)));
  }
  return problems;
}

void check_task_graphs(const Workload& w, GraphChecks checks)
{
  auto problems = find_graph_problems(w, checks);
  if (!problems.empty())
    throw GraphError(problems);
}

} // namespace stepsim
