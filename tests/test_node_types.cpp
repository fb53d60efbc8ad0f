// The inside of a node, per node type (topologies/nodes/*.cpp): the links a route between two GPUs
// crosses, its bottleneck bandwidth and summed latency against what the node type's wiring
// implies (NVLink-bridged pairs among them), the time a transfer takes on it, a ring all-reduce
// on a DGX-1 cube-mesh against an NVSwitch node, the CPU host, the chiplet example scenario and
// `stepsim platform`.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "sim/core/input_error.hpp"
#include "sim/engine/replay.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"
#include "tools/driver/collective_bench.hpp"

#include <simgrid/s4u.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

using namespace stepsim;

namespace {

namespace sg4 = simgrid::s4u;

constexpr double B = 25e9, L = 1e-6;

PlatformSpec one_node(const std::string& type, int gpus, int nics = 1)
{
  PlatformSpec spec;
  NodeGroupSpec g;
  g.count                    = 1;
  g.gpu                      = "A100-SXM4-80GB";
  g.gpus_per_node            = gpus;
  g.intra_node.type          = type;
  g.intra_node.bandwidth_Bps = B;
  g.intra_node.latency_s     = L;
  g.nic.count                = nics;
  g.nic.bandwidth_Bps        = 50e9;
  g.nic.latency_s            = 2e-6;
  spec.node_groups           = {g};
  return spec;
}

std::vector<std::string> names(std::initializer_list<const char*> links)
{
  return {links.begin(), links.end()};
}

double collective_s(const PlatformSpec& spec, CollectiveOp op, const char* algorithm, double bytes,
                    std::vector<int> members = {})
{
  if (members.empty()) {
    members.resize(static_cast<size_t>(spec.total_gpus()));
    std::iota(members.begin(), members.end(), 0);
  }
  return testing::in_child([&] {
           auto engine     = testing::start_engine();
           BuiltPlatform p = build_platform(spec);
           Workload w = collective_workload(spec, members, op, bytes);
           return nlohmann::json(replay(w, p.gpus, CollectiveRegistry::get(algorithm, "")).end_s);
         })
      .get<double>();
}

double ring_all_reduce_s(const PlatformSpec& spec, double bytes, std::vector<int> members = {})
{
  return collective_s(spec, CollectiveOp::AllReduce, "ring", bytes, std::move(members));
}

} // namespace

