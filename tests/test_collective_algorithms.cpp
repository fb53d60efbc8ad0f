// The collective algorithms: their steps (who sends what to whom), the bytes each member moves
// against each algorithm's closed form, what they refuse, and their times replayed flow by flow
// on an idle fat-tree against the textbook alpha-beta closed forms in latency α and bandwidth B.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "models/collectives/protocol.hpp"
#include "models/link_calibration.hpp"
#include "sim/engine/collective_timing.hpp"
#include "sim/engine/replay.hpp"
#include "topologies/platform.hpp"
#include "tools/driver/collective_bench.hpp"

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

using namespace stepsim;

namespace {

constexpr CollectiveOp kAllOps[] = {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
                                    CollectiveOp::AllToAll,  CollectiveOp::Broadcast, CollectiveOp::Reduce};
constexpr CollectiveOp kOps[]    = {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
                                    CollectiveOp::AllToAll};

// `nodes` nodes holding `per_node` members each, members numbered node by node.
GroupShape nodes_of(int nodes, int per_node, bool nvls = false)
{
  std::vector<int> node;
  for (int i = 0; i < nodes; ++i)
    for (int l = 0; l < per_node; ++l)
      node.push_back(i);
  return group_shape(node, nvls);
}

bool supported(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g)
{
  try {
    a.steps(op, g, 1 << 20);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

// Every lane's sends from p to m are the receives m lists from p, one for one.
void check_matching(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double S)
{
  const int lanes = lanes_of(a, op, g, S);
  for (int lane = 0; lane < lanes; ++lane) {
    std::map<std::pair<int, int>, int> sends, recvs;
    for (int m = 0; m < g.n; ++m)
      for (int k = 0; k < a.steps(op, g, S); ++k) {
        CollectiveStep s = a.step(op, g, S, lane, m, k);
        REQUIRE(s.sends <= CollectiveStep::kMaxPeers);
        for (int q = 0; q < s.sends; ++q) {
          const int to = s.send_to[static_cast<size_t>(q)];
          REQUIRE(to >= 0);
          REQUIRE(to < g.n);
          CHECK(to != m);
          CHECK(s.bytes > 0);
          ++sends[{m, to}];
        }
        for (int q = 0; q < s.recvs; ++q)
          ++recvs[{s.recv_from[static_cast<size_t>(q)], m}];
      }
    CHECK(sends == recvs);
  }
}

struct Replayed {
  double seconds = 0, alpha = 0, bandwidth = 0;
  bool analytic = false;
  long long activities = 0;
  double closed_form = 0; // uncontended_seconds on the measured paths
};

// n single-GPU nodes, two per leaf switch (NIC bandwidth B, latency L), all in one group whose
// order crosses the leaves: members 2i+1 and 2i+2 swap places within every four, so that two
// flows of one step share a leaf uplink (of 2B, so neither is slowed). Then the collective is not
// timed by its closed form but replayed transfer by transfer, with its step dependencies.
Replayed replay_collective(const std::string& algorithm, CollectiveOp op, int n, double bytes, double B, double L)
{
  auto j = testing::in_child([&] {
    auto engine       = testing::start_engine();
    PlatformSpec spec = testing::single_gpu_nodes(n, B, L);
    spec.network.leaf_radix = 2;
    BuiltPlatform platform = build_platform(spec);

    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      members.push_back(r % 4 == 1 ? r + 1 : r % 4 == 2 ? r - 1 : r);
    Workload w = collective_workload(spec, members, op, bytes);
    const auto& a = CollectiveRegistry::get(algorithm, "");
    CollectiveTiming timing(w, platform.gpus, a);
    // Path between two nodes under different leaves; every pair has the same here.
    std::vector<simgrid::s4u::Link*> route;
    double alpha = 0;
    platform.gpus[0]->route_to(platform.gpus[static_cast<size_t>(n - 1)], route, &alpha);
    double bandwidth = INFINITY;
    for (auto* link : route)
      bandwidth = std::min(bandwidth, link->get_bandwidth());
    const double closed = timing.seconds(0, op, bytes);
    ReplayResult result = replay(w, platform.gpus, a);
    return nlohmann::json{{"seconds", result.end_s},         {"alpha", alpha},
                          {"bandwidth", bandwidth},         {"analytic", timing.analytic(0, op)},
                          {"activities", result.activities}, {"closed", closed}};
  });
  return Replayed{j["seconds"], j["alpha"], j["bandwidth"], j["analytic"], j["activities"], j["closed"]};
}

} // namespace

TEST_CASE("every algorithm's sends are the receives its peers expect, lane by lane")
{
  for (const auto& [name, item] : CollectiveRegistry::all()) {
    const auto& a = item.entry;
    for (int n : {2, 3, 4, 5, 8, 16})
      for (const GroupShape& g : {group_shape(n), nodes_of(1, n, true), nodes_of(n / 2 > 0 && n % 2 == 0 ? n / 2 : n,
                                                                                   n % 2 == 0 ? 2 : 1)})
        for (CollectiveOp op : kAllOps) {
          INFO(name << " " << collective_name(op) << " n=" << n << " nodes=" << g.nodes());
          if (!supported(a, op, g))
            continue;
          for (double S : {1e3, 64e6})
            check_matching(concrete_algorithm(a, op, g, S), op, g, S);
        }
  }
}

TEST_CASE("ring, direct and halving_doubling steps are permutations of the group")
{
  for (const char* name : {"direct", "halving_doubling", "ring"}) {
    const auto& a = CollectiveRegistry::get(name, "");
    for (int n : {2, 3, 4, 5, 8, 16}) {
      const GroupShape g = group_shape(n);
      for (CollectiveOp op : kOps) {
        if (!supported(a, op, g))
          continue;
        INFO(name << " " << collective_name(op) << " n=" << n);
        for (int k = 0; k < a.steps(op, g, 1000.0); ++k) {
          std::set<int> receivers;
          for (int m = 0; m < n; ++m) {
            CollectiveStep s = a.step(op, g, 1000.0, 0, m, k);
            REQUIRE(s.sends == 1);
            REQUIRE(s.recvs == 1);
            receivers.insert(s.send_to[0]);
            CHECK(a.step(op, g, 1000.0, 0, s.send_to[0], k).recv_from[0] == m);
          }
          CHECK(static_cast<int>(receivers.size()) == n); // no two members send to the same peer
        }
      }
    }
  }
}

TEST_CASE("every member sends and receives its algorithm's closed-form bytes")
{
  const double S = 1 << 26;
  const auto& ring = CollectiveRegistry::get("ring", "");
  const auto& direct = CollectiveRegistry::get("direct", "");
  const auto& hd     = CollectiveRegistry::get("halving_doubling", "");
  const auto& tree   = CollectiveRegistry::get("tree", "");
  const auto& hier   = CollectiveRegistry::get("hierarchical", "");
  const auto& nvls   = CollectiveRegistry::get("nvls", "");
  const auto& pat    = CollectiveRegistry::get("pat", "");
  for (int n : {2, 3, 4, 5, 8, 16}) {
    const bool power_of_two = (n & (n - 1)) == 0;
    for (const GroupShape& g : {group_shape(n), nodes_of(1, n, true), nodes_of(n % 2 == 0 ? n / 2 : n, n % 2 == 0 ? 2 : 1)}) {
      INFO("n=" << n << " nodes=" << g.nodes());
      double tree_total = 0, tree_bcast = 0, tree_reduce = 0, ring_bcast = 0, ring_reduce = 0;
      for (int m = 0; m < n; ++m) {
        INFO("member " << m);
        for (const CollectiveAlgorithm* a : {&ring, &direct}) {
          for (CollectiveOp op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllToAll}) {
            CHECK(bytes_sent_per_member(*a, op, g, S, m) == Approx(double(n - 1) / n * S));
            CHECK(bytes_received_per_member(*a, op, g, S, m) == Approx(double(n - 1) / n * S));
          }
          CHECK(bytes_sent_per_member(*a, CollectiveOp::AllReduce, g, S, m) == Approx(2.0 * (n - 1) / n * S));
          CHECK(bytes_received_per_member(*a, CollectiveOp::AllReduce, g, S, m) == Approx(2.0 * (n - 1) / n * S));
        }
        if (g.per_node == 1) // PAT: the ring's bytes in log2 n steps, any n
          for (CollectiveOp op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter}) {
            CHECK(bytes_sent_per_member(pat, op, g, S, m) == Approx(double(n - 1) / n * S));
            CHECK(bytes_received_per_member(pat, op, g, S, m) == Approx(double(n - 1) / n * S));
          }
        if (power_of_two) {
          CHECK(bytes_sent_per_member(hd, CollectiveOp::AllReduce, g, S, m) == Approx(2.0 * (n - 1) / n * S));
          CHECK(bytes_received_per_member(hd, CollectiveOp::ReduceScatter, g, S, m) == Approx(double(n - 1) / n * S));
        }
        // A chain: every member but the last passes S on; every member but the root receives S.
        // (Each lane's chain has its own last member, so a member passes on S less the lanes it ends.)
        const double bcast_sent = bytes_sent_per_member(ring, CollectiveOp::Broadcast, g, S, m);
        const int lanes         = lanes_of(ring, CollectiveOp::Broadcast, g, S);
        CHECK(std::fmod(bcast_sent / (S / lanes) + 0.5, 1.0) == Approx(0.5).margin(1e-9));
        CHECK(bcast_sent <= S * (1 + 1e-9));
        CHECK(bytes_received_per_member(ring, CollectiveOp::Broadcast, g, S, m) == Approx(m == 0 ? 0 : S));
        CHECK(bytes_sent_per_member(ring, CollectiveOp::Reduce, g, S, m) == Approx(m == 0 ? 0 : S));
        ring_bcast += bcast_sent;
        ring_reduce += bytes_received_per_member(ring, CollectiveOp::Reduce, g, S, m);
        // Double binary tree: each tree edge carries the tree's half up and down, so a member
        // sends what it receives; a node internal in one tree is a leaf in the other.
        const double sent = bytes_sent_per_member(tree, CollectiveOp::AllReduce, g, S, m);
        CHECK(bytes_received_per_member(tree, CollectiveOp::AllReduce, g, S, m) == Approx(sent));
        if (g.per_node == 1)
          CHECK(sent <= 2 * S * (1 + 1e-9));
        tree_total += sent;
        CHECK(bytes_received_per_member(tree, CollectiveOp::Broadcast, g, S, m) == Approx(m == 0 ? 0 : S));
        CHECK(bytes_sent_per_member(tree, CollectiveOp::Reduce, g, S, m) == Approx(m == 0 ? 0 : S));
        tree_bcast += bytes_sent_per_member(tree, CollectiveOp::Broadcast, g, S, m);
        tree_reduce += bytes_received_per_member(tree, CollectiveOp::Reduce, g, S, m);
        // Hierarchical: 2(k-1)/k·S inside the node, 2(N-1)/N·S/k across.
        const int k = g.per_node, N = g.nodes();
        CHECK(bytes_sent_per_member(hier, CollectiveOp::AllReduce, g, S, m) ==
              Approx(2.0 * (k - 1) / k * S + 2.0 * (N - 1) / N * S / k));
        CHECK(bytes_received_per_member(hier, CollectiveOp::AllReduce, g, S, m) ==
              Approx(2.0 * (k - 1) / k * S + 2.0 * (N - 1) / N * S / k));
        if (g.in_switch_reduction) { // NVLS: S into the switch, S back
          CHECK(bytes_sent_per_member(nvls, CollectiveOp::AllReduce, g, S, m) == Approx(S));
          CHECK(bytes_received_per_member(nvls, CollectiveOp::AllReduce, g, S, m) == Approx(S));
        }
      }
      CHECK(tree_total == Approx(2.0 * (n - 1) * S)); // 2 trees × (n-1) edges × (S/2 up + S/2 down)
      CHECK(tree_bcast == Approx((n - 1) * S));
      CHECK(tree_reduce == Approx((n - 1) * S));
      CHECK(ring_bcast == Approx((n - 1) * S));
      CHECK(ring_reduce == Approx((n - 1) * S));
    }
  }
}

