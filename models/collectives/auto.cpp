// "auto": the algorithm NCCL's tuner would pick (src/graph/tuning.cc): it models every algorithm's
// time for the message as latency + size / bandwidth on the group's topology and takes the
// fastest. Here the candidates are NCCL's for each type: all-reduce ring or tree across nodes
// (tree wins on latency-bound messages, ring on large ones), with NVLS-tree where the nodes'
// NVSwitch reduces (NCCL enables NVLS_TREE on 2 nodes or more with NVLS) and CollNet where the
// fabric reduces (SHARP, platform.network.sharp; NCCL enables CollNet only where its plugin
// finds it: tuning.cc algoEnable with collNetSupport), ring or NVLS inside an NVSwitch
// node that reduces in the switch, ring alone inside other nodes (NCCL's tree is a chain there);
// all-gather and reduce-scatter ring; all-to-all direct (NCCL runs it as point-to-point sends);
// broadcast and reduce ring. Each candidate is timed by uncontended_seconds on the paths the
// engine measured for the group (one inside a node, one between nodes). Deterministic: ties go to
// the first candidate. The platform's NCCL_ALGO (platform.nccl_env, GroupShape::nccl) takes away
// the candidates it does not enable, as NCCL's algoEnable does.
#include "models/collectives/collective.hpp"
#include "models/link_calibration.hpp"
#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <memory>
#include <tuple>