TEST_CASE("a transfer between two GPUs of a node takes its route's bottleneck and summed latency", "[node_types]")
{
  struct Case {
    const char* name;
    PlatformSpec spec;
    int src, dst;
    double bottleneck, latency; // from the node type's wiring: what the route should be
    std::vector<std::string> links;
  };
  PlatformSpec mesh = one_node("chiplet_mesh", 16, 4);
  mesh.node_groups[0].intra_node.mesh = {4, 4};
  PlatformSpec switches = one_node("pcie_switch", 8, 4);
  PlatformSpec pairs = one_node("nvlink_pairs", 4);
  pairs.node_groups[0].host.link_bandwidth_Bps = 32e9; // PCIe Gen4 x16
  const double pcie_hop = pairs.node_groups[0].host.link_latency_s + link_efficiency().pcie_step_s / 2;
  PlatformSpec geforce_pairs = one_node("nvlink_pairs_no_p2p", 4);
  geforce_pairs.node_groups[0].host.link_bandwidth_Bps = 32e9;
  auto c = GENERATE_COPY(
      Case{"NVSwitch: one switch between any two GPUs", one_node("nvswitch", 8), 2, 7, B, L,
           names({"node0-gpu2-nvswitch_UP", "node0-gpu7-nvswitch_DOWN"})},
      Case{"DGX-1: a pair joined by one NVLink", one_node("dgx1_cube_mesh", 8), 0, 1, B, L,
           names({"node0-gpu0-gpu1-nvlink_UP"})},
      Case{"DGX-1: a pair joined by two NVLinks", one_node("dgx1_cube_mesh", 8), 3, 0, 2 * B, L,
           names({"node0-gpu0-gpu3-nvlink_DOWN"})},
      // GPU 0 and 5 share no NVLink (SYS): through GPU 1 (0-1 one link, 1-5 two) or GPU 4 (0-4 two,
      // 4-5 one), equally narrow; the lower-numbered GPU is taken. Two hops, one link wide.
      Case{"DGX-1: a pair two NVLink hops apart", one_node("dgx1_cube_mesh", 8), 0, 5, B, 2 * L,
           names({"node0-gpu0-gpu1-nvlink_UP", "node0-gpu1-gpu5-nvlink_UP"})},
      // 3 to 4: through GPU 0 (3-0 two links, 0-4 two) rather than GPU 7 (3-7 one link).
      Case{"DGX-1: the two-hop route takes the wider links", one_node("dgx1_cube_mesh", 8), 3, 4, 2 * B, 2 * L,
           names({"node0-gpu0-gpu3-nvlink_DOWN", "node0-gpu0-gpu4-nvlink_UP"})},
      Case{"DGX-2: same baseboard", one_node("dgx2", 16), 1, 6, B, L,
           names({"node0-gpu1-nvswitch0_UP", "node0-gpu6-nvswitch0_DOWN"})},
      Case{"DGX-2: across the baseboards' trunk", one_node("dgx2", 16), 1, 9, B, 1.5 * L,
           names({"node0-gpu1-nvswitch0_UP", "node0-nvswitch0-nvswitch1_UP", "node0-gpu9-nvswitch1_DOWN"})},
      Case{"PCIe switch: two GPUs on one switch", switches, 2, 3, B, L,
           names({"node0-gpu2-switch1_UP", "node0-gpu3-switch1_DOWN"})},
      Case{"PCIe switch: across the root complex", switches, 1, 6, B, 2 * L,
           names({"node0-gpu1-switch0_UP", "node0-switch0-root_UP", "node0-switch3-root_DOWN",
                  "node0-gpu6-switch3_DOWN"})},
      Case{"PCIe workstation: through the CPU", one_node("pcie", 4), 0, 3, B, L,
           names({"node0-gpu0-pcie_UP", "node0-gpu3-pcie_DOWN"})},
      // Without peer-to-peer, through the sender's buffer in host memory, at links.json's fraction.
      Case{"PCIe without peer-to-peer: staged by the sender", one_node("pcie_no_p2p", 4), 0, 3,
           B * link_efficiency().pcie_host_staged, L,
           names({"node0-gpu0-pcie_UP", "node0-gpu0-host-staging_UP", "node0-gpu3-pcie_DOWN"})},
      Case{"PCIe without peer-to-peer: the other way, by the other sender", one_node("pcie_no_p2p", 4), 3, 0,
           B * link_efficiency().pcie_host_staged, L,
           names({"node0-gpu3-pcie_UP", "node0-gpu3-host-staging_UP", "node0-gpu0-pcie_DOWN"})},
      Case{"NVLink bridge: the two cards of a pair", pairs, 0, 1, B, L, names({"node0-gpu0-gpu1-nvlink_UP"})},
      // Between pairs over PCIe peer to peer through the root complex, at PCIe's achieved fraction.
      Case{"NVLink bridge: cards of two pairs, over PCIe", pairs, 1, 2, 32e9 * link_efficiency().pcie, 2 * pcie_hop,
           names({"node0-gpu1-pcie_UP", "node0-gpu2-pcie_DOWN"})},
      // GeForce pairs: the bridge inside a pair; between pairs no PCIe peer-to-peer, so the sender's
      // buffer in host memory, at the staged fraction of the achieved PCIe rate.
      Case{"NVLink bridge without PCIe peer-to-peer: a pair", geforce_pairs, 1, 0, B, L,
           names({"node0-gpu0-gpu1-nvlink_DOWN"})},
      Case{"NVLink bridge without PCIe peer-to-peer: staged between pairs", geforce_pairs, 1, 2,
           32e9 * link_efficiency().pcie * link_efficiency().pcie_host_staged, 2 * pcie_hop,
           names({"node0-gpu1-pcie_UP", "node0-gpu1-host-staging_UP", "node0-gpu2-pcie_DOWN"})},
      Case{"HGX 4-GPU NVLink mesh: a pair's own bundle", one_node("nvlink_mesh", 4), 3, 0, B, L,
           names({"node0-gpu0-gpu3-nvlink_DOWN"})},
      Case{"NVL72: any two of 72 GPUs", one_node("nvl72", 72), 0, 71, B, L,
           names({"node0-gpu0-nvl72_UP", "node0-gpu71-nvl72_DOWN"})},
      Case{"chiplet mesh: neighbours", mesh, 5, 9, B, L, names({"node0-gpu5-gpu9-mesh_UP"})},
      // XY: along row 0 to column 3, then down column 3.
      Case{"chiplet mesh: corner to corner by XY", mesh, 0, 15, B, 6 * L,
           names({"node0-gpu0-gpu1-mesh_UP", "node0-gpu1-gpu2-mesh_UP", "node0-gpu2-gpu3-mesh_UP",
                  "node0-gpu3-gpu7-mesh_UP", "node0-gpu7-gpu11-mesh_UP", "node0-gpu11-gpu15-mesh_UP"})},
      // The way back is its own XY route (row 3 first), not the reverse of the one above.
      Case{"chiplet mesh: the other corner back by XY", mesh, 15, 0, B, 6 * L,
           names({"node0-gpu14-gpu15-mesh_DOWN", "node0-gpu13-gpu14-mesh_DOWN", "node0-gpu12-gpu13-mesh_DOWN",
                  "node0-gpu8-gpu12-mesh_DOWN", "node0-gpu4-gpu8-mesh_DOWN", "node0-gpu0-gpu4-mesh_DOWN"})});
  INFO(c.name);
  const double S = 256e6;
  nlohmann::json r = testing::measure_route(c.spec, c.src, c.dst, S);
  INFO(r.dump());
  CHECK(r["links"].get<std::vector<std::string>>() == c.links);
  CHECK(r["bottleneck_Bps"].get<double>() == Approx(c.bottleneck).epsilon(1e-9));
  CHECK(r["route_latency_s"].get<double>() == Approx(c.latency).epsilon(1e-9));
  CHECK(r["summed_latency_s"].get<double>() == Approx(c.latency).epsilon(1e-9));
  // CM02 without cross-traffic: an idle path delivers in latency + size / bottleneck.
  CHECK(r["transfer_s"].get<double>() == Approx(c.latency + S / c.bottleneck).epsilon(0.01));
}