TEST_CASE("across nodes the ring runs one ring per member of a node, through every NIC")
{
  const auto& ring = CollectiveRegistry::get("ring", "");
  for (auto [nodes, k] : {std::pair{2, 8}, {4, 2}, {3, 4}}) {
    const GroupShape g = nodes_of(nodes, k);
    INFO(nodes << " nodes of " << k);
    REQUIRE(lanes_of(ring, CollectiveOp::AllReduce, g, 1e9) == k);
    // Every member leaves its node in exactly one ring and enters it in exactly one.
    std::vector<int> leaves(static_cast<size_t>(g.n), 0), enters(static_cast<size_t>(g.n), 0);
    for (int lane = 0; lane < k; ++lane)
      for (int m = 0; m < g.n; ++m) {
        CollectiveStep s = ring.step(CollectiveOp::AllReduce, g, 1e9, lane, m, 0);
        if (g.node_of_member[static_cast<size_t>(s.send_to[0])] != g.node_of_member[static_cast<size_t>(m)]) {
          ++leaves[static_cast<size_t>(m)];
          ++enters[static_cast<size_t>(s.send_to[0])];
        }
      }
    CHECK(leaves == std::vector<int>(static_cast<size_t>(g.n), 1));
    CHECK(enters == std::vector<int>(static_cast<size_t>(g.n), 1));
  }
  // Inside one node, or one member per node, one ring in group order.
  CHECK(lanes_of(ring, CollectiveOp::AllReduce, nodes_of(1, 8), 1e9) == 1);
  CHECK(lanes_of(ring, CollectiveOp::AllReduce, group_shape(8), 1e9) == 1);
  CHECK(lanes_of(ring, CollectiveOp::AllReduce, group_shape(std::vector<int>{0, 0, 1, 1}, false, 3), 1e9) == 3);
}

