// Ring all-reduce replayed on SimGrid against its closed form 2(n-1)/n·S/B + 2(n-1)·L, with every
// member simulated and with one representative standing for the rest.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "models/collectives/protocol.hpp"
#include "models/link_calibration.hpp"
#include "topologies/nodes/node_type.hpp"
#include "sim/engine/replay.hpp"
#include "topologies/platform.hpp"
#include "tools/driver/collective_bench.hpp"

#include <simgrid/s4u.hpp>

#include <catch2/catch.hpp>

#include <numeric>

using namespace stepsim;

namespace {

// n single-GPU nodes whose NICs have bandwidth B and latency L between them.
double replay_all_reduce(int n, double bytes, double bandwidth, double latency, bool every_member)
{
  return testing::in_child([&] {
           auto engine            = testing::start_engine();
           PlatformSpec spec      = testing::single_gpu_nodes(n, bandwidth, latency);
           BuiltPlatform platform = build_platform(spec);
           std::vector<int> members(static_cast<size_t>(n));
           std::iota(members.begin(), members.end(), 0);
           Workload w = collective_workload(spec, members, CollectiveOp::AllReduce, bytes);
           if (!every_member)
             w.ranks.resize(1); // rank 0 stands for the others
           ReplayResult result = replay(w, platform.gpus, CollectiveRegistry::get("ring", ""));
           return nlohmann::json(result.end_s);
         })
      .get<double>();
}

} // namespace

TEST_CASE("ring all-reduce time equals 2(n-1)/n·S/B + 2(n-1)·L")
{
  const double B = 25e9, L = 5e-6;
  auto n         = GENERATE(2, 3, 4, 8, 16);
  auto S         = GENERATE(1e6, 64e6, 1e9);
  double expected = 2.0 * (n - 1) / n * S / B + 2.0 * (n - 1) * L;
  INFO("n=" << n << " S=" << S);
  CHECK(replay_all_reduce(n, S, B, L, true) == Approx(expected).epsilon(0.02));
  CHECK(replay_all_reduce(n, S, B, L, false) == Approx(expected).epsilon(0.02));
}

TEST_CASE("ring steps send (n-1)/n of the buffer per phase")
{
  const auto& ring = CollectiveRegistry::get("ring", "");
  for (int n : {2, 3, 5, 8}) {
    CHECK(bytes_sent_per_member(ring, CollectiveOp::AllReduce, group_shape(n), 1000.0) == Approx(2.0 * (n - 1) / n * 1000.0));
    CHECK(bytes_sent_per_member(ring, CollectiveOp::AllGather, group_shape(n), 1000.0) == Approx(double(n - 1) / n * 1000.0));
    CHECK(bytes_sent_per_member(ring, CollectiveOp::ReduceScatter, group_shape(n), 1000.0) == Approx(double(n - 1) / n * 1000.0));
  }
}

namespace {

// A ring all-reduce of every GPU of `spec`, replayed with every member simulated, on the platform
// as `stepsim collective` builds it.
double every_member_ring(const PlatformSpec& spec, double bytes)
{
  return testing::in_child([&] {
           auto engine                = testing::start_engine();
           const LinkEfficiency links = load_link_efficiency();
           const auto members         = benchmark_group(spec, 0);
           Workload w                 = collective_workload(spec, members, CollectiveOp::AllReduce, bytes);
           BuiltPlatform platform     = build_platform(with_achieved_bandwidth(spec, links), ranks_in_use(w));
           ReplayOptions options;
           options.collective_base_latency_s = links.collective_base_latency_s;
           // The ring with NCCL's protocol picked per size, as `stepsim collective` runs it.
           const CollectiveAlgorithm ring =
               with_protocol_choice(collective_choice("ring", {}, "ring"), "auto", "protocol");
           return nlohmann::json(replay(w, platform.gpus, ring, options).end_s);
         })
      .get<double>();
}

} // namespace

TEST_CASE("the collective benchmark's lone ring member takes the time of every member replayed")
{
  // A NIC per GPU on a rail fabric; two GPUs per NIC (shadows on the shared NIC); a fabric thinned
  // 2:1 above the leaves with few GPUs per leaf (shadows on the uplinks); PCIe nodes.
  Scenario p4d        = platform_scenario("aws-p4d", "", 4);
  Scenario thinned    = platform_scenario("dgx-a100-superpod", "", 8);
  thinned.platform.network.topology         = "fat_tree";
  thinned.platform.network.leaf_radix       = 2;
  thinned.platform.network.oversubscription = 2;
  for (const Scenario& s : {platform_scenario("dgx-a100-superpod", "", 4), p4d, thinned,
                            platform_scenario("pcie-cloud-box", "", 2)})
    for (double bytes : {64e3, 16e6, 1e9}) {
      INFO(s.name << ", " << bytes << " B");
      const auto members = benchmark_group(s.platform, 0);
      const double lone  = time_collective(s.platform, members, CollectiveOp::AllReduce, bytes, "ring").seconds;
      CHECK(lone == Approx(every_member_ring(s.platform, bytes)).epsilon(1e-4)); // 0.01 %: the lone member sums its steps as one transfer
    }
}