TEST_CASE("a ring all-reduce on a DGX-1 cube-mesh runs NCCL's six rings over its NVLinks", "[node_types]")
{
  // The same 6 NVLinks of B per GPU: switched (one link of 6B per GPU) or wired as the cube-mesh.
  // On the cube-mesh NCCL's ring search (src/graph/search.cc) finds three cycles through all 8
  // GPUs over direct NVLinks, each run in both directions: six rings, each moving S/6 over single
  // NVLinks of B, one hop a step, no two sharing a link direction (models/collectives/ring.cpp,
  // the ring search). So each of the 2(n-1) steps takes S/6/n / B + L, as on the switch, where one
  // ring moves S at 6B: S/n / 6B + L. A single ring 0 → 1 → … → 7 → 0 would wait for a single
  // NVLink with all of S and two hops where GPUs are not wired (3 → 0 → 4, 7 → 4 → 0): about
  // six times slower.
  const double S = 1e9;
  const int n    = 8;
  PlatformSpec mesh   = one_node("dgx1_cube_mesh", n);
  PlatformSpec sw     = one_node("nvswitch", n);
  sw.node_groups[0].intra_node.bandwidth_Bps = 6 * B;
  const double t_mesh = ring_all_reduce_s(mesh, S);
  const double t_sw   = ring_all_reduce_s(sw, S);
  CHECK(t_mesh == Approx(2.0 * (n - 1) * (S / 6 / n / B + L)).epsilon(0.02));
  CHECK(t_sw == Approx(2.0 * (n - 1) * (S / n / (6 * B) + L)).epsilon(0.02));
  CHECK(t_mesh < 2.0 * (n - 1) * (S / n / B + 2 * L) / 4); // far from the single ring
}