TEST_CASE("algorithms refuse what they do not implement")
{
  // PAT: all-gather and reduce-scatter only, one member per node (NCCL's ncclPatEnable).
  const auto& pat = CollectiveRegistry::get("pat", "");
  CHECK(supported(pat, CollectiveOp::AllGather, group_shape(5)));
  CHECK_FALSE(supported(pat, CollectiveOp::AllReduce, group_shape(5)));
  CHECK_FALSE(supported(pat, CollectiveOp::AllGather, nodes_of(2, 4)));
  CHECK(pat.simple_protocol_only);
  const auto& direct = CollectiveRegistry::get("direct", "");
  const auto& hd     = CollectiveRegistry::get("halving_doubling", "");
  const auto& tree   = CollectiveRegistry::get("tree", "");
  const auto& hier   = CollectiveRegistry::get("hierarchical", "");
  const auto& nvls   = CollectiveRegistry::get("nvls", "");
  CHECK_THROWS_WITH(hd.steps(CollectiveOp::AllReduce, group_shape(6), 1.0), Catch::Contains("power-of-two") && Catch::Contains("6"));
  CHECK_THROWS_AS(hd.steps(CollectiveOp::AllGather, group_shape(12), 1.0), std::invalid_argument);
  CHECK_THROWS_WITH(hd.steps(CollectiveOp::AllToAll, group_shape(8), 1.0), Catch::Contains("all_to_all"));
  CHECK_THROWS_WITH(direct.steps(CollectiveOp::Broadcast, group_shape(8), 1.0), Catch::Contains("broadcast"));
  CHECK_THROWS_AS(direct.steps(CollectiveOp::Reduce, group_shape(8), 1.0), std::invalid_argument);
  CHECK_THROWS_WITH(tree.steps(CollectiveOp::AllGather, group_shape(8), 1.0), Catch::Contains("all_gather"));
  CHECK_THROWS_WITH(hier.steps(CollectiveOp::AllReduce, group_shape(std::vector<int>{0, 0, 1}), 1.0),
                    Catch::Contains("same number of members on every node"));
  CHECK_THROWS_WITH(hier.steps(CollectiveOp::ReduceScatter, nodes_of(2, 2), 1.0), Catch::Contains("reduce_scatter"));
  CHECK_THROWS_WITH(nvls.steps(CollectiveOp::AllReduce, nodes_of(1, 8, false), 1.0), Catch::Contains("NVSwitch"));
  CHECK_THROWS_WITH(nvls.steps(CollectiveOp::AllReduce, nodes_of(2, 4, true), 1.0), Catch::Contains("one node"));
  CHECK_NOTHROW(nvls.steps(CollectiveOp::AllReduce, nodes_of(1, 8, true), 1.0));
}