TEST_CASE("the collective benchmark takes a platform of several node groups")
{
  // The Wi-Fi edge preset mixes device groups; its carrier job replays nothing, so no rank need
  // stand for a stage spread over them (it was refused as a reduced-fidelity plan).
  const Scenario edge = platform_scenario("jetson-wifi-edge", "", 0);
  REQUIRE(edge.platform.node_groups.size() > 1);
  const auto members = benchmark_group(edge.platform, 0);
  CHECK(time_collective(edge.platform, members, CollectiveOp::AllReduce, 64e3, "auto").seconds > 0);
}

TEST_CASE("pipelined collectives pay their protocol latency once per hop and not once per chunk")
{
  // NCCL's tuner charges a tree 2 x ((ppn-1) intraLat + log2(nNodes) interLat) and NVLS_TREE
  // intraLat + 2 log2(nNodes) interLat, whatever the size (v2.20.3 tuning.cc): its chunks overlap
  // their latencies. So the launch of a tree over 16 nodes of 8 GPUs is the same for a buffer of
  // one chunk and for one of 64 chunks per lane, and it grows with the tree's height.
  REQUIRE(link_efficiency().protocols_loaded);
  auto shape = [](int nodes) {
    std::vector<int> node;
    for (int i = 0; i < nodes; ++i)
      for (int k = 0; k < 8; ++k)
        node.push_back(i);
    GroupShape g = group_shape(node, true);
    g.intra      = PathCost{1.3e-6, 350e9};
    g.inter      = PathCost{2.5e-6, 46e9};
    return g;
  };
  const GroupShape g16 = shape(16), g4 = shape(4);
  for (const char* name : {"tree", "nvls_tree"}) {
    INFO(name);
    const auto& a     = with_protocol(CollectiveRegistry::get(name, "test"), Protocol::Simple);
    const double one  = launch_seconds(a, CollectiveOp::AllReduce, g16, 64e3);
    const double many = launch_seconds(a, CollectiveOp::AllReduce, g16, 16e9);
    CHECK(a.steps(CollectiveOp::AllReduce, g16, 16e9) > 4 * a.steps(CollectiveOp::AllReduce, g16, 64e3));
    CHECK(many == Approx(one));
    CHECK(launch_seconds(a, CollectiveOp::AllReduce, g4, 16e9) < many);
  }
  // The ring pays its protocol's latency on each of its 2(n-1) steps.
  const auto& ring = with_protocol(CollectiveRegistry::get("ring", "test"), Protocol::Simple);
  CHECK(launch_seconds(ring, CollectiveOp::AllReduce, g16, 16e9) > launch_seconds(ring, CollectiveOp::AllReduce, g4, 16e9));
}

TEST_CASE("the collective benchmark times a tree over more than 256 GPUs on a non-blocking fabric by its closed form")
{
  // Flow by flow a tree over 1,024 GPUs takes minutes; its closed form shares the members' own
  // links as the flows do. On 128 GPUs, where flows still run, the flows take a little longer:
  // NCCL sends a connection's in-flight chunks one after the other, which the closed form does,
  // while the flows of a lane's slots share the link fairly (flow_slots, collective.hpp), which
  // stretches each chunk's time on the link and the pipeline's fill with it.
  const double S = 64.0 * (1 << 20);
  const Scenario big = platform_scenario("dgx-a100-superpod", "", 64);
  const auto all     = benchmark_group(big.platform, 512);
  const auto tree    = time_collective(big.platform, all, CollectiveOp::AllReduce, S, "tree", false, "Simple");
  CHECK(tree.closed_form);
  CHECK(tree.seconds > 0);
  CHECK_FALSE(time_collective(big.platform, all, CollectiveOp::AllReduce, S, "ring", false, "Simple").closed_form);
  const Scenario small   = platform_scenario("dgx-a100-superpod", "", 16);
  const auto members     = benchmark_group(small.platform, 128);
  const auto flows       = time_collective(small.platform, members, CollectiveOp::AllReduce, S, "tree", false, "Simple");
  const auto closed_form = time_collective(small.platform, members, CollectiveOp::AllReduce, S, "tree", true, "Simple");
  CHECK_FALSE(flows.closed_form);
  CHECK(closed_form.seconds <= flows.seconds * 1.02);
  CHECK(closed_form.seconds >= flows.seconds * 0.8);
}