TEST_CASE("an HGX 4-GPU board's NVLink mesh lays its rings and all-to-all over every bundle, as an xGMI mesh does",
          "[node_types]")
{
  // nvlink_mesh: a bundle of B between every two of 4 GPUs. The rings take two of each GPU's three
  // bundles (K*_4 has no decomposition into three directed rings), the all-to-all all three at
  // once: as on the xGMI mesh of the same wiring below, and nothing like a single ring.
  const double S    = 1e9;
  PlatformSpec mesh = one_node("nvlink_mesh", 4, 4);
  CHECK(ring_all_reduce_s(mesh, S) == Approx(6.0 * (S / 2 / 4 / B + L)).epsilon(0.02));
  CHECK(ring_all_reduce_s(mesh, S) == Approx(ring_all_reduce_s(one_node("xgmi_mesh", 4, 4), S)).epsilon(1e-9));
  CHECK(collective_s(mesh, CollectiveOp::AllToAll, "direct", S) == Approx(S / 4 / B + L).epsilon(0.02));
  CHECK_THROWS_WITH(check_node_types(one_node("nvlink_mesh", 16)), Catch::Contains("at most 8 GPUs"));
  // RCCL's MSCCL programs are AMD's: an 8-GPU NVLink mesh's all-reduce is NCCL's ring, where an
  // xGMI mesh of 8 takes the all-pairs program at 1 MB (models/collectives/msccl.cpp).
  nlohmann::json j          = testing::small_scenario(1, 8, 8);
  auto& group               = j["platform"]["node_groups"][0];
  group["count"]            = 1;
  group["gpus_per_node"]    = 8;
  group["gpu"]              = "H100-SXM";
  group["intra_node"]       = {{"type", "nvlink_mesh"}, {"bandwidth", "50GBps"}, {"latency", "1us"}};
  const std::string nvidia = testing::write_temp_file("nvlink-mesh-8.json", j.dump());
  const auto picked        = testing::run_stepsim("collective " + nvidia + " --sizes 1MB");
  INFO(picked.output);
  REQUIRE(picked.exit_code == 0);
  CHECK(picked.output.find("msccl") == std::string::npos);
  CHECK(picked.output.find("ring/") != std::string::npos);
}

TEST_CASE("a ring all-reduce on an xGMI mesh lays a ring on every link, inside a node and across nodes",
          "[node_types]")
{
  // An AMD Instinct node (xgmi_mesh): a link of B between every two of its 8 GPUs. RCCL lays
  // seven directed rings over the 56 link directions (models/collectives/mesh_rings.cpp), so each
  // of the 2(n-1) steps moves S/7/n over a link of its own: the all-reduce of a switch with 7B a
  // GPU. A single ring would wait for one link per GPU, seven times as long.
  const double S = 1e9;
  const int n    = 8;
  PlatformSpec mesh = one_node("xgmi_mesh", n, n);
  PlatformSpec sw   = one_node("nvswitch", n, n);
  sw.node_groups[0].intra_node.bandwidth_Bps = 7 * B;
  const double t_mesh = ring_all_reduce_s(mesh, S);
  CHECK(t_mesh == Approx(2.0 * (n - 1) * (S / 7 / n / B + L)).epsilon(0.02));
  CHECK(t_mesh == Approx(ring_all_reduce_s(sw, S)).epsilon(0.02));
  // Two GPUs have one link between them (a switch would give them 7B each); four have three
  // links each, over which two directed rings share none (K*_4 has no decomposition into three).
  CHECK(ring_all_reduce_s(mesh, S, {0, 1}) == Approx(2.0 * (S / 2 / B + L)).epsilon(0.02));
  CHECK(ring_all_reduce_s(mesh, S, {0, 1, 2, 3}) == Approx(6.0 * (S / 2 / 4 / B + L)).epsilon(0.02));
  // An all-to-all sends to every peer at once, each over its own link (models/collectives/
  // direct.cpp): one step of S/n per link, where one peer at a time would take seven.
  CHECK(collective_s(mesh, CollectiveOp::AllToAll, "direct", S) == Approx(S / n / B + L).epsilon(0.02));
  CHECK(collective_s(sw, CollectiveOp::AllToAll, "direct", S) == Approx(7 * (S / n / (7 * B) + L)).epsilon(0.02));
  // Two nodes, a NIC of 2B per GPU: the 8 rings cross each node along paths that share no link
  // direction, so the xGMI links (B, each carrying one ring) bound every step, not 7 rings on one
  // link as the rotated orders of a switch node would give.
  mesh.node_groups[0].count = 2;
  const int N               = 2 * n;
  const double per_step     = S / n / N / B; // a ring's chunk over one xGMI link
  const double t_two        = ring_all_reduce_s(mesh, S);
  CHECK(t_two > 2.0 * (N - 1) * per_step);
  CHECK(t_two < 1.2 * 2.0 * (N - 1) * (per_step + 4 * L));
}