TEST_CASE("collective_algorithm forces an algorithm per collective type")
{
  const auto chosen = collective_choice("ring", {{"all_reduce", "tree"}, {"all_to_all", "direct"}}, "simulation.collective_algorithm");
  const GroupShape g = group_shape(8);
  CHECK(concrete_algorithm(chosen, CollectiveOp::AllReduce, g, 1e6).name == "tree");
  CHECK(concrete_algorithm(chosen, CollectiveOp::AllGather, g, 1e6).name == "ring");
  CHECK(concrete_algorithm(chosen, CollectiveOp::AllToAll, g, 1e6).name == "direct");
  CHECK(bytes_sent_per_member(chosen, CollectiveOp::AllGather, g, 8e6) == Approx(7e6));
  CHECK_THROWS_WITH(collective_choice("ring", {{"allreduce", "tree"}}, "simulation.collective_algorithm"),
                    Catch::Contains("simulation.collective_algorithm.allreduce") && Catch::Contains("all_reduce"));
  CHECK_THROWS_WITH(collective_choice("ring", {{"all_reduce", "trea"}}, "simulation.collective_algorithm"),
                    Catch::Contains("simulation.collective_algorithm.all_reduce") && Catch::Contains("tree"));
}

TEST_CASE("auto picks as NCCL's tuner: tree for small messages across nodes, ring for large, NVLS in the switch")
{
  const auto& a = CollectiveRegistry::get("auto", "");
  GroupShape across = group_shape(16); // 16 nodes, one member each
  across.inter      = PathCost{5e-6, 25e9};
  CHECK(concrete_algorithm(a, CollectiveOp::AllReduce, across, 64e3).name == "tree");
  CHECK(concrete_algorithm(a, CollectiveOp::AllReduce, across, 4e9).name == "ring");
  GroupShape switch_node = nodes_of(1, 8, true);
  switch_node.intra      = PathCost{1e-6, 350e9};
  CHECK(concrete_algorithm(a, CollectiveOp::AllReduce, switch_node, 256e6).name == "nvls");
  switch_node.in_switch_reduction = false;
  CHECK(concrete_algorithm(a, CollectiveOp::AllReduce, switch_node, 256e6).name == "ring");
  CHECK(concrete_algorithm(a, CollectiveOp::AllToAll, across, 1e6).name == "direct");
  CHECK(concrete_algorithm(a, CollectiveOp::AllGather, across, 1e6).name == "ring");
}

TEST_CASE("replayed collectives take their textbook time on an idle fat-tree")
{
  const double B = 25e9, L = 5e-6;
  auto n         = GENERATE(4, 8, 16);
  auto S         = GENERATE(1e6, 64e6, 1e9);
  const double levels = std::log2(n);
  struct Case {
    const char* algorithm;
    CollectiveOp op;
    long long activities; // -1: not counted
    double latencies, bandwidth_bytes; // time = latencies·α + bandwidth_bytes/B
  };
  // Pipelined chain over n-1 hops in C chunks: (C + n - 2) chunk times.
  const double C  = pipeline_chunks(S);
  // A tree's half in NCCL's tree chunks (models/collectives/tree.cpp): its all-reduce takes 2 (chunks + 1)
  // steps; NCCL's btree over 2^L nodes has height L.
  const double Ct = CollectiveRegistry::get("tree", "test").steps(CollectiveOp::AllReduce, group_shape(n), S) / 2 - 1;
  const Case cases[] = {
      {"ring", CollectiveOp::AllReduce, n * 2LL * (n - 1), 2.0 * (n - 1), 2.0 * (n - 1) / n * S},
      {"halving_doubling", CollectiveOp::AllReduce, n * 2LL * int(levels), 2 * levels, 2.0 * (n - 1) / n * S},
      {"halving_doubling", CollectiveOp::ReduceScatter, n * (long long)levels, levels, double(n - 1) / n * S},
      {"pat", CollectiveOp::AllGather, n * (long long)levels, levels, double(n - 1) / n * S},
      {"pat", CollectiveOp::ReduceScatter, n * (long long)levels, levels, double(n - 1) / n * S},
      {"direct", CollectiveOp::AllGather, n * (n - 1LL), n - 1.0, double(n - 1) / n * S},
      {"direct", CollectiveOp::AllReduce, n * 2LL * (n - 1), 2.0 * (n - 1), 2.0 * (n - 1) / n * S},
      {"direct", CollectiveOp::AllToAll, n * (n - 1LL), n - 1.0, double(n - 1) / n * S},
      {"ring", CollectiveOp::Broadcast, (n - 1) * (long long)C, C + n - 2, (C + n - 2) * S / C},
      {"ring", CollectiveOp::Reduce, (n - 1) * (long long)C, C + n - 2, (C + n - 2) * S / C},
      // Double binary tree, single-GPU nodes: two trees of c = S/2C per chunk, each reduce then
      // broadcast over its height H. A node sends to (receives from) two children at once, so a
      // chunk hop costs 2c/B, except next to the root, which has one child in NCCL's btree; the
      // chunks' latencies overlap (NCCL_STEPS slots in flight), so only the depth's count:
      // per phase (C-1)·2c/B + Hα + (2H-1)c/B.
      {"tree", CollectiveOp::AllReduce, -1, 2 * levels, (2 * Ct + 2 * levels - 3) * S / Ct},
      // Single-GPU nodes: the hierarchical all-reduce is the ring across nodes.
      {"hierarchical", CollectiveOp::AllReduce, n * 2LL * (n - 1), 2.0 * (n - 1), 2.0 * (n - 1) / n * S},
  };
  for (const Case& c : cases) {
    INFO(c.algorithm << " " << collective_name(c.op) << " n=" << n << " S=" << S);
    Replayed r = replay_collective(c.algorithm, c.op, n, S, B, L);
    REQUIRE(r.alpha > 0);
    CHECK(r.bandwidth == Approx(B));
    // Replayed transfer by transfer: one per member and step, none timed by its closed form.
    CHECK_FALSE(r.analytic);
    if (c.activities >= 0)
      CHECK(r.activities == c.activities);
    const double textbook = c.latencies * r.alpha + c.bandwidth_bytes / r.bandwidth;
    if (std::string(c.algorithm) == "tree") {
      // The replay keeps a few chunks of each lane in flight (flow_slots), which share the link
      // fairly where NCCL sends them in order: between the textbook and a replay whose every
      // chunk waits for the one before to arrive, (C + H - 1) latencies per phase.
      const double lock_step = 2 * (Ct + levels - 1) * r.alpha + c.bandwidth_bytes / r.bandwidth;
      CHECK(r.seconds >= textbook * 0.98);
      CHECK(r.seconds <= lock_step * 1.02);
      // The analytic fidelity's figure sends a lane's chunks in order (the textbook), but counts
      // a member's flows of both trees in one step as sharing its link although they are
      // staggered: an upper bound, within 10 %.
      CHECK(r.closed_form >= textbook * 0.98);
      CHECK(r.closed_form <= textbook * 1.1);
    } else {
      CHECK(r.seconds == Approx(textbook).epsilon(0.02));
      CHECK(r.closed_form == Approx(textbook).epsilon(0.02));
    }
  }
}

