// The built platform against what its specification implies: the links a route crosses, its
// bottleneck bandwidth and summed latency, the time a transfer takes on it, and the slowdown an
// oversubscribed fat-tree causes when its uplinks are the bottleneck. Also `stepsim platform`.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "sim/core/input_error.hpp"
#include "sim/simulate.hpp"
#include "sim/engine/replay.hpp"
#include "topologies/platform.hpp"
#include "tools/driver/collective_bench.hpp"

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

using namespace stepsim;

namespace {

namespace sg4 = simgrid::s4u;

// NVSwitch nodes of A100s on a two-level fat-tree of `leaf_radix` nodes per leaf.
PlatformSpec cluster(int nodes, int gpus_per_node, double nvlink_Bps, double nvlink_s, double nic_Bps, double nic_s,
                     int leaf_radix, double oversubscription)
{
  PlatformSpec spec;
  spec.node_groups              = {testing::nvswitch_nodes("A100-SXM4-80GB", nodes, gpus_per_node, nvlink_Bps, nvlink_s,
                                                           nic_Bps, nic_s)};
  spec.network.leaf_radix       = leaf_radix;
  spec.network.oversubscription = oversubscription;
  return spec;
}

bool crosses(const nlohmann::json& route, const std::string& part)
{
  return std::any_of(route["links"].begin(), route["links"].end(),
                     [&](const nlohmann::json& l) { return l.get<std::string>().find(part) != std::string::npos; });
}

// A ring all-reduce of `bytes` over `nodes` single-GPU nodes, replayed with every member.
double all_reduce_s(const PlatformSpec& spec, double bytes)
{
  return testing::in_child([&] {
           auto engine     = testing::start_engine();
           BuiltPlatform p = build_platform(spec);
           std::vector<int> members(static_cast<size_t>(spec.total_gpus()));
           std::iota(members.begin(), members.end(), 0);
           Workload w = collective_workload(spec, members, CollectiveOp::AllReduce, bytes);
           return nlohmann::json(replay(w, p.gpus, CollectiveRegistry::get("ring", "")).end_s);
         })
      .get<double>();
}

} // namespace

TEST_CASE("point-to-point transfers take the route's bottleneck bandwidth and summed latency", "[platform]")
{
  // 4 nodes of 2 GPUs with a NIC each; leaf_radix 4 NICs puts nodes 0-1 under leaf 0 and nodes 2-3
  // under leaf 1. Oversubscription 8 makes a leaf uplink 4 NICs x B / 8 = B/2, narrower than a NIC,
  // so a cross-leaf route must show it as its bottleneck.
  const double nvlink = 300e9, nvlink_s = 1e-6, nic = 25e9, nic_s = 2e-6, S = 256e6;
  const PlatformSpec spec = cluster(4, 2, nvlink, nvlink_s, nic, nic_s, 4, 8.0);
  struct Case {
    const char* name;
    int dst;
    double bottleneck, latency; // from the specification: what the route should be
    const char* must_cross;
  };
  const double uplink = 4 * nic / 8.0;
  auto c = GENERATE_COPY(Case{"NVLink, same node", 1, nvlink, nvlink_s, "nvswitch"},
                         Case{"NIC, other node under the same leaf", 2, nic, nic_s, "nic"},
                         Case{"cross-leaf, through the uplinks", 4, std::min(nic, uplink), nic_s, "uplink"});
  INFO(c.name);
  nlohmann::json r = testing::measure_route(spec, 0, c.dst, S);
  INFO(r.dump());
  CHECK(crosses(r, c.must_cross));
  if (c.dst != 4)
    CHECK_FALSE(crosses(r, "uplink"));
  CHECK(r["bottleneck_Bps"].get<double>() == Approx(c.bottleneck).epsilon(1e-9));
  CHECK(r["route_latency_s"].get<double>() == Approx(c.latency).epsilon(1e-9));
  CHECK(r["summed_latency_s"].get<double>() == Approx(c.latency).epsilon(1e-9));
  // CM02 without cross-traffic: an idle path delivers in latency + size / bottleneck.
  CHECK(r["transfer_s"].get<double>() == Approx(c.latency + S / c.bottleneck).epsilon(0.01));
}