TEST_CASE("a ring all-reduce across chiplets pays each step's XY route", "[node_types][chiplet]")
{
  // A tensor-parallel group of 4 chiplets on a 4x4 mesh, with a message small enough that hop
  // latency dominates. Along a row (0 1 2 3) the ring closes 3 → 0 over three mesh links (3L);
  // on a 2x2 square (0 1 5 4) every ring step is one link. No two ring flows share a link
  // direction in either, so each of the 2(n-1) steps takes S/n / B + (hops of its longest route) L.
  PlatformSpec mesh = one_node("chiplet_mesh", 16, 4);
  mesh.node_groups[0].intra_node.mesh = {4, 4};
  const double S = 4e3;
  const int n    = 4;
  const double row    = ring_all_reduce_s(mesh, S, {0, 1, 2, 3});
  const double square = ring_all_reduce_s(mesh, S, {0, 1, 5, 4});
  CHECK(row == Approx(2.0 * (n - 1) * (S / n / B + 3 * L)).epsilon(0.02));
  CHECK(square == Approx(2.0 * (n - 1) * (S / n / B + L)).epsilon(0.02));
}

TEST_CASE("every GPU reaches its node's CPU host over its host link and the host memory", "[node_types]")
{
  auto type = GENERATE(as<std::string>{}, "nvswitch", "pcie", "pcie_switch", "pcie_no_p2p", "dgx1_cube_mesh");
  INFO(type);
  PlatformSpec spec                              = one_node(type, 8);
  spec.node_groups[0].host.link_bandwidth_Bps    = 16e9;
  spec.node_groups[0].host.memory_bandwidth_Bps  = 100e9;
  nlohmann::json r = testing::in_child([&] {
    auto engine     = testing::start_engine();
    BuiltPlatform p = build_platform(spec);
    auto* cpu       = sg4::Host::by_name("node0-cpu");
    std::vector<sg4::Link*> links;
    double latency = 0;
    p.gpus[5]->route_to(cpu, links, &latency);
    nlohmann::json out{{"links", nlohmann::json::array()}};
    double bottleneck = 1e300;
    for (const auto* l : links) {
      out["links"].push_back(l->get_name());
      bottleneck = std::min(bottleneck, l->get_bandwidth());
    }
    out["bottleneck_Bps"] = bottleneck;
    return out;
  });
  INFO(r.dump());
  const auto links = r["links"].get<std::vector<std::string>>();
  REQUIRE(!links.empty());
  CHECK(links.back() == "node0-cpu-memory_UP");
  // NVLink nodes: a host link of its own (16 GB/s); PCIe nodes: the GPU's PCIe link (25 GB/s here).
  // Without peer-to-peer only GPU-to-GPU transfers stage through host memory; host traffic takes
  // the PCIe link at its own rate.
  const bool pcie = type == "pcie" || type == "pcie_switch" || type == "pcie_no_p2p";
  CHECK(r["bottleneck_Bps"].get<double>() == Approx(pcie ? B : 16e9));
  CHECK(links.front() == (pcie ? (type == "pcie_switch" ? "node0-gpu5-switch2_UP" : "node0-gpu5-pcie_UP")
                               : "node0-gpu5-host_UP"));
}

TEST_CASE("node types refuse a GPU count or mesh they cannot build, naming the path", "[node_types]")
{
  PlatformSpec spec = one_node("chiplet_mesh", 8);
  spec.node_groups[0].intra_node.mesh = {3, 3};
  REQUIRE_THROWS_AS(check_node_types(spec), InputError);
  CHECK_THROWS_WITH(check_node_types(spec), Catch::Contains("platform.node_groups[0].intra_node.mesh") &&
                                                Catch::Contains("9 chiplets"));
  CHECK_THROWS_WITH(check_node_types(one_node("nvl72", 8)), Catch::Contains("platform.node_groups[0].gpus_per_node") &&
                                                               Catch::Contains("72 GPUs (or 36), got 8"));
  CHECK_NOTHROW(check_node_types(one_node("nvl72", 36))); // NVL36: half the domain
  CHECK_THROWS_WITH(check_node_types(one_node("nvswich", 8)), Catch::Contains("did you mean \"nvswitch\""));
  CHECK_THROWS_WITH(check_node_types(one_node("xgmi_mesh", 16)),
                    Catch::Contains("platform.node_groups[0].intra_node.type") && Catch::Contains("at most 8 GPUs"));
  CHECK_NOTHROW(check_node_types(one_node("xgmi_mesh", 8)));
  CHECK_THROWS_WITH(check_node_types(one_node("nvlink_pairs", 3)),
                    Catch::Contains("platform.node_groups[0].intra_node.type") && Catch::Contains("even gpus_per_node"));
  // A name that is a whole part of a type's name is taken for it, before a near spelling ("dgx2").
  CHECK_THROWS_WITH(check_node_types(one_node("xgmi", 8)), Catch::Contains("did you mean \"xgmi_mesh\""));
  CHECK_THROWS_WITH(check_node_types(one_node("cube_mesh", 8)), Catch::Contains("did you mean \"dgx1_cube_mesh\""));
  spec.node_groups[0].intra_node.mesh = {2, 4};
  CHECK_NOTHROW(check_node_types(spec));
}

