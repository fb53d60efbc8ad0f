#include "models/collectives/protocol.hpp"

#include "models/device.hpp"
#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

namespace stepsim {

const char* protocol_name(Protocol p)
{
  switch (p) {
  case Protocol::LL: return "LL";
  case Protocol::LL128: return "LL128";
  case Protocol::Simple: return "Simple";
  }
  return "?";
}

std::optional<Protocol> protocol_named(const std::string& name)
{
  for (Protocol p : kProtocols)
    if (name == protocol_name(p))
      return p;
  return std::nullopt;
}

const ProtocolCost& protocol_cost(Protocol p) { return link_efficiency().protocols[static_cast<size_t>(p)]; }

const CollectiveAlgorithm& with_protocol(const CollectiveAlgorithm& base, Protocol p)
{
  static std::map<std::pair<const CollectiveAlgorithm*, Protocol>, std::unique_ptr<CollectiveAlgorithm>> made;
  auto& slot = made[{&base, p}];
  if (!slot) {
    // The bytes on the wire, as the protocol's lines carry them, in the calibration in force
    // when the step is asked for (a cluster's own may set LL's: `stepsim calibrate network`).
    // NCCL's tuner also takes .92 of the tree's bandwidth (link_efficiency().tree_bandwidth_factor),
    // an estimate for its choice only (fastest below): what the tree achieves comes from its flows.
    slot           = std::make_unique<CollectiveAlgorithm>(base);
    slot->name     = base.name + "/" + protocol_name(p);
    slot->protocol = static_cast<int>(p);
    slot->bare     = &base;
    slot->step     = [&base, p](CollectiveOp op, const GroupShape& g, double bytes, int lane, int member, int step) {
      CollectiveStep s = base.step(op, g, bytes, lane, member, step);
      s.bytes *= protocol_cost(p).wire_factor;
      return s;
    };
  }
  return *slot;
}

std::vector<Protocol> protocols_for(const CollectiveAlgorithm& a)
{
  if (a.simple_protocol_only)
    return {Protocol::Simple};
  if (a.point_to_point)
    return {Protocol::LL, Protocol::Simple};
  return {kProtocols.begin(), kProtocols.end()};
}

namespace {

bool same_node(const GroupShape& g, int a, int b)
{
  return g.node_of_member[static_cast<size_t>(a)] == g.node_of_member[static_cast<size_t>(b)];
}

double base_latency(const CollectiveAlgorithm& bare, const ProtocolCost& c)
{
  switch (bare.nccl) {
  case NcclAlgorithm::Ring: return c.base_ring_s;
  case NcclAlgorithm::Tree: return c.base_tree_s;
  // NVLS-tree: NCCL's NVLS latency inside the node (hwLat[NVLINK][NVLS_TREE][Simple] = 23 us, as
  // NVLS's), its tree steps across nodes timed on the links. CollNet: NCCL's baseLat for it is 0
  // and its latency one trip through the switches (hwLat[NET][COLLNET_DIRECT][Simple] = 31 us
  // against the ring's 14 us), which stepsim times on the links: the ring's base latency (v2.20.3
  // src/graph/tuning.cc baseLat and hwLat).
  case NcclAlgorithm::Nvls:
  case NcclAlgorithm::NvlsTree: return c.base_nvls_s;
  case NcclAlgorithm::CollNet: return c.base_ring_s;
  case NcclAlgorithm::Other: break;
  }
  return c.base_other_s;
}

} // namespace

static double launch_uncached(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes);

// The NIC transport latency a ring pays beyond its first step, which its steps pay
// (PathCost::transport_s): once per further crossing of nodes on its data path, as NCCL's tuner
// charges a ring's network latency on nInterSteps of its steps, 2(nNodes-1) for an all-reduce and
// nNodes-1 for the others (v2.20.3 src/graph/tuning.cc, ncclTopoTuneModel: "(nsteps-nInterSteps)
// *intraLat + nInterSteps*interLat"). A ring's broadcast and reduce (a chain over chunks) and its
// all-to-all (a peer a step) pay it per step, as the other algorithms do.
static double ring_transport_seconds(const CollectiveAlgorithm& bare, CollectiveOp op, const GroupShape& g)
{
  if (bare.nccl != NcclAlgorithm::Ring || g.nodes() <= 1 || !(g.inter.transport_s > 0) ||
      !(op == CollectiveOp::AllReduce || op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter))
    return 0;
  const int crossings = op == CollectiveOp::AllReduce ? 2 * (g.nodes() - 1) : g.nodes() - 1;
  return (crossings - 1) * g.inter.transport_s;
}

double launch_seconds(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes)
{
  if (a.protocol < 0 || a.bare == nullptr || g.n <= 1 || !(bytes > 0))
    return 0;
  // The pick and the engine ask for the same launches: each is timed once.
  // Per calibration: its protocols' latencies are not in the group's shape.
  using Key = std::tuple<const CollectiveAlgorithm*, int, int, int, int, double, int, double, double, double, double, int>;
  static std::map<Key, double> cache;
  const Key key{&a, static_cast<int>(op), g.n, g.nodes(), g.per_node, g.in_switch_reduction ? nvls_reduction(g) : -1.0, g.channels,
                g.intra.latency_s, g.inter.latency_s, g.inter.transport_s, bytes, link_efficiency_generation()};
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  return cache[key] = launch_uncached(a, op, g, bytes);
}

static double launch_uncached(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes)
{
  // An idealised network (zero latency on every path) gets no launch cost, as no step cost.
  if (!(g.intra.latency_s > 0) && !(g.inter.latency_s > 0))
    return 0;
  const ProtocolCost& c = protocol_cost(static_cast<Protocol>(a.protocol));
  // The extra step latencies along the critical path: the collective's longest chain of steps
  // with each step costing only the protocol's extra latency on its path type.
  const double inside  = g.intra.latency_s > 0 ? c.step_inside_s : 0.0;
  // The trees across nodes (the tree's and NVLS-tree's: the same double binary tree through the
  // NICs, NCCL's proxy forwarding each chunk) pay an extra latency per step between nodes: the
  // tree's per protocol, NVLS-tree's its own (fitted on its published scaling curves).
  const bool nvls_tree = a.bare->nccl == NcclAlgorithm::NvlsTree;
  const bool tree      = a.bare->nccl == NcclAlgorithm::Tree || nvls_tree;
  const double tree_hop = nvls_tree ? link_efficiency().nvls_tree_step_between_s
                          : tree    ? link_efficiency().tree_step_between_s[static_cast<size_t>(a.protocol)]
                                    : 0.0;
  const double between  = g.inter.latency_s > 0 ? c.step_between_s + tree_hop : 0.0;
  // The pipelined algorithms (the trees, NVLS-tree, CollNet) pay these once per hop of their
  // depth, as NCCL's tuner charges them (v2.20.3 src/graph/tuning.cc: tree 2 x ((ppn-1) intraLat
  // + log2(nNodes) interLat), NVLS_TREE intraLat + 2 log2(nNodes) interLat, CollNet one trip),
  // not once per chunk: NCCL keeps NCCL_STEPS chunks of a connection in flight, so a chunk's
  // protocol latency overlaps the chunks before it. Their walk takes one chunk (a byte). The
  // ring pays them per step, as tuning.cc's nsteps x lat.
  const bool pipelined = tree || a.bare->nccl == NcclAlgorithm::CollNet;
  const double walked  = pipelined ? 1.0 : bytes;
  double steps         = 0;
  if (inside > 0 || between > 0)
    steps = uncontended_seconds(
        a, op, g, walked, [&](int x, int y) { return PathCost{same_node(g, x, y) ? inside : between, 0.0}; }, true);
  const double msccl = a.bare->name == kMscclAllPairs ? link_efficiency().msccl_base_s : 0.0;
  return base_latency(*a.bare, c) + msccl + steps + ring_transport_seconds(*a.bare, op, g);
}

double planned_seconds(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes)
{
  auto path = [&g](int x, int y) { return same_node(g, x, y) ? g.intra : g.inter; };
  return launch_seconds(a, op, g, bytes) + uncontended_seconds(a, op, g, bytes, path, true);
}

namespace {

// NCCL's tuner gives the tree the ring's per-channel bus bandwidth times .92 (tuning.cc: a tree
// all-reduce moves 2S per GPU, the ring 2(n-1)/n S), so it credits the tree nothing for halving
// the bytes between two nodes, and runs the ring on large messages where stepsim's links alone
// would favour the tree. `auto` picks as the tuner does: the tree's time for the pick is at least
// the ring's bandwidth time (idle paths without latency) scaled so. The time the engine then
// replays is the tree's own flows. NVLS-tree and CollNet are picked on their simulated times:
// NCCL's tuner converts their bus bandwidth to algorithm bandwidth at 5/6 (NVLS_TREE) and 1/2
// (CollNet) against the ring's n/(2(n-1)), on graphs of their own (v2.20.3 tuning.cc), which
// stepsim does not search; their flows carry what each link really moves.
// Without latency a transfer's time is linear in its bytes, so the bare ring's time scaled by the
// protocol's wire factor is the protocol's.
//
// Up to 256 MiB the tuner also scales the tree's bandwidth by its treeCorrectionFactor (its trees
// "are not perfectly sticking to the model for medium sizes"), per protocol and power of two of
// size / 64 (v2.20.3 src/graph/tuning.cc, ncclTopoGetAlgoTime).
double tree_correction(Protocol p, double bytes)
{
  static constexpr double kFactor[3][23] = {
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
  const double units = std::floor(bytes / 64);
  const int log_size = units < 1 ? 0 : static_cast<int>(std::floor(std::log2(units))); // log2i(nBytes >> 6)
  return log_size < 23 ? kFactor[static_cast<size_t>(p)][static_cast<size_t>(log_size)] : 1.0;
}

// On one or two nodes the tuner takes each graph's bandwidth inside the node, bwIntra, where it
// takes bwInter on more (v2.20.3 tuning.cc ncclTopoTuneModel: `bw = nNodes <= 2 || collnet ?
// graphs[a]->bwIntra : graphs[a]->bwInter`). A ring's graph has the two equal (search.cc raises
// both together), but the tree's search raises bwIntra alone, up to twice bwInter, while the
// node's paths carry it (src/graph/search.cc, ncclTopoCompute: "increase bwIntra for trees (2
// nodes or collnet)"). So on two nodes the tuner credits the tree with up to twice the ring's
// bandwidth, and picks it on large messages too, where a GPU's PCIe link to its NIC carries more
// than one NIC: the factor here is GroupShape::nic_feed_ratio, between 1 and 2.
//
// The published two-node runs agree: where a NIC is slower than the GPU's PCIe link (AWS p4de,
// 4 x 100 Gb/s EFA for 8 A100; OCI BM.GPU4.8, 16 x 100 Gb/s RoCE; AWS p5, 32 x 100 Gb/s EFA)
// nccl-tests report all-reduce bus bandwidths above the NICs' own, which no ring reaches; with
// one 200 Gb/s NIC per A100 (Azure NDv4) they stay at the ring's (configs/calibration/
// nccl_tests.json case 2x-ndv4-a100-hdr, nccl_tests_published.json).
double tree_graph_factor(const GroupShape& g)
{
  if (g.nodes() != 2 || g.per_node < 2 || !(g.nic_feed_ratio > 0))
    return 1;
  return std::clamp(g.nic_feed_ratio, 1.0, 2.0);
}

// NCCL's tuner caps LL's bus bandwidth (v2.20.3 tuning.cc llMaxBws; the table's comment says
// LL128, the code applies it to LL): across nodes by the CPU of the nodes, 39.0 GB/s on two nodes
// and 20.4 on more with any CPU but AMD's, 22.5 and 19.0 with AMD's (ncclTopoCpuType). On one node
// the cap is by GPU generation, 87.7 GB/s from Ampere on, above what an LL ring reaches inside a
// node here: no cap (infinity).
double ll_max_bus_bandwidth(const GroupShape& g)
{
  if (g.nodes() <= 1)
    return std::numeric_limits<double>::infinity();
  const bool two = g.nodes() == 2;
  return 1e9 * (g.amd_hosts ? (two ? 22.5 : 19.0) : (two ? 39.0 : 20.4));
}

// The tuner's bandwidth time for the tree's all-reduce. Its bus bandwidth is the ring's (the
// bare ring's time on these paths) on the tree's graph (tree_graph_factor), times .92; with LL
// the tuner takes 1/3.8 of that, at most ll_max_bus_bandwidth, where stepsim's links carry LL's
// two bytes per byte (the other protocols: their wire factor, as the tuner's 120/128 for LL128);
// then half of it as algorithm bandwidth, scaled by treeCorrectionFactor (tuning.cc).
double tuner_tree_bandwidth_seconds(double bare_ring_s, Protocol p, const GroupShape& g, double bytes)
{
  if (p == Protocol::LL && bare_ring_s > 0) {
    const double ring_bus = 2.0 * (g.n - 1) / g.n * bytes / bare_ring_s;
    const double bus = std::min(ring_bus * tree_graph_factor(g) * link_efficiency().tree_bandwidth_factor / 3.8,
                                ll_max_bus_bandwidth(g));
    return bytes / (bus * 0.5 * tree_correction(p, bytes));
  }
  return bare_ring_s * protocol_cost(p).wire_factor * g.n / (g.n - 1) / link_efficiency().tree_bandwidth_factor /
         tree_graph_factor(g) / tree_correction(p, bytes);
}

// The tuner's bandwidth time for a ring with LL across nodes: a quarter of the ring's bus
// bandwidth, at most ll_max_bus_bandwidth, times n / nsteps as algorithm bandwidth (tuning.cc:
// nsteps 2(n-1) for all-reduce, n-1 for all-gather and reduce-scatter, n for the others). The
// ring's bus bandwidth times n / nsteps is bytes over the bare ring's time, so this is the larger
// of four bare rings and bytes over the capped figure. Inside a node: 0 (no bound).
double tuner_ring_ll_seconds(double bare_ring_s, CollectiveOp op, const GroupShape& g, double bytes)
{
  if (g.nodes() <= 1)
    return 0;
  const double nsteps = op == CollectiveOp::AllReduce                                           ? 2.0 * (g.n - 1)
                        : op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter ? g.n - 1.0
                                                                                                : g.n;
  return std::max(4 * bare_ring_s, bytes / (ll_max_bus_bandwidth(g) * g.n / nsteps));
}

double bare_ring_bandwidth_seconds(CollectiveOp op, const GroupShape& g, double bytes)
{
  auto no_latency = [&g](int x, int y) {
    PathCost c  = same_node(g, x, y) ? g.intra : g.inter;
    c.latency_s = 0;
    return c;
  };
  return uncontended_seconds(CollectiveRegistry::get("ring", "simulation.collective_algorithm"), op, g, bytes,
                             no_latency, true);
}

} // namespace

const CollectiveAlgorithm& fastest(const std::vector<const CollectiveAlgorithm*>& algorithms,
                                   const std::vector<Protocol>& allowed, CollectiveOp op, const GroupShape& g,
                                   double bytes)
{
  using Key = std::tuple<std::vector<const CollectiveAlgorithm*>, std::vector<Protocol>, int, int, int, int, double, int,
                         double, double, double, double, double, std::vector<std::vector<int>>, double, bool, bool,
                         std::vector<std::vector<int>>, int>;
  static std::map<Key, const CollectiveAlgorithm*> cache; // picks depend only on the key (and the calibration)
  Key key{algorithms, allowed,           static_cast<int>(op), g.n,  g.nodes(), g.per_node, g.in_switch_reduction ? nvls_reduction(g) : -1.0,
          g.channels, g.intra.latency_s, g.intra.bandwidth_Bps, g.inter.latency_s, g.inter.bandwidth_Bps, bytes,
          g.rings,    g.nic_feed_ratio,      g.amd_hosts,        g.full_mesh, g.node_orders, link_efficiency_generation()};
  if (auto it = cache.find(key); it != cache.end())
    return *it->second;
  // Timing a candidate may throw (an algorithm that cannot run the group): nothing is cached then.
  const CollectiveAlgorithm* picked = nullptr;
  double best                       = std::numeric_limits<double>::infinity();
  double bare_ring_s                = -1; // the tuner's view of the tree, once per pick
  for (const auto* a : algorithms)
    for (Protocol p : protocols_for(*a)) {
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), p) == allowed.end())
        continue;
      const auto& candidate = with_protocol(*a, p);
      double t              = 0;
      if (g.n > 1) {
        // The launch alone bounds the time from below: a candidate that cannot beat the best by
        // it is not timed further.
        const double launch = launch_seconds(candidate, op, g, bytes);
        if (picked != nullptr && launch >= best)
          continue;
        // The tuner's view of the tree bounds its time from below too: a tree that loses by it
        // alone is not walked (on a large group its walk is the costly part of the pick).
        double tuner_s = 0;
        if (a->nccl == NcclAlgorithm::Tree && op == CollectiveOp::AllReduce) {
          if (bare_ring_s < 0)
            bare_ring_s = bare_ring_bandwidth_seconds(op, g, bytes);
          tuner_s = launch + tuner_tree_bandwidth_seconds(bare_ring_s, p, g, bytes);
          if (picked != nullptr && tuner_s >= best)
            continue;
        }
        // And of a ring with LL across nodes (op types the ring runs).
        if (a->nccl == NcclAlgorithm::Ring && p == Protocol::LL && g.nodes() > 1 && op != CollectiveOp::AllToAll) {
          if (bare_ring_s < 0)
            bare_ring_s = bare_ring_bandwidth_seconds(op, g, bytes);
          tuner_s = launch + tuner_ring_ll_seconds(bare_ring_s, op, g, bytes);
          if (picked != nullptr && tuner_s >= best)
            continue;
        }
        auto path = [&g](int x, int y) { return same_node(g, x, y) ? g.intra : g.inter; };
        t         = std::max(launch + uncontended_seconds(candidate, op, g, bytes, path, true), tuner_s);
      }
      if (t < best || picked == nullptr) {
        best   = t;
        picked = &candidate;
      }
    }
  if (picked == nullptr) // the forced protocol fits none of them (NVLS with LL): as NCCL, run
    picked = &fastest(algorithms, {}, op, g, bytes); // what their protocols allow
  return *cache.emplace(std::move(key), picked).first->second;
}