namespace {

// Bytes the members of `node` send to members of other nodes, over every lane and step.
double bytes_across(const CollectiveAlgorithm& a0, CollectiveOp op, const GroupShape& g, double S, int node)
{
  const auto& a   = concrete_algorithm(a0, op, g, S);
  double total    = 0;
  const int steps = a.steps(op, g, S);
  for (int lane = 0; lane < lanes_of(a, op, g, S); ++lane)
    for (int m : g.node_members[static_cast<size_t>(node)])
      for (int k = 0; k < steps; ++k) {
        const CollectiveStep s = a.step(op, g, S, lane, m, k);
        for (int q = 0; q < s.sends; ++q)
          if (g.node_of_member[static_cast<size_t>(s.send_to[static_cast<size_t>(q)])] != node)
            total += s.bytes;
      }
  return total;
}

// A DGX-1's hybrid cube mesh as the engine measures it (topologies/nodes/dgx1_cube_mesh.cpp):
// a pair joined by one or two NVLinks at one hop, the others two hops apart.
std::vector<std::vector<PathCost>> cube_mesh(const std::vector<int>& gpus)
{
  const int width[8][8] = {{0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0},
                           {2, 1, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
                           {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};
  const size_t n = gpus.size();
  std::vector<std::vector<PathCost>> cost(n, std::vector<PathCost>(n));
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      const int w = width[gpus[a]][gpus[b]];
      cost[a][b]  = w > 0 ? PathCost{1e-6, w * 25e9} : PathCost{2e-6, 25e9};
    }
  return cost;
}

} // namespace

TEST_CASE("across 2 nodes the trees put half the ring's bytes through each node's NICs", "[collectives_nccl]")
{
  // The bytes on the wire: SHARP's reduction rate, which stretches CollNet's steps across, aside
  // (checked at the end).
  LinkEfficiency wire = link_efficiency();
  const double sharp  = wire.in_network_reduction;
  wire.in_network_reduction = 0;
  auto scope = std::make_unique<ScopedLinkEfficiency>(wire);
  const double S   = 1 << 28;
  const auto& ring = CollectiveRegistry::get("ring", "");
  const auto& tree = CollectiveRegistry::get("tree", "");
  const auto& nvlt = CollectiveRegistry::get("nvls_tree", "");
  const auto& coll = CollectiveRegistry::get("collnet", "");
  GroupShape two = nodes_of(2, 8, true);
  two.in_network_reduction = true;
  for (int node : {0, 1}) {
    INFO("node " << node);
    CHECK(bytes_across(ring, CollectiveOp::AllReduce, two, S, node) == Approx(2.0 * 15 / 16 * S));
    CHECK(bytes_across(tree, CollectiveOp::AllReduce, two, S, node) == Approx(S));
    CHECK(bytes_across(nvlt, CollectiveOp::AllReduce, two, S, node) == Approx(S));
    CHECK(bytes_across(coll, CollectiveOp::AllReduce, two, S, node) == Approx(S));
  }
  // Over more nodes a node internal in one tree sends 2S, as much as the ring; CollNet still S.
  GroupShape eight = nodes_of(8, 4, true);
  eight.in_network_reduction = true;
  double tree_total = 0;
  for (int node = 0; node < 8; ++node) {
    const double across = bytes_across(nvlt, CollectiveOp::AllReduce, eight, S, node);
    CHECK(across <= 2 * S * (1 + 1e-9));
    tree_total += across;
    CHECK(bytes_across(coll, CollectiveOp::AllReduce, eight, S, node) == Approx(S));
  }
  CHECK(tree_total == Approx(2 * 7 * S)); // 2 trees x 7 edges x (S/2 up + S/2 down)
  // The switches reduce at links.json's fraction of the NIC's rate: each step across takes as long
  // as 1/fraction of its bytes would on the NIC.
  scope.reset();
  REQUIRE(sharp > 0);
  CHECK(bytes_across(coll, CollectiveOp::AllReduce, eight, S, 0) == Approx(S / sharp));
  scope = std::make_unique<ScopedLinkEfficiency>(wire);
  // Inside the node NVLS-tree's GPU links carry S + S/k each way (the NVSwitch's share), CollNet's
  // without NVLS the scatter and the gather, 2(k-1)/k S.
  for (int m : {0, 5}) {
    const double sent = bytes_sent_per_member(nvlt, CollectiveOp::AllReduce, two, S, m);
    CHECK(sent == Approx(S * (1 + 1.0 / 8) + S / 8)); // the switch's share, then its trees' S/8 across
    CHECK(bytes_received_per_member(nvlt, CollectiveOp::AllReduce, two, S, m) == Approx(sent));
  }
  GroupShape plain = nodes_of(2, 4, false);
  plain.in_network_reduction = true;
  CHECK(bytes_sent_per_member(coll, CollectiveOp::AllReduce, plain, S, 1) == Approx(2.0 * 3 / 4 * S + S / 4));
  for (const GroupShape& g : {two, eight, plain})
    for (const CollectiveAlgorithm* a : {&nvlt, &coll})
      if (supported(*a, CollectiveOp::AllReduce, g))
        for (double bytes : {1e3, 64e6})
          check_matching(*a, CollectiveOp::AllReduce, g, bytes);
}

TEST_CASE("nvls_tree and collnet refuse what the platform cannot run", "[collectives_nccl]")
{
  const auto& nvlt = CollectiveRegistry::get("nvls_tree", "");
  const auto& coll = CollectiveRegistry::get("collnet", "");
  CHECK_THROWS_WITH(nvlt.steps(CollectiveOp::AllReduce, nodes_of(1, 8, true), 1.0), Catch::Contains("across nodes"));
  CHECK_THROWS_WITH(nvlt.steps(CollectiveOp::AllReduce, nodes_of(2, 8, false), 1.0), Catch::Contains("NVSwitch"));
  CHECK_THROWS_WITH(nvlt.steps(CollectiveOp::AllReduce, nodes_of(4, 1, true), 1.0), Catch::Contains("at least 2"));
  CHECK_THROWS_WITH(nvlt.steps(CollectiveOp::AllGather, nodes_of(2, 8, true), 1.0), Catch::Contains("all_gather"));
  CHECK_THROWS_WITH(coll.steps(CollectiveOp::AllReduce, nodes_of(2, 8, true), 1.0),
                    Catch::Contains("SHARP") && Catch::Contains("platform.network.sharp"));
  GroupShape one = nodes_of(1, 8);
  one.in_network_reduction = true;
  CHECK_THROWS_WITH(coll.steps(CollectiveOp::AllReduce, one, 1.0), Catch::Contains("one node"));
  GroupShape sharp = nodes_of(4, 2);
  sharp.in_network_reduction = true;
  CHECK_NOTHROW(coll.steps(CollectiveOp::AllReduce, sharp, 1.0));
  CHECK_NOTHROW(nvlt.steps(CollectiveOp::AllReduce, nodes_of(2, 8, true), 1.0));
}

TEST_CASE("auto considers NVLS-tree and CollNet only where the platform has them", "[collectives_nccl]")
{
  const auto& a = CollectiveRegistry::get("auto", "");
  auto names    = [&](const GroupShape& g) {
    std::set<std::string> out;
    for (const auto* c : a.candidates(CollectiveOp::AllReduce, g))
      out.insert(c->name);
    return out;
  };
  GroupShape g = nodes_of(2, 8, false);
  CHECK(names(g) == std::set<std::string>{"ring", "tree"});
  g = nodes_of(2, 8, true);
  CHECK(names(g) == std::set<std::string>{"ring", "tree", "nvls_tree"});
  g.in_network_reduction = true;
  CHECK(names(g) == std::set<std::string>{"ring", "tree", "nvls_tree", "collnet"});
  // Two NVLS nodes of 8 H100s with 8 NICs each: the NVLS-tree halves what crosses the NICs and
  // wins on large messages.
  GroupShape h100 = nodes_of(2, 8, true);
  h100.intra      = PathCost{1.3e-6, 351e9};
  h100.inter      = PathCost{1.8e-6, 46e9};
  CHECK(concrete_algorithm(a, CollectiveOp::AllReduce, h100, 1 << 30).name == "nvls_tree");
}

TEST_CASE("NCCL's ring search finds the DGX-1 cube mesh's rings", "[collectives_nccl]")
{
  const std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  const auto rings = find_rings(cube_mesh(all));
  // Three cycles, each both ways: every GPU's six NVLinks busy in both directions.
  REQUIRE(rings.size() == 6);
  std::map<std::pair<int, int>, int> used;
  for (const auto& r : rings) {
    REQUIRE(r.size() == 8);
    CHECK(std::set<int>(r.begin(), r.end()).size() == 8);
    for (size_t i = 0; i < r.size(); ++i)
      ++used[{r[i], r[(i + 1) % r.size()]}];
  }
  const auto cost = cube_mesh(all);
  for (const auto& [pair, times] : used) {
    INFO(pair.first << " -> " << pair.second);
    CHECK(cost[static_cast<size_t>(pair.first)][static_cast<size_t>(pair.second)].latency_s == 1e-6); // one hop
    CHECK(times == std::lround(cost[static_cast<size_t>(pair.first)][static_cast<size_t>(pair.second)].bandwidth_Bps / 25e9));
  }
  CHECK(used.size() == 32); // 16 bundles, both directions
  // One quad: two cycles both ways; the ring runs one lane on each.
  GroupShape quad = nodes_of(1, 4);
  quad.rings      = find_rings(cube_mesh({0, 1, 2, 3}));
  CHECK(quad.rings.size() == 4);
  CHECK(lanes_of(CollectiveRegistry::get("ring", ""), CollectiveOp::AllReduce, quad, 1e9) == 4);
  check_matching(CollectiveRegistry::get("ring", ""), CollectiveOp::AllReduce, quad, 1e6);
  CHECK(bytes_sent_per_member(CollectiveRegistry::get("ring", ""), CollectiveOp::AllReduce, quad, 1e6, 2) ==
        Approx(2.0 * 3 / 4 * 1e6));
  // A switch (every pair alike), or fewer than three members: no rings of its own.
  std::vector<std::vector<PathCost>> alike(8, std::vector<PathCost>(8, PathCost{1e-6, 300e9}));
  CHECK(find_rings(alike).empty());
  CHECK(find_rings(cube_mesh({0, 3})).empty());
}

TEST_CASE("rings on a full mesh share no link direction, inside a node and across nodes", "[collectives_nccl]")
{
  // Inside one node: directed rings over all n members, no link direction twice. On 8 GPUs the
  // seven of a decomposition of the complete directed graph (every link both ways); on 4 and 6,
  // which have none, the most the search finds.
  auto [n, want] = GENERATE(table<int, size_t>({{3, 2}, {4, 2}, {5, 4}, {6, 4}, {7, 6}, {8, 7}}));
  INFO(n << " members");
  const auto rings = mesh_rings(n);
  CHECK(rings.size() == want);
  std::set<std::pair<int, int>> used;
  for (const auto& r : rings) {
    REQUIRE(r.size() == static_cast<size_t>(n));
    CHECK(std::set<int>(r.begin(), r.end()).size() == static_cast<size_t>(n));
    for (size_t i = 0; i < r.size(); ++i)
      CHECK(used.insert({r[i], r[(i + 1) % r.size()]}).second);
  }
  // The ring runs one lane on each, and every lane's steps pair up.
  GroupShape node = nodes_of(1, n);
  node.full_mesh  = true;
  node.rings      = rings;
  CHECK(lanes_of(CollectiveRegistry::get("ring", ""), CollectiveOp::AllReduce, node, 1e9) == static_cast<int>(want));
  check_matching(CollectiveRegistry::get("ring", ""), CollectiveOp::AllReduce, node, 1e6);
  CHECK(mesh_rings(2).empty());
  CHECK(mesh_rings(9).empty()); // beyond the largest xGMI node
}

TEST_CASE("across full-mesh nodes each ring crosses a node along a path of its own", "[collectives_nccl]")
{
  // k paths over k members that use every link direction of the node once, one starting at each
  // member (lane l enters by member l) and one ending at each (so each NIC carries one ring each
  // way). None exists on 3 or 5 members: the rings keep a switch node's rotated orders there.
  const int k = GENERATE(2, 4, 6, 7, 8);
  INFO(k << " members a node");
  const auto paths = mesh_paths(k);
  REQUIRE(paths.size() == static_cast<size_t>(k));
  std::set<std::pair<int, int>> used;
  std::set<int> ends;
  for (int l = 0; l < k; ++l) {
    const auto& p = paths[static_cast<size_t>(l)];
    REQUIRE(p.size() == static_cast<size_t>(k));
    CHECK(p.front() == l);
    CHECK(std::set<int>(p.begin(), p.end()).size() == static_cast<size_t>(k));
    ends.insert(p.back());
    for (size_t i = 0; i + 1 < p.size(); ++i)
      CHECK(used.insert({p[i], p[i + 1]}).second);
  }
  CHECK(used.size() == static_cast<size_t>(k * (k - 1)));
  CHECK(ends.size() == static_cast<size_t>(k));
  // Three nodes of k: the ring's lanes follow the paths, and every lane's steps pair up.
  GroupShape g  = nodes_of(3, k);
  g.full_mesh   = true;
  g.node_orders = paths;
  const auto& ring = CollectiveRegistry::get("ring", "");
  check_matching(ring, CollectiveOp::AllReduce, g, 1e6);
  for (int lane = 0; lane < k; ++lane) {
    const int member       = g.node_members[1][static_cast<size_t>(lane)];
    const CollectiveStep s = ring.step(CollectiveOp::AllReduce, g, 1e6, lane, member, 0);
    REQUIRE(s.sends == 1);
    const auto& order = paths[static_cast<size_t>(lane)];
    // Lane l enters node 1 by its member l and goes on to the next member of its path.
    CHECK(g.local_rank[static_cast<size_t>(s.send_to[0])] == order[1]);
  }
  CHECK(mesh_paths(3).empty());
  CHECK(mesh_paths(5).empty());
}

TEST_CASE("a ring's uncontended time in closed form is the step-by-step walk's", "[collectives]")
{
  // The same ring without its uniform_steps declaration walks every member's every step.
  const CollectiveAlgorithm& ring = CollectiveRegistry::get("ring", "");
  CollectiveAlgorithm walked      = ring;
  walked.uniform_steps            = nullptr;
  // Paths of unlike cost: inside a node 1 us and 300 GB/s, across 5 us and 25 GB/s, and one
  // node's NIC slower, so that the slowest member is not the first.
  auto shapes = std::vector<GroupShape>{nodes_of(1, 8), nodes_of(4, 8), nodes_of(16, 1), nodes_of(3, 4)};
  GroupShape quad = nodes_of(1, 4);
  quad.rings      = find_rings(cube_mesh({0, 1, 2, 3}));
  shapes.push_back(quad);
  for (const auto& g : shapes)
    for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter})
      for (double bytes : {8.0, 1e6, 3e9}) {
        auto path = [&g](int x, int y) {
          if (g.node_of_member[static_cast<size_t>(x)] == g.node_of_member[static_cast<size_t>(y)])
            return PathCost{1e-6, 300e9};
          return PathCost{5e-6, g.node_of_member[static_cast<size_t>(x)] == 1 ? 12.5e9 : 25e9};
        };
        INFO(g.n << " members on " << g.nodes() << " nodes, " << collective_name(op) << ", " << bytes << " B");
        const double closed = uncontended_seconds(ring, op, g, bytes, path);
        CHECK(closed > 0);
        CHECK(closed == Approx(uncontended_seconds(walked, op, g, bytes, path)).epsilon(1e-12));
      }
}