TEST_CASE("an oversubscribed fat-tree slows an all-reduce by what its uplinks predict", "[platform]")
{
  const double B = 25e9, L = 2e-6, S = 1e9;
  const int n = 4;
  auto time_on = [&](int leaf_radix, double oversubscription) {
    return all_reduce_s(cluster(n, 1, 300e9, 1e-6, B, L, leaf_radix, oversubscription), S);
  };
  // Ring closed form with per-flow bandwidth b: 2(n-1)/n·S/b + 2(n-1)·L.
  auto ring = [&](double b) { return 2.0 * (n - 1) / n * S / b + 2.0 * (n - 1) * L; };

  SECTION("one node per leaf: every ring step crosses the uplinks, which are the bottleneck")
  {
    // leaf_radix 1: each leaf holds one node, its uplink carries B / oversubscription. Ring step
    // i → i+1 goes up leaf i's uplink and down leaf i+1's, so each direction of each uplink carries
    // exactly one flow: per-flow bandwidth min(B, B/os). At 2:1 that halves the bandwidth term:
    //   t(2)/t(1) = (2(n-1)/n·S·2/B + 2(n-1)L) / (2(n-1)/n·S/B + 2(n-1)L)  ≈ 2 for S/B ≫ n·L.
    const double blocking = time_on(1, 2.0), non_blocking = time_on(1, 1.0);
    const double expected_ratio = ring(B / 2) / ring(B);
    INFO("2:1 " << blocking << " s, 1:1 " << non_blocking << " s, expected ratio " << expected_ratio);
    CHECK(non_blocking == Approx(ring(B)).epsilon(0.02));
    CHECK(blocking / non_blocking == Approx(expected_ratio).epsilon(0.03));
  }
  SECTION("three levels: pod uplinks thinned at the core slow a ring across pods by the same law")
  {
    // One node per leaf, one leaf per pod: every ring step goes leaf → pod → core → pod → leaf.
    // Non-blocking leaves, 2:1 at the core: each pod uplink carries B/2, one flow per direction.
    auto three_levels = [&](double core_oversubscription) {
      PlatformSpec spec                     = cluster(n, 1, 300e9, 1e-6, B, L, 1, 1.0);
      spec.network.levels                   = 3;
      spec.network.pod_radix                = 1;
      spec.network.core_oversubscription    = core_oversubscription;
      return all_reduce_s(spec, S);
    };
    const double blocking = three_levels(2.0), non_blocking = three_levels(1.0);
    CHECK(non_blocking == Approx(ring(B)).epsilon(0.02));
    CHECK(blocking / non_blocking == Approx(ring(B / 2) / ring(B)).epsilon(0.03));
    // Two leaves per pod: steps inside a pod never reach the core; 0→1 and 2→3 stay in their
    // pods, 1→2 and 3→0 cross it once per direction, so 2:1 at the core still halves those steps.
    PlatformSpec pods_of_two                  = cluster(n, 1, 300e9, 1e-6, B, L, 1, 1.0);
    pods_of_two.network.levels                = 3;
    pods_of_two.network.pod_radix             = 2;
    pods_of_two.network.core_oversubscription = 4.0; // pod uplink 2B/4 = B/2
    CHECK(all_reduce_s(pods_of_two, S) / non_blocking == Approx(ring(B / 2) / ring(B)).epsilon(0.03));
  }
  SECTION("two nodes per leaf: a ring crosses each uplink direction once, so 2:1 still suffices")
  {
    // leaf_radix 2: leaf uplink = 2B/2 = B at 2:1. Ring 0→1→2→3→0 crosses leaves at 1→2 and 3→0,
    // one flow per uplink direction, so the NIC stays the bottleneck and the time does not change.
    const double blocking = time_on(2, 2.0), non_blocking = time_on(2, 1.0);
    CHECK(blocking / non_blocking == Approx(1.0).epsilon(0.01));
    CHECK(blocking == Approx(ring(B)).epsilon(0.02));
  }
}