namespace {

// The protocols the platform's NCCL_PROTO leaves `op` (GroupShape::nccl, platform.nccl_env) in
// kProtocols' order; empty = all. None that one of `algorithms` runs is bad input: NCCL fails
// such a collective ("no algorithm/protocol available").
std::vector<Protocol> enabled_protocols(CollectiveOp op, const GroupShape& g,
                                        const std::vector<const CollectiveAlgorithm*>& algorithms)
{
  const uint8_t mask = g.nccl.protocols.at(static_cast<size_t>(op));
  if (mask == kEveryNcclProtocol)
    return {};
  std::vector<Protocol> out;
  for (size_t i = 0; i < kProtocols.size(); ++i)
    if ((mask & (1u << i)) != 0)
      out.push_back(kProtocols[i]);
  std::string runs;
  for (const auto* a : algorithms) {
    std::string own;
    for (Protocol p : protocols_for(*a)) {
      if (std::find(out.begin(), out.end(), p) != out.end())
        return out;
      own += (own.empty() ? "" : ", ") + std::string(protocol_name(p));
    }
    runs += fmt::format("{}{} runs {}", runs.empty() ? "" : "; ", a->name, own);
  }
  throw InputError({fmt::format("platform.nccl_env.NCCL_PROTO: leaves the {} of {} GPUs no protocol its algorithms "
                                "run ({}), and NCCL fails a collective without one (\"no algorithm/protocol "
                                "available\")",
                                collective_name(op), g.n, runs)});
}

} // namespace