TEST_CASE("an all-to-all across nodes takes the NICs' time for the bytes that leave each node", "[collectives]")
{
  // NCCL's maintainers: on 2 nodes half an all-to-all's traffic is inter-node, so its bus
  // bandwidth is twice the network bandwidth per GPU, N/(N-1) times it on N nodes
  // (https://github.com/NVIDIA/nccl-tests/issues/130). The peers inside the node and outside it
  // are two lanes side by side (models/collectives/direct.cpp).
  const CollectiveAlgorithm& direct = CollectiveRegistry::get("direct", "");
  const double S = 1e9, nic = 25e9;
  for (int nodes : {2, 4, 8}) {
    const GroupShape g = nodes_of(nodes, 8);
    auto path          = [&g](int x, int y) {
      const bool inside = g.node_of_member[static_cast<size_t>(x)] == g.node_of_member[static_cast<size_t>(y)];
      return inside ? PathCost{0, 300e9} : PathCost{0, 25e9};
    };
    INFO(nodes << " nodes of 8");
    REQUIRE(lanes_of(direct, CollectiveOp::AllToAll, g, S) == 2);
    const int n   = g.n;
    const double t = uncontended_seconds(direct, CollectiveOp::AllToAll, g, S, path);
    // The bytes that leave a GPU's node, (n - 8) / n of its buffer, over its NIC.
    CHECK(t == Approx((n - 8) * S / n / nic).epsilon(1e-9));
    const double busbw = S / t * (n - 1) / n;
    CHECK(busbw == Approx(nic * nodes / (nodes - 1.0) * (n - 1) / n).epsilon(1e-9));
    check_matching(direct, CollectiveOp::AllToAll, g, S);
  }
}