TEST_CASE("stepsim platform prints the built links and example routes", "[platform][cli]")
{
  // 4 nodes of 2 GPUs and 2 NICs; leaf_radix 4 puts two nodes under each leaf.
  nlohmann::json doc = testing::small_scenario(2, 2, 4);
  doc["parallelism"]["tensor"]                   = 2;
  auto& group                                    = doc["platform"]["node_groups"][0];
  group["gpus_per_node"]                         = 2;
  group["nic"]                                   = {{"count", 2}, {"bandwidth", "200Gbps"}, {"latency", "2us"}};
  doc["platform"]["network"]["leaf_radix"]       = 4;
  doc["platform"]["network"]["oversubscription"] = 2;
  const std::string file = testing::write_temp_file("platform.json", doc.dump());
  const std::string out  = testing::write_temp_file("platform-out.json", "");

  auto result = testing::run_stepsim("platform " + file + " --json " + out + " --quiet");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  nlohmann::json d = nlohmann::json::parse(testing::read_text_file(out));
  CHECK(d["nodes"] == 4);
  CHECK(d["gpus"] == 8);
  REQUIRE(d["routes"].size() == 3);
  CHECK(d["routes"][0]["to_gpu"] == 1);
  CHECK(d["routes"][1]["to_gpu"] == 2);
  CHECK(d["routes"][2]["to_gpu"] == 4); // node 2: the first under the other leaf
  for (const auto& r : d["routes"]) {
    double bottleneck = 1e300, latency = 0;
    for (const auto& l : r["links"]) {
      bottleneck = std::min(bottleneck, l["bandwidth_Bps"].get<double>());
      latency += l["latency_s"].get<double>();
    }
    CHECK(r["bottleneck_Bps"].get<double>() == Approx(bottleneck));
    CHECK(r["latency_s"].get<double>() == Approx(latency));
  }
  // A leaf uplink carries its two nodes' four NICs divided by the oversubscription.
  double nic = 0, uplink = 0;
  int nics = 0, gpu_links = 0;
  for (const auto& k : d["link_kinds"]) {
    if (k["kind"] == "nodeN-nicN-link") {
      nic = k["bandwidth_Bps"].get<double>();
      nics += k["count"].get<int>();
    }
    if (k["kind"] == "leafN-uplink")
      uplink = k["bandwidth_Bps"].get<double>();
    if (k["kind"] == "nodeN-gpuN-nvswitch")
      gpu_links += k["count"].get<int>();
  }
  CHECK(nics == 8);
  CHECK(gpu_links == 8);
  CHECK(nic > 0);
  CHECK(uplink == Approx(4 * nic / 2));

  auto text = testing::run_stepsim("platform " + file);
  CHECK(text.exit_code == 0);
  CHECK(text.output.find("leafN-uplink") != std::string::npos);
  CHECK(text.output.find("GPU 0 -> GPU 4") != std::string::npos);

  auto bad = testing::run_stepsim("platform " + file + " --set platform.network.topology=ring");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("platform.network.topology") != std::string::npos);
}

TEST_CASE("a preset's fabric field that another topology does not read is named, and --set PATH=null drops it",
          "[platform]")
{
  // dgx-h100-superpod is a rail fabric with leaf_radix and oversubscription; a torus reads neither.
  const std::string torus = "platform --preset dgx-h100-superpod --nodes 4 --set platform.network.topology=torus "
                            "--set 'platform.network.torus={\"dimensions\":[4]}'";
  const auto kept = testing::run_stepsim(torus);
  INFO(kept.output);
  CHECK(kept.exit_code == 2);
  CHECK(kept.output.find("platform.network.leaf_radix: a field of fat_tree or rail_optimized fabrics, which the "
                         "\"torus\" topology does not read") != std::string::npos);
  const auto dropped = testing::run_stepsim(torus + " --set platform.network.leaf_radix=null "
                                                    "--set platform.network.oversubscription=null");
  INFO(dropped.output);
  CHECK(dropped.exit_code == 0);
  CHECK(dropped.output.find("torus") != std::string::npos);
  // Removing a field that is not there (a misspelt path), or an array's element, is refused.
  const auto misspelt = testing::run_stepsim("platform --preset dgx-a100 --set platform.network.leaf_radx=null");
  CHECK(misspelt.exit_code == 2);
  CHECK(misspelt.output.find("--set platform.network.leaf_radx=null: there is no platform.network.leaf_radx to "
                             "remove") != std::string::npos);
  const auto element = testing::run_stepsim("platform --preset dgx-a100 --set platform.node_groups.0=null");
  CHECK(element.exit_code == 2);
  CHECK(element.output.find("an element of an array cannot be removed") != std::string::npos);
}