TEST_CASE("a tree's rotated lanes take as long as the lanes they rotate and are walked only where paths allow it")
{
  // 16 nodes of 8: the tree's 16 lanes are its 2 trees, each rotated through a node's 8 members.
  std::vector<int> node;
  for (int i = 0; i < 128; ++i)
    node.push_back(i / 8);
  GroupShape g = group_shape(node);
  g.intra      = PathCost{1e-6, 300e9};
  g.inter      = PathCost{5e-6, 25e9};
  const auto& tree = with_protocol(CollectiveRegistry::get("tree", "test"), Protocol::Simple);
  REQUIRE(tree.rotated_lanes);
  REQUIRE(tree.rotated_lanes(CollectiveOp::AllReduce, g, 64e6) == 2);
  CollectiveAlgorithm every_lane = tree; // the same tree, every lane walked
  every_lane.rotated_lanes       = {};
  auto by_node = [&g](int a, int b) {
    return g.node_of_member[static_cast<size_t>(a)] == g.node_of_member[static_cast<size_t>(b)] ? g.intra : g.inter;
  };
  for (double bytes : {8.0, 1e6, 64e6, 4e9}) {
    const double all = uncontended_seconds(every_lane, CollectiveOp::AllReduce, g, bytes, by_node);
    CHECK(uncontended_seconds(tree, CollectiveOp::AllReduce, g, bytes, by_node, true) == all);
    CHECK(uncontended_seconds(tree, CollectiveOp::AllReduce, g, bytes, by_node, false) == all); // checked pair by pair
  }
  // One slow GPU (member 13, the sixth of node 1) breaks the symmetry: every lane is walked.
  auto slow_one = [&](int a, int b) {
    PathCost c = by_node(a, b);
    if (a == 13 || b == 13)
      c.bandwidth_Bps /= 4;
    return c;
  };
  const double all = uncontended_seconds(every_lane, CollectiveOp::AllReduce, g, 64e6, slow_one);
  CHECK(uncontended_seconds(tree, CollectiveOp::AllReduce, g, 64e6, slow_one) == all);
  // (Walking the first two lanes alone, as paths by node would allow, gives another answer.)
  CHECK(uncontended_seconds(tree, CollectiveOp::AllReduce, g, 64e6, slow_one, true) != all);
  CHECK(all > uncontended_seconds(tree, CollectiveOp::AllReduce, g, 64e6, by_node, true));
}

TEST_CASE("the collective benchmark's table does not depend on how many sizes are timed at once")
{
  const Scenario s               = platform_scenario("dgx-a100", "", 2);
  const auto members              = benchmark_group(s.platform, 0);
  const std::vector<double> sizes = {8e3, 1e6, 64e6, 1e9};
  const auto one = time_collectives(s.platform, members, CollectiveOp::AllReduce, sizes, "auto", false, "auto", 1);
  const auto two = time_collectives(s.platform, members, CollectiveOp::AllReduce, sizes, "auto", false, "auto", 2);
  REQUIRE(one.size() == sizes.size());
  REQUIRE(two.size() == sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    CHECK(one[i].seconds == two[i].seconds);
    CHECK(one[i].algorithm == two[i].algorithm);
    CHECK(one[i].seconds == time_collective(s.platform, members, CollectiveOp::AllReduce, sizes[i], "auto").seconds);
  }
  CHECK(one[3].seconds > one[0].seconds);
}