TEST_CASE("an all-to-all over more than 256 GPUs across nodes is timed by its closed form, as its walk", "[collectives]")
{
  // 40 nodes of 8: every step of a lane costs its first (CollectiveAlgorithm::steps_alike), the
  // node's own lane for its 7 steps: the walk over all 320 x 312 member-steps gives the same.
  // 1,000 nodes of 8 walked took minutes and gigabytes (models/collectives/direct.cpp).
  const CollectiveAlgorithm& direct = CollectiveRegistry::get("direct", "");
  CollectiveAlgorithm walked        = direct;
  walked.steps_alike                = {};
  const double S                    = 1e9;
  for (const auto& [inside_latency, inside_bandwidth] : {std::pair{1e-6, 300e9}, std::pair{20e-6, 1e9}}) {
    const GroupShape g = nodes_of(40, 8);
    auto path          = [&g, inside_latency = inside_latency, inside_bandwidth = inside_bandwidth](int x, int y) {
      const bool inside = g.node_of_member[static_cast<size_t>(x)] == g.node_of_member[static_cast<size_t>(y)];
      return inside ? PathCost{inside_latency, inside_bandwidth} : PathCost{5e-6, 25e9};
    };
    INFO("inside the node " << inside_bandwidth / 1e9 << " GB/s");
    REQUIRE(direct.steps_alike(CollectiveOp::AllToAll, g));
    REQUIRE_FALSE(direct.steps_alike(CollectiveOp::AllToAll, nodes_of(32, 8))); // 256: walked
    for (CollectiveOp op : {CollectiveOp::AllToAll, CollectiveOp::AllReduce}) {
      const double closed = uncontended_seconds(direct, op, g, S, path);
      CHECK(closed == Approx(uncontended_seconds(walked, op, g, S, path)).epsilon(1e-9));
    }
  }
}