TEST_CASE("several NICs per GPU act as one NIC of their summed bandwidth; a count with no even split is one group",
          "[platform]")
{
  nlohmann::json j          = testing::small_scenario(1, 16, 16);
  auto& group               = j["platform"]["node_groups"][0];
  group["nic"]["bandwidth"] = "100Gbps";
  struct Layout {
    const char* what;
    int nodes, gpus_per_node, nics; // as given
    int built_nics, ports;          // as built: NICs per node, 100 Gb/s ports pooled in each
  };
  for (const Layout& l : {Layout{"AWS p5: 32 x 100 Gb/s EFA for 8 H100, 4 per GPU", 2, 8, 32, 8, 4},
                          Layout{"12 NICs for 8 GPUs: 4 PCIe groups of two GPUs and three NICs", 2, 8, 12, 4, 3},
                          Layout{"a node of one GPU (GH200-style) with two NICs: one group", 16, 1, 2, 1, 2}}) {
    INFO(l.what);
    group["count"]         = l.nodes;
    group["gpus_per_node"] = l.gpus_per_node;
    group["nic"]["count"]  = l.nics;
    const Scenario s       = scenario_from_json(j);
    CHECK(s.platform.node_groups[0].nic.count == l.built_nics);
    CHECK(s.platform.node_groups[0].nic.bandwidth_Bps == Approx(l.ports * 100e9 / 8));
  }
  group["count"]         = 2;
  group["gpus_per_node"] = 8;

  group["nic"]["count"] = 3; // no common divisor with 8: one group, the GPUs sharing the three NICs as one
  const Scenario uneven  = scenario_from_json(j);
  CHECK(uneven.platform.node_groups[0].nic.count == 1);
  CHECK(uneven.platform.node_groups[0].nic.ports == 3);
  CHECK(uneven.platform.node_groups[0].nic.bandwidth_Bps == Approx(3 * 100e9 / 8));
  // `stepsim platform` gives the NICs as described and as built, and says what the layout means.
  const std::string file = testing::write_temp_file("three-nics.json", j.dump());
  const auto text        = testing::run_stepsim("platform " + file);
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.output, Catch::Contains("3 NICs per node"));
  CHECK_THAT(text.output, Catch::Contains("built as 1 group of 3 NICs of the node's 8 GPUs"));
  CHECK_THAT(text.output, Catch::Contains("one GPU alone reaches all of them"));
}

TEST_CASE("stepsim platform describes a preset or a platform file alone, each node group's NICs by kind and rate",
          "[platform][cli]")
{
  const auto r = testing::run_stepsim("platform --preset aws-p5 --nodes 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("platform of aws-p5: 2 nodes, 16 GPUs") &&
                           Catch::Contains("32 NICs per node: efa-v2 at 100 Gb/s each") &&
                           Catch::Contains("achieves 0.92 of it"));
  CHECK(testing::run_stepsim("platform").exit_code == 2);
  CHECK(testing::run_stepsim("platform configs/scenarios/default.json --preset dgx-a100").exit_code == 2);
  const auto file = testing::write_temp_file("misspelled-platform.json",
                                             R"({"platform": {"preset": "dgx-a100"}, "simulaton": {}})");
  const auto bad  = testing::run_stepsim("platform --platform " + file);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("unknown key \"simulaton\" at the top level (did you mean \"simulation\"?)"));
}
