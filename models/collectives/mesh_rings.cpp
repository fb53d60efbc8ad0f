// Rings on a full mesh (an AMD Instinct node's xGMI links, one per pair of GPUs): RCCL lays its
// rings over different links, since a ring that visits the GPUs in one order crosses one link of
// each GPU's seven. An 8-GPU MI300X node all-reduces at 316 GB/s bus bandwidth (the published
// rccl-tests log in configs/calibration/nccl_tests_published.json, amd_aac8_mi300x_1node_allreduce),
// more than six links at the 48 GB/s that AMD gives as one link's usable rate ("Understanding RCCL
// Bandwidth and xGMI Performance on AMD Instinct MI300X", AMD ROCm blog, 2025) can carry: all seven
// links carry a ring in each direction.
//
// One node: the complete directed graph on 8 GPUs splits into 7 directed rings over all 8 that
// share no link in one direction (a decomposition of K*_n into directed Hamiltonian cycles exists
// for every n but 4 and 6: Tillson, "A Hamiltonian decomposition of K*_2m, 2m >= 8", J. Combin.
// Theory B 29, 1980); found here by an exhaustive search with a budget, which on 8 GPUs finds the
// seven in 151 steps. On 4 and 6 GPUs it keeps the most it finds (2 and 4 rings).
//
// Several nodes: each ring crosses every node once, entering by one GPU and leaving by another
// (towards the next node's NIC). With k GPUs a node, k rings (one a NIC) cross it along k directed
// paths over its GPUs that share no link in one direction: k paths of k - 1 links use the node's
// k(k - 1) directed links once each, and every GPU starts one path and ends one, so every NIC
// carries one ring each way. For even k the zigzag paths i, i+1, i-1, i+2, ... (i < k/2) and their
// reverses are such a decomposition (Walecki's construction of K_k's Hamiltonian paths); for odd k
// a search finds one where it exists (7 GPUs; none on 3 or 5, where the rings keep the rotated
// orders of a switch node).
#include "models/collectives/collective.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace stepsim {
namespace {

constexpr int kMostMembers = 8;
constexpr long kBudget     = 200000; // search steps (the 8-GPU path search takes 153,472)

using Arcs = std::vector<std::vector<char>>; // arcs[a][b]: the link a -> b is taken

struct CycleSearch {
  int n = 0;
  Arcs used;
  std::vector<std::vector<int>> chosen, best;
  long budget = kBudget;

  // Directed rings through member 0 over free links, each found in turn (f may stop the walk).
  template <class F>
  bool walk(std::vector<int>& path, std::vector<char>& in, F&& f)
  {
    if (--budget < 0)
      return false;
    const int last = path.back();
    if (static_cast<int>(path.size()) == n)
      return used[static_cast<size_t>(last)][0] ? true : f(path);
    for (int m = 1; m < n; ++m)
      if (!in[static_cast<size_t>(m)] && !used[static_cast<size_t>(last)][static_cast<size_t>(m)]) {
        in[static_cast<size_t>(m)] = 1;
        path.push_back(m);
        const bool go_on = walk(path, in, f);
        path.pop_back();
        in[static_cast<size_t>(m)] = 0;
        if (!go_on)
          return false;
      }
    return true;
  }

  void take(const std::vector<int>& ring, char v)
  {
    for (size_t i = 0; i < ring.size(); ++i)
      used[static_cast<size_t>(ring[i])][static_cast<size_t>(ring[(i + 1) % ring.size()])] = v;
  }

  bool done() const { return static_cast<int>(best.size()) >= n - 1 || budget < 0; }

  void grow()
  {
    if (chosen.size() > best.size())
      best = chosen;
    if (done())
      return;
    std::vector<int> path{0};
    std::vector<char> in(static_cast<size_t>(n), 0);
    in[0] = 1;
    walk(path, in, [&](const std::vector<int>& ring) {
      take(ring, 1);
      chosen.push_back(ring);
      grow();
      chosen.pop_back();
      take(ring, 0);
      return !done();
    });
  }
};

struct PathSearch {
  int k = 0;
  Arcs used;
  std::vector<std::vector<int>> paths;
  long budget = kBudget;

  // A path over all k from `path`'s first member for each start in turn, then the next start.
  bool extend(std::vector<int>& path, std::vector<char>& in)
  {
    if (--budget < 0)
      return false;
    if (static_cast<int>(path.size()) == k) {
      for (size_t i = 0; i + 1 < path.size(); ++i)
        used[static_cast<size_t>(path[i])][static_cast<size_t>(path[i + 1])] = 1;
      paths.push_back(path);
      if (start(path.front() + 1))
        return true;
      paths.pop_back();
      for (size_t i = 0; i + 1 < path.size(); ++i)
        used[static_cast<size_t>(path[i])][static_cast<size_t>(path[i + 1])] = 0;
      return false;
    }
    const int last = path.back();
    for (int m = 0; m < k; ++m)
      if (!in[static_cast<size_t>(m)] && !used[static_cast<size_t>(last)][static_cast<size_t>(m)]) {
        in[static_cast<size_t>(m)] = 1;
        path.push_back(m);
        const bool found = extend(path, in);
        path.pop_back();
        in[static_cast<size_t>(m)] = 0;
        if (found || budget < 0)
          return found;
      }
    return false;
  }

  bool start(int s)
  {
    if (s == k)
      return true;
    std::vector<int> path{s};
    std::vector<char> in(static_cast<size_t>(k), 0);
    in[static_cast<size_t>(s)] = 1;
    return extend(path, in);
  }
};

using Orders = std::vector<std::vector<int>>;

// `make(n)` for n members from `fewest` to the largest mesh, searched once per n: the searches are
// exhaustive, and every group of the same size asks for the same orders.
template <class Make> Orders once_per_size(std::map<int, Orders>& cache, int n, int fewest, Make make)
{
  if (n < fewest || n > kMostMembers)
    return {};
  if (auto it = cache.find(n); it != cache.end())
    return it->second;
  return cache[n] = make(n);
}

Orders rings_of(int n)
{
  CycleSearch search;
  search.n = n;
  search.used.assign(static_cast<size_t>(n), std::vector<char>(static_cast<size_t>(n), 0));
  search.grow();
  return search.best;
}

Orders paths_of(int k)
{
  Orders paths;
  if (k % 2 == 0) {
    for (int i = 0; i < k / 2; ++i) {
      std::vector<int> p{i};
      for (int j = 1; j < k; ++j) {
        const int step = (j + 1) / 2;
        p.push_back(j % 2 == 1 ? (i + step) % k : ((i - step) % k + k) % k);
      }
      paths.push_back(p);
      paths.emplace_back(p.rbegin(), p.rend());
    }
  } else {
    PathSearch search;
    search.k = k;
    search.used.assign(static_cast<size_t>(k), std::vector<char>(static_cast<size_t>(k), 0));
    if (search.start(0))
      paths = search.paths;
  }
  // Lane l enters the node by its member l, as the rotated orders of a switch node do.
  std::sort(paths.begin(), paths.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return paths;
}

} // namespace

std::vector<std::vector<int>> mesh_rings(int n)
{
  static std::map<int, Orders> cache;
  return once_per_size(cache, n, 3, rings_of);
}

std::vector<std::vector<int>> mesh_paths(int k)
{
  static std::map<int, Orders> cache;
  return once_per_size(cache, k, 2, paths_of);
}

} // namespace stepsim