TEST_CASE("an all-to-all runs with LL or Simple, never LL128, as NCCL's point-to-point", "[collectives]")
{
  const auto& direct = CollectiveRegistry::get("direct", "");
  CHECK(direct.point_to_point);
  const auto protocols = protocols_for(direct);
  CHECK(protocols == std::vector<Protocol>{Protocol::LL, Protocol::Simple});
}

TEST_CASE("a cluster's own calibration sets a protocol's bytes on the wire and its latency for algorithms made before it",
          "[collectives_nccl]")
{
  // `stepsim collective --network-calibration` and a scenario's simulation.network_calibration lay
  // the file over links.json once the collective algorithms exist: what each protocol puts on the
  // wire and its base latency are read as each collective is timed, and the picks and launch
  // times cached under links.json are not reused under the file (it made LL's fitted wire factor
  // a no-op there: a log's fit reported one curve and the file gave another).
  const auto& ll     = with_protocol(CollectiveRegistry::get("ring", ""), Protocol::LL);
  GroupShape g       = nodes_of(1, 8);
  g.intra            = PathCost{1e-6, 100e9}; // a path with a latency: the launch is paid
  const double bytes = 1 << 20;
  const double shipped_s = planned_seconds(ll, CollectiveOp::AllReduce, g, bytes);
  const double shipped_launch_s = launch_seconds(ll, CollectiveOp::AllReduce, g, bytes);
  // What a megabyte more costs: the bytes on the wire alone (the steps' latencies do not grow).
  const double shipped_per_mb_s = planned_seconds(ll, CollectiveOp::AllReduce, g, 2 * bytes) - shipped_s;
  LinkEfficiency mine = link_efficiency();
  auto& cost          = mine.protocols[static_cast<size_t>(Protocol::LL)];
  cost.wire_factor *= 10;
  cost.base_ring_s += 10e-6;
  {
    ScopedLinkEfficiency scope(mine);
    const double launch_s = launch_seconds(ll, CollectiveOp::AllReduce, g, bytes);
    CHECK(launch_s == Approx(shipped_launch_s + 10e-6));
    // Ten times the bytes on the wire: each megabyte more ten times as long.
    CHECK(planned_seconds(ll, CollectiveOp::AllReduce, g, 2 * bytes) -
              planned_seconds(ll, CollectiveOp::AllReduce, g, bytes) ==
          Approx(10 * shipped_per_mb_s).epsilon(1e-6));
  }
  CHECK(planned_seconds(ll, CollectiveOp::AllReduce, g, bytes) == shipped_s);
}