namespace stepsim {
namespace {

std::vector<const char*> nccl_candidates(CollectiveOp op, const GroupShape& g)
{
  switch (op) {
  case CollectiveOp::AllReduce:
    if (g.nodes() > 1) {
      std::vector<const char*> names{"ring", "tree"};
      if (g.in_switch_reduction && g.per_node > 1)
        names.push_back("nvls_tree");
      if (g.in_network_reduction && g.per_node > 0)
        names.push_back("collnet");
      return names;
    }
    if (g.in_switch_reduction)
      return {"ring", "nvls"};
    return {"ring"};
  case CollectiveOp::AllToAll: return {"direct"};
  default: return {"ring"};
  }
}

// A candidate's NCCL algorithm (sim/core/nccl_env.hpp bits) and NCCL's name for it; 0 for
// all-to-all's point-to-point sends, which NCCL_ALGO does not govern.
std::pair<uint8_t, const char*> nccl_algorithm_of(const std::string& name)
{
  if (name == "ring")
    return {kNcclRing, "Ring"};
  if (name == "tree")
    return {kNcclTree, "Tree"};
  if (name == "nvls")
    return {kNcclNvls, "NVLS"};
  if (name == "nvls_tree")
    return {kNcclNvlsTree, "NVLSTree"};
  if (name == "collnet") // NCCL_ALGO_COLLNET_DIRECT (collnet.cpp); either CollNet name enables it
    return {static_cast<uint8_t>(kNcclCollNetDirect | kNcclCollNetChain), "CollNetDirect"};
  return {0, ""};
}

// NCCL's name of the collective function (ncclFuncStr), as an NCCL_ALGO entry names it.
const char* nccl_function_name(CollectiveOp op)
{
  switch (op) {
  case CollectiveOp::AllReduce: return "AllReduce";
  case CollectiveOp::AllGather: return "AllGather";
  case CollectiveOp::ReduceScatter: return "ReduceScatter";
  case CollectiveOp::Broadcast: return "Broadcast";
  case CollectiveOp::Reduce: return "Reduce";
  default: return "SendRecv";
  }
}

// NCCL's candidates for `op` on the group, less those the platform's NCCL_ALGO does not enable.
// None left is bad input: NCCL fails such a collective ("no algorithm/protocol available").
std::vector<const char*> candidates(CollectiveOp op, const GroupShape& g)
{
  auto all              = nccl_candidates(op, g);
  const uint8_t enabled = g.nccl.algorithms.at(static_cast<size_t>(op));
  if (enabled == kEveryNcclAlgorithm)
    return all;
  // In one node NCCL's tree is a chain, which auto leaves out beside the ring; with the ring
  // disabled and the tree enabled, it is what NCCL runs (NCCL_ALGO=Tree on one node).
  if (op == CollectiveOp::AllReduce && g.nodes() == 1 && (enabled & kNcclRing) == 0 && (enabled & kNcclTree) != 0)
    all.push_back("tree");
  std::vector<const char*> kept;
  std::string names;
  for (const char* name : all) {
    const auto [bits, nccl_name] = nccl_algorithm_of(name);
    if (bits == 0 || (bits & enabled) != 0)
      kept.push_back(name);
    names += (names.empty() ? "" : ", ") + std::string(nccl_name);
  }
  if (kept.empty())
    throw InputError({fmt::format(
        "platform.nccl_env.NCCL_ALGO: leaves the {} of {} GPUs{} none of the algorithms stepsim's tuner chooses from "
        "for it ({}), and NCCL fails a collective without one (\"no algorithm/protocol available\"); enable one for "
        "this function (\"...;{}:{}\"), or name an algorithm in simulation.collective_algorithm",
        collective_name(op), g.n, g.nodes() > 1 ? fmt::format(" on {} nodes", g.nodes()) : "", names,
        nccl_function_name(op), nccl_algorithm_of(all.front()).second)});
  return kept;
}

using Key = std::tuple<int, int, int, int, double, bool, int, double, double, double, double, double, bool, uint8_t, int>;

const CollectiveAlgorithm& auto_pick(CollectiveOp op, const GroupShape& g, double bytes)
{
  static std::map<Key, const CollectiveAlgorithm*> cache; // picks depend only on the key (and the calibration)
  const auto names = candidates(op, g);
  if (names.size() == 1 || g.n <= 1)
    return CollectiveRegistry::get(names[0], "simulation.collective_algorithm");
  Key key{static_cast<int>(op), g.n, g.nodes(), g.per_node, g.in_switch_reduction ? nvls_reduction(g) : -1.0,
          g.in_network_reduction, g.channels,
          g.intra.latency_s, g.intra.bandwidth_Bps, g.inter.latency_s, g.inter.bandwidth_Bps, bytes, g.full_mesh,
          g.nccl.algorithms.at(static_cast<size_t>(op)), link_efficiency_generation()};
  auto [it, fresh] = cache.try_emplace(key, nullptr);
  if (!fresh)
    return *it->second;
  auto path = [&g](int a, int b) {
    return g.node_of_member[static_cast<size_t>(a)] == g.node_of_member[static_cast<size_t>(b)] ? g.intra : g.inter;
  };
  double best = std::numeric_limits<double>::infinity();
  for (const char* name : names) {
    const auto& a  = CollectiveRegistry::get(name, "simulation.collective_algorithm");
    const double t = uncontended_seconds(a, op, g, bytes, path, true);
    if (t < best) {
      best       = t;
      it->second = &a;
    }
  }
  return *it->second;
}

CollectiveAlgorithm make_auto()
{
  CollectiveAlgorithm a;
  a.name  = "auto";
  a.pick  = auto_pick;
  a.lanes = [](CollectiveOp op, const GroupShape& g, double bytes) { return lanes_of(auto_pick(op, g, bytes), op, g, bytes); };
  a.steps = [](CollectiveOp op, const GroupShape& g, double bytes) { return auto_pick(op, g, bytes).steps(op, g, bytes); };
  a.step  = [](CollectiveOp op, const GroupShape& g, double bytes, int lane, int member, int step) {
    return auto_pick(op, g, bytes).step(op, g, bytes, lane, member, step);
  };
  a.candidates = [](CollectiveOp op, const GroupShape& g) {
    std::vector<const CollectiveAlgorithm*> out;
    for (const char* name : candidates(op, g))
      out.push_back(&CollectiveRegistry::get(name, "simulation.collective_algorithm"));
    return out;
  };
  return a;
}

const bool registered = CollectiveRegistry::add(
    "auto",
    "NCCL's tuner: per collective the fastest of its candidates (ring, tree, nvls, nvls_tree, collnet, direct) on the "
    "group's paths",
    make_auto());

} // namespace
} // namespace stepsim