CollectiveAlgorithm with_protocol_choice(const CollectiveAlgorithm& chosen, const std::string& protocol,
                                         const std::string& path)
{
  std::vector<Protocol> allowed;
  if (protocol != "auto") {
    const auto p = protocol_named(protocol);
    if (!p)
      throw InputError({fmt::format("{}: unknown protocol \"{}\"; expected auto, LL, LL128 or Simple", path, protocol)});
    allowed.push_back(*p);
  }
  if (!link_efficiency().protocols_loaded)
    return chosen;
  // The algorithms handed to with_protocol must live as long as the process: registry entries.
  const CollectiveAlgorithm* plain = chosen.pick ? nullptr : &CollectiveRegistry::get(chosen.name, path);
  CollectiveAlgorithm c = chosen;
  c.pick = [chosen, plain, allowed](CollectiveOp op, const GroupShape& g, double bytes) -> const CollectiveAlgorithm& {
    // RCCL hands a collective to an MSCCL program whose window holds it before its tuner runs.
    if (chosen.candidates && allowed.empty())
      if (const CollectiveAlgorithm* m = msccl_program(op, g, bytes))
        return *m;
    std::vector<const CollectiveAlgorithm*> algorithms;
    if (plain != nullptr)
      algorithms.push_back(plain);
    else if (chosen.candidates)
      algorithms = chosen.candidates(op, g);
    else
      algorithms.push_back(&concrete_algorithm(chosen, op, g, bytes));
    // A protocol forced in the scenario (simulation.nccl_protocol) overrides the platform's
    // NCCL_PROTO, as a what-if; otherwise the tuner picks among those NCCL_PROTO enables.
    return fastest(algorithms, allowed.empty() ? enabled_protocols(op, g, algorithms) : allowed, op, g, bytes);
  };
  follow_pick(c);
  c.candidates = {};
  return c;
}

} // namespace stepsim