TEST_CASE("nccl-tests -g N: an iteration takes at least N launches of its one host thread")
{
  LinkEfficiency links;
  links.group_launch_per_gpu_s = 5e-6;
  // One GPU per thread (mpirun): the collective's own time, whatever it is.
  CHECK(nccl_tests_iteration_seconds(3e-6, 1, links) == 3e-6);
  // Eight GPUs from one thread: 40 us of launches under a 25 us collective, a 100 us one above them.
  CHECK(nccl_tests_iteration_seconds(25e-6, 8, links) == Approx(40e-6));
  CHECK(nccl_tests_iteration_seconds(100e-6, 8, links) == 100e-6);
  // Without the figure nothing changes.
  CHECK(nccl_tests_iteration_seconds(25e-6, 8, LinkEfficiency{}) == 25e-6);

  // `stepsim collective --gpus-per-thread 8` on one DGX A100: the 8 KiB row is the thread's
  // launches (links.json nccl_group_launch), said in the table and the JSON; 1 GiB is not.
  const auto r = testing::run_stepsim("collective --preset dgx-a100 --nodes 1 --gpus-per-thread 8 --sizes 8KiB,1GiB --json -");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.output);
  CHECK(doc.at("gpus_per_thread") == 8);
  const double launch = link_efficiency().group_launch_per_gpu_s;
  REQUIRE(launch > 0);
  CHECK(doc["rows"][0]["host_bound"] == true);
  CHECK(doc["rows"][0]["time_us"].get<double>() == Approx(8 * launch * 1e6));
  CHECK(doc["rows"][1]["host_bound"] == false);
  const auto plain = testing::run_stepsim("collective --preset dgx-a100 --nodes 1 --sizes 8KiB,1GiB --json -");
  REQUIRE(plain.exit_code == 0);
  const auto one = nlohmann::json::parse(plain.output);
  CHECK(!one.contains("gpus_per_thread"));
  CHECK(!one["rows"][0].contains("host_bound"));
  CHECK(one["rows"][0]["time_us"].get<double>() < doc["rows"][0]["time_us"].get<double>());
  CHECK(one["rows"][1]["time_us"] == doc["rows"][1]["time_us"]);
  // Out of range: exit 2 naming the option.
  const auto bad = testing::run_stepsim("collective --preset dgx-a100 --gpus-per-thread 0 --sizes 8KiB");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("--gpus-per-thread") != std::string::npos);
  // A thread's GPUs divide the group, as nccl-tests' ranks are processes x threads x GPUs.
  const auto uneven = testing::run_stepsim("collective --preset dgx-a100 --gpus 6 --gpus-per-thread 4 --sizes 8KiB");
  CHECK(uneven.exit_code == 2);
  CHECK(uneven.output.find("--gpus-per-thread: 4 GPUs per thread do not divide the group of 6 GPUs") != std::string::npos);
  // The same in a published case: the JSON path and what was expected.
  nlohmann::json cases = {{"cases", {{{"name", "x"}, {"preset", "dgx-a100"}, {"nodes", 1}, {"gpus", 6}, {"op", "all_reduce"},
                                      {"gpus_per_thread", 4}, {"rows", {{{"bytes", 8192}, {"time_us", 30}}}}}}}};
  const auto file = testing::write_temp_file("uneven-cases.json", cases.dump());
  const auto compare = testing::run_stepsim("collective --compare " + file);
  CHECK(compare.exit_code == 2);
  CHECK(compare.output.find("cases[0].gpus_per_thread: expected a divisor of the case's 6 GPUs") != std::string::npos);
  // A case without rows has nothing to compare: refused, not printed as a case of no error.
  cases["cases"][0]["gpus_per_thread"] = 1;
  cases["cases"][0]["rows"]            = nlohmann::json::array();
  const auto empty = testing::run_stepsim("collective --compare " + testing::write_temp_file("empty-cases.json", cases.dump()));
  CHECK(empty.exit_code == 2);
  CHECK(empty.output.find("cases[0].rows: expected a non-empty array of rows") != std::string::npos);
}

TEST_CASE("A benchmark group takes the first K GPUs of each node, as nccl-tests runs N nodes x K GPUs")
{
  const Scenario two = platform_scenario("dgx-h100", "", 2);
  CHECK(benchmark_group(two.platform, 2, 1) == std::vector<int>{0, 8});         // --stride: one per node
  CHECK(benchmark_group(two.platform, 4, 2) == std::vector<int>{0, 1, 8, 9});   // --per-node 2
  CHECK(benchmark_group(two.platform, 0, 4) == std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11});
  CHECK(benchmark_group(two.platform, 2) == std::vector<int>{0, 1});            // the first GPUs
  CHECK_THROWS_WITH(benchmark_group(two.platform, 4, 3), Catch::Contains("multiple of 3"));
  CHECK_THROWS_WITH(benchmark_group(two.platform, 4, 9), Catch::Contains("--per-node"));
  // One GPU on each of two nodes crosses the NICs, two on one node only the NVSwitch.
  const double S      = 1 << 30;
  const auto across   = time_collective(two.platform, benchmark_group(two.platform, 2, 1), CollectiveOp::AllReduce, S,
                                        "ring", false, "Simple");
  const auto one_node = time_collective(two.platform, benchmark_group(two.platform, 2), CollectiveOp::AllReduce, S,
                                        "ring", false, "Simple");
  CHECK(across.seconds > 3 * one_node.seconds);
}