TEST_CASE("the 4x4 chiplet example runs tensor and pipeline parallelism across chiplets", "[node_types][chiplet]")
{
  const std::string report = testing::write_temp_file("chiplet-report.json", "");
  auto r = testing::run_stepsim("run " + std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/chiplet-4x4.json --json " +
                                report);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(testing::read_text_file(report));
  INFO(j.dump().substr(0, 2000));
  CHECK(j.dump().find("step_time") != std::string::npos);
}

TEST_CASE("stepsim platform prints each node type's links", "[node_types][cli]")
{
  struct Case {
    const char* sets;
    std::vector<const char*> kinds;
  };
  auto c = GENERATE(
      Case{"--set platform.node_groups.0.intra_node.type=dgx1_cube_mesh",
           {"nodeN-gpuN-gpuN-nvlink", "nodeN-gpuN-host", "nodeN-cpu-memory"}},
      Case{"--set platform.node_groups.0.intra_node.type=pcie_switch --set platform.node_groups.0.nic.count=4 "
           "--set platform.node_groups.0.intra_node.bandwidth=32GBps",
           {"nodeN-gpuN-switchN", "nodeN-switchN-root"}},
      Case{"--set platform.node_groups.0.intra_node.type=chiplet_mesh --set platform.node_groups.0.intra_node.mesh=[2,4] "
           "--set platform.node_groups.0.intra_node.bandwidth=100GBps",
           {"nodeN-gpuN-gpuN-mesh"}},
      Case{"--set platform.node_groups.0.intra_node.type=pcie_no_p2p --set platform.node_groups.0.intra_node.bandwidth=32GBps",
           {"nodeN-gpuN-pcie", "nodeN-gpuN-host-staging"}},
      Case{"--set platform.node_groups.0.intra_node.type=nvlink_pairs", {"nodeN-gpuN-gpuN-nvlink", "nodeN-gpuN-pcie"}},
      Case{"--set platform.node_groups.0.intra_node.type=nvlink_pairs_no_p2p",
           {"nodeN-gpuN-gpuN-nvlink", "nodeN-gpuN-pcie", "nodeN-gpuN-host-staging"}});
  auto r = testing::run_stepsim("platform " + std::string(STEPSIM_SOURCE_DIR) + "/tests/bad_inputs/base.scenario " + c.sets);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* kind : c.kinds)
    CHECK(r.output.find(kind) != std::string::npos);
}

TEST_CASE("direct NVLink takes its own achieved fraction and the NVSwitch its own")
{
  // DGX-1's cube mesh joins GPUs by NVLink with no switch between them: links.json "nvlink",
  // fitted on published DGX-1 rings (tools/calibrate/fit_link.py), not the NVSwitch's figure.
  LinkEfficiency e;
  e.nvswitch = 0.78;
  e.nvlink   = 0.9;
  PlatformSpec mesh = one_node("dgx1_cube_mesh", 8);
  mesh.node_groups[0].intra_node.bandwidth_Bps = 25e9;
  PlatformSpec sw = one_node("nvswitch", 8);
  sw.node_groups[0].intra_node.bandwidth_Bps = 300e9;
  CHECK(with_achieved_bandwidth(mesh, e).node_groups[0].intra_node.bandwidth_Bps == Approx(25e9 * 0.9));
  CHECK(with_achieved_bandwidth(sw, e).node_groups[0].intra_node.bandwidth_Bps == Approx(300e9 * 0.78));
  // The shipped file has both, fitted apart.
  CHECK(load_link_efficiency().nvlink != load_link_efficiency().nvswitch);
}

TEST_CASE("stepsim list names every node type and every platform preset with its summary", "[node_types][cli]")
{
  auto r = testing::run_stepsim("list");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* line : {"  pcie_no_p2p ", "platform presets (platform.preset", "  coreweave-a100 ",
                           "  pcie-2080ti-no-p2p   A rented container with GeForce RTX 2080 Ti GPUs"})
    CHECK(r.output.find(line) != std::string::npos);
}
