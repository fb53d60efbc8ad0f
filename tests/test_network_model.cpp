// The network model: calibration against published nccl-tests runs, the two network fidelities,
// link sharing, per-link utilisation, and the straggler knobs.
#include "support.hpp"

#include "models/collectives/collective.hpp"
#include "models/device.hpp"
#include "models/link_calibration.hpp"
#include "models/collectives/protocol.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/engine/link_slowdown.hpp"
#include "sim/engine/replay.hpp"
#include "tools/driver/collective_bench.hpp"
#include "sim/simulate.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <simgrid/s4u.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace stepsim;

namespace {

nlohmann::json run_collective_json(const std::string& arguments)
{
  auto r = testing::run_stepsim("collective " + arguments + " --json -");
  INFO(arguments << "\n" << r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

// Two groups of two ranks, each group one GPU of node 0 and one of node 1; both nodes have ONE
// NIC, so both groups' transfers cross the same two NIC links. `groups` = 1 runs only the first.
Workload two_all_reduces(int groups, double bytes)
{
  Workload w;
  w.world_size = 4;
  const std::vector<std::vector<int>> members = {{0, 2}, {1, 3}};
  for (int g = 0; g < groups; ++g) {
    Group group;
    group.name  = std::string(1, static_cast<char>('a' + g));
    group.ranks = members[static_cast<size_t>(g)];
    w.groups.push_back(group);
  }
  for (int rank = 0; rank < 4; ++rank) {
    const int g = rank % 2;
    if (g >= groups)
      continue;
    RankProgram program;
    program.rank = rank;
    w.ranks.push_back(program);
    ProgramBuilder b(w.ranks.back());
    Task t;
    t.kind   = TaskKind::Collective;
    t.stream = Stream::Data;
    t.group  = g;
    t.bytes  = bytes;
    t.op     = CollectiveOp::AllReduce;
    b.add(t);
  }
  return w;
}

PlatformSpec two_nodes_one_nic()
{
  PlatformSpec spec = testing::single_gpu_nodes(2, 25e9, 2e-6);
  auto& g           = spec.node_groups[0];
  g.gpus_per_node   = 2;
  g.intra_node.bandwidth_Bps = 300e9;
  g.intra_node.latency_s     = 1e-6;
  return spec;
}

// Seconds of the replay of `w` on `spec` (rated bandwidths), and its link traffic.
nlohmann::json replay_on(const PlatformSpec& spec, const Workload& w, bool analytic)
{
  return testing::in_child([&] {
    auto engine = testing::start_engine();
    BuiltPlatform built = build_platform(spec, ranks_in_use(w));
    ReplayOptions options;
    options.analytic_network = analytic;
    options.record_links     = true;
    ReplayResult r = replay(w, built.gpus, CollectiveRegistry::get("ring", "test"), options);
    nlohmann::json links = nlohmann::json::object();
    for (const auto& l : r.links)
      links[l.name] = {{"bytes", l.bytes}, {"busy_s", l.busy_s}};
    return nlohmann::json{{"seconds", r.end_s}, {"links", links}};
  });
}

nlohmann::json small_dp(int data)
{
  nlohmann::json s = testing::small_scenario(1, data, 4);
  // Realistic links, so that the gradient all-reduce costs something.
  s["platform"]["node_groups"][0]["nic"] = {{"count", 1}, {"bandwidth", "200Gbps"}, {"latency", "2us"}};
  s["parallelism"]["overlap_grad_reduce"] = false;
  s["simulation"]["fidelity"]             = "full";
  return s;
}

} // namespace

TEST_CASE("calibration: stepsim collective reproduces the published nccl-tests all-reduce rows", "[network_model]")
{
  const nlohmann::json published = read_json_file(config_dir() + "/calibration/nccl_tests.json");
  for (const auto& c : published.at("cases")) {
    std::string sizes;
    for (const auto& row : c.at("rows"))
      sizes += fmt::format("{}{:.0f}B", sizes.empty() ? "" : ",", row.at("bytes").get<double>());
    const auto out = run_collective_json(fmt::format("--preset {} --nodes {} --gpus {} --op all_reduce --algorithm {} --sizes {}",
                                                     c.at("preset").get<std::string>(), c.at("nodes").get<int>(),
                                                     c.at("gpus").get<int>(), c.at("algorithm").get<std::string>(),
                                                     sizes));
    REQUIRE(out.at("rows").size() == c.at("rows").size());
    int outside = 0;
    for (size_t i = 0; i < c.at("rows").size(); ++i) {
      const auto& measured  = c.at("rows")[i];
      const auto& predicted = out.at("rows")[i];
      const double bytes    = measured.at("bytes").get<double>();
      INFO(c.at("name").get<std::string>() << " at " << bytes << " B: predicted " << predicted.dump());
      // Large messages: the bus bandwidth within 10 % of the published figure.
      if (bytes >= (1 << 30))
        CHECK(std::abs(predicted.at("busbw_GBps").get<double>() / measured.at("busbw_GBps").get<double>() - 1) < 0.10);
      // Small messages (8 KiB to 1 MiB) follow the measured latency-bound curve within 25 %,
      // except a row the file marks as outside the model (with why; at most one per case).
      if (bytes >= 8192 && bytes <= (1 << 20) && measured.contains("time_us")) {
        const double error = predicted.at("time_us").get<double>() / measured.at("time_us").get<double>() - 1;
        if (measured.contains("outside_model")) {
          WARN(c.at("name").get<std::string>() << " " << bytes << " B outside the model (" << 100 * error
                                               << " %): " << measured.at("outside_model").get<std::string>());
          CHECK(++outside <= 1);
        } else {
          CHECK(std::abs(error) < 0.25);
        }
      }
    }
  }
}

TEST_CASE("calibration: NCCL's base latency is paid once per collective, in both fidelities", "[network_model]")
{
  const LinkEfficiency links = load_link_efficiency();
  REQUIRE(links.protocols_loaded);
  // Two GPUs of one node: one step each way; the time is the protocol's base latency, 2 step
  // latencies (the link's, plus the protocol's beyond LL) and the wire bytes over the achieved
  // NVLink bandwidth, whichever fidelity times it.
  for (const char* network : {"flow", "analytic"})
    for (Protocol p : kProtocols) {
      const ProtocolCost& c = links.protocols[static_cast<size_t>(p)];
      const auto out        = run_collective_json(std::string("--preset dgx-a100 --gpus 2 --sizes 8KB --algorithm ring --network ") +
                                                  network + " --protocol " + protocol_name(p));
      const double path_latency = 1e-6 + links.nvswitch_step_s + c.step_inside_s;
      const double expected = c.base_ring_s + 2 * path_latency + c.wire_factor * 8e3 / 2 / (300e9 * links.nvswitch);
      INFO(network << " " << protocol_name(p));
      CHECK(out.at("rows")[0].at("picked") == std::string("ring/") + protocol_name(p));
      CHECK(out.at("rows")[0].at("time_us").get<double>() * 1e-6 == Approx(expected).epsilon(0.01));
    }
}

TEST_CASE("protocols: LL for latency, Simple for bandwidth; auto takes the fastest per size", "[network_model]")
{
  // Two DGX A100 nodes, ring forced: LL's per-step latency is the lowest and its wire carries half
  // data, Simple the reverse; `auto` is never slower than the best forced protocol.
  const std::string group = "--preset dgx-a100 --nodes 2 --gpus 16 --algorithm ring --sizes 8KB,1GiB";
  std::map<std::string, nlohmann::json> rows;
  for (const char* p : {"LL", "LL128", "Simple", "auto"})
    rows[p] = run_collective_json(group + " --protocol " + p).at("rows");
  auto time = [&](const char* p, int i) { return rows[p][static_cast<size_t>(i)].at("time_us").get<double>(); };
  CHECK(time("LL", 0) < time("LL128", 0));
  CHECK(time("LL128", 0) < time("Simple", 0));
  CHECK(time("Simple", 1) < time("LL128", 1));
  CHECK(time("LL", 1) > 1.8 * time("Simple", 1)); // half the wire carries flags
  CHECK(rows["auto"][0].at("picked") == "ring/LL");
  CHECK(rows["auto"][1].at("picked") == "ring/Simple");
  for (int i = 0; i < 2; ++i)
    CHECK(time("auto", i) <= std::min({time("LL", i), time("LL128", i), time("Simple", i)}) * 1.001);
  // Simple's extra step latency is paid on each step of the critical path: inside one node the
  // ring's 14 steps of an 8-GPU all-reduce (a few bytes, so bandwidth plays no part).
  const LinkEfficiency links = load_link_efficiency();
  const auto& ll = links.protocols[0];
  const auto& simple = links.protocols[2];
  const double ll_us     = run_collective_json("--preset dgx-a100 --gpus 8 --algorithm ring --sizes 64B --protocol LL")
                           .at("rows")[0].at("time_us").get<double>();
  const double simple_us = run_collective_json("--preset dgx-a100 --gpus 8 --algorithm ring --sizes 64B --protocol Simple")
                               .at("rows")[0].at("time_us").get<double>();
  CHECK(simple_us - ll_us == Approx(1e6 * (simple.base_ring_s - ll.base_ring_s + 14 * simple.step_inside_s)).epsilon(0.02));
}

TEST_CASE("network fidelity: analytic and flow agree within 1 % where nothing shares a link", "[network_model]")
{
  // One collective alone in a node and across nodes: nothing else on the links.
  for (const char* group : {"--preset dgx-a100 --gpus 8", "--preset dgx-a100 --nodes 4 --stride"}) {
    const std::string sizes = " --sizes 64KB,4MB,256MB";
    const auto flow         = run_collective_json(std::string(group) + sizes + " --network flow");
    const auto analytic     = run_collective_json(std::string(group) + sizes + " --network analytic");
    CHECK(flow.at("network_fidelity") == "flow");
    CHECK(analytic.at("network_fidelity") == "analytic");
    for (size_t i = 0; i < 3; ++i) {
      INFO(group << " row " << i);
      CHECK(analytic.at("rows")[i].at("time_us").get<double>() ==
            Approx(flow.at("rows")[i].at("time_us").get<double>()).epsilon(0.01));
    }
  }
  // A whole step whose only traffic is pipeline point-to-point (nothing shared): same step time.
  nlohmann::json s = testing::small_scenario(4, 1, 8);
  s["platform"]["node_groups"][0]["nic"] = {{"count", 1}, {"bandwidth", "100Gbps"}, {"latency", "2us"}};
  Report flow = simulate_isolated(scenario_from_json(s));
  s["simulation"]["network_fidelity"] = "analytic";
  Report analytic = simulate_isolated(scenario_from_json(s));
  CHECK(flow.network_fidelity == "flow");
  CHECK(analytic.network_fidelity == "analytic");
  CHECK(analytic.step_time_s == Approx(flow.step_time_s).epsilon(0.01));
}

TEST_CASE("link sharing: two all-reduces through one NIC take twice as long as one (flow), not in analytic",
          "[network_model]")
{
  const double bytes    = 1e9;
  const auto one        = replay_on(two_nodes_one_nic(), two_all_reduces(1, bytes), false);
  const auto two        = replay_on(two_nodes_one_nic(), two_all_reduces(2, bytes), false);
  const double ratio    = two.at("seconds").get<double>() / one.at("seconds").get<double>();
  INFO("one " << one.dump() << "\ntwo " << two.dump());
  CHECK(ratio == Approx(2.0).epsilon(0.05));
  // The analytic fidelity ignores the sharing: the contended case is where the two differ.
  const auto two_analytic = replay_on(two_nodes_one_nic(), two_all_reduces(2, bytes), true);
  CHECK(two_analytic.at("seconds").get<double>() == Approx(one.at("seconds").get<double>()).epsilon(0.01));
  CHECK(two.at("seconds").get<double>() > 1.8 * two_analytic.at("seconds").get<double>());
}

TEST_CASE("link utilisation: bytes and busy time per link follow the ring", "[network_model]")
{
  // A 2-member ring all-reduce of S sends S/2 twice each way: each direction of each NIC link
  // carries S; with both groups the shared NIC links carry 2S and stay busy the whole time.
  const double bytes = 1e9;
  const auto one     = replay_on(two_nodes_one_nic(), two_all_reduces(1, bytes), false);
  const auto two     = replay_on(two_nodes_one_nic(), two_all_reduces(2, bytes), false);
  INFO(one.dump(1) << "\n" << two.dump(1));
  REQUIRE(one.at("links").contains("node0-nic0-link_UP"));
  CHECK(one.at("links").at("node0-nic0-link_UP").at("bytes").get<double>() == Approx(bytes));
  CHECK(one.at("links").at("node1-nic0-link_DOWN").at("bytes").get<double>() == Approx(bytes));
  CHECK(two.at("links").at("node0-nic0-link_UP").at("bytes").get<double>() == Approx(2 * bytes));
  CHECK(two.at("links").at("node0-nic0-link_UP").at("busy_s").get<double>() ==
        Approx(two.at("seconds").get<double>()).epsilon(0.01));
  // The analytic fidelity accounts the same bytes.
  const auto analytic = replay_on(two_nodes_one_nic(), two_all_reduces(2, bytes), true);
  CHECK(analytic.at("links").at("node0-nic0-link_UP").at("bytes").get<double>() == Approx(2 * bytes));
}

TEST_CASE("stepsim run --links lists the busiest links in the table and the JSON report", "[network_model]")
{
  const std::string file = testing::write_temp_file("links.json", small_dp(2).dump());
  const std::string json = testing::write_temp_file("links-report.json", "");
  auto r = testing::run_stepsim("run " + file + " --links 3 --json " + json);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("busiest links") != std::string::npos);
  const auto report = nlohmann::json::parse(testing::read_text_file(json));
  REQUIRE(report.at("links").size() == 3);
  double previous = 2;
  for (const auto& l : report.at("links")) {
    CHECK(l.at("bytes").get<double>() > 0);
    CHECK(l.at("busy_fraction").get<double>() > 0);
    CHECK(l.at("busy_fraction").get<double>() <= previous);
    previous = l.at("busy_fraction").get<double>();
  }
  // Without --links the report keeps its keys.
  auto plain = testing::run_stepsim("run " + file + " --json " + json + " --quiet");
  REQUIRE(plain.exit_code == 0);
  CHECK_FALSE(nlohmann::json::parse(testing::read_text_file(json)).contains("links"));
}

TEST_CASE("stragglers: one slow rank of a data-parallel group delays the step by its extra compute",
          "[network_model]")
{
  const double slowdown = 1.5;
  Report base           = simulate_isolated(scenario_from_json(small_dp(4)));
  nlohmann::json slow   = small_dp(4);
  slow["simulation"]["stragglers"] = {{{"rank", 1}, {"slowdown", slowdown}}};
  Report r = simulate_isolated(scenario_from_json(slow));
  // Critical path: every rank computes its forward and backward passes, the all-reduce waits for
  // the last of them, then each updates its weights. The slow rank's compute (all of it on the
  // path) grows by (slowdown - 1) x its compute time; the all-reduce does not change.
  const double compute = base.stages[0].compute_s;
  INFO("base " << base.step_time_s << " s, straggler " << r.step_time_s << " s, compute " << compute << " s");
  CHECK(r.step_time_s - base.step_time_s == Approx((slowdown - 1) * compute).epsilon(0.01));
  CHECK(r.fidelity == "full");
  // Who waited for whom: the three others waited on rank 1 in the data-parallel group.
  REQUIRE(r.waits.size() >= 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(r.waits[i].peer == 1);
    CHECK(r.waits[i].rank != 1);
    CHECK_FALSE(r.waits[i].group.empty());
    // They waited for the slow rank's extra forward and backward time: its extra compute less
    // the extra optimizer step, which comes after the all-reduce.
    CHECK(r.waits[i].seconds > 0.5 * (slowdown - 1) * compute);
    CHECK(r.waits[i].seconds < (slowdown - 1) * compute);
  }
}

TEST_CASE("stragglers: a slowed link kind slows the traffic that crosses it", "[network_model]")
{
  CHECK(link_kind("node12-nic3-link_UP") == "nodeN-nicN-link");
  CHECK(link_matches("node12-nic3-link_UP", "nic"));
  CHECK(link_matches("node12-nic3-link_UP", "node12-nic3-link"));
  CHECK(link_matches("node12-nic3-link_DOWN", "nodeN-nicN-link"));
  CHECK_FALSE(link_matches("node12-gpu3-nvswitch_UP", "nic"));
  Report base         = simulate_isolated(scenario_from_json(small_dp(2)));
  nlohmann::json slow = small_dp(2);
  slow["simulation"]["stragglers"] = {{{"link", "nic"}, {"slowdown", 4}}};
  Report r = simulate_isolated(scenario_from_json(slow));
  INFO(base.step_time_s << " -> " << r.step_time_s << "; comm " << base.comm_s << " -> " << r.comm_s);
  CHECK(r.comm_s > 3 * base.comm_s);
  CHECK(r.step_time_s > base.step_time_s);
}

TEST_CASE("jitter: the same seed gives the same step, another seed another one", "[network_model]")
{
  nlohmann::json s = small_dp(2);
  s["simulation"]["jitter"] = {{"sigma", 0.05}, {"seed", 1}};
  Report a = simulate_isolated(scenario_from_json(s));
  Report b = simulate_isolated(scenario_from_json(s));
  s["simulation"]["jitter"]["seed"] = 2;
  Report c    = simulate_isolated(scenario_from_json(s));
  Report base = simulate_isolated(scenario_from_json(small_dp(2)));
  CHECK(to_json(a).dump() == to_json(b).dump());
  CHECK(a.step_time_s != c.step_time_s);
  // Noise of 5 % per kernel over many kernels moves a step by a few per cent at most; the step
  // waits for the slower replica, so it does not get faster on average.
  CHECK(std::abs(a.step_time_s / base.step_time_s - 1) < 0.05);
  CHECK(std::abs(c.step_time_s / base.step_time_s - 1) < 0.05);
}

TEST_CASE("stepsim collective: presets, platform files and bad options", "[network_model]")
{
  const auto preset = run_collective_json("--preset dgx-h100 --gpus 8 --sizes 1GiB --algorithm ring --protocol Simple");
  CHECK(preset.at("gpus") == 8);
  CHECK(preset.at("rows")[0].at("busbw_GBps").get<double>() ==
        Approx(450 * load_link_efficiency().nvswitch).epsilon(0.02));
  // A platform file in the preset format gives the same table.
  const std::string file = testing::write_temp_file(
      "platform.json", read_json_file(config_dir() + "/platforms/dgx-h100.json").dump());
  const auto from_file = run_collective_json("--platform " + file + " --gpus 8 --sizes 1GiB --algorithm ring --protocol Simple");
  CHECK(from_file.at("rows") == preset.at("rows"));

  auto [args, message] = GENERATE(table<std::string, std::string>({
      {"--preset dgx-a10", "--preset: unknown platform preset \"dgx-a100\""},
      {"--preset dgx-a100 --network packet", "--network: expected flow or analytic"},
      {"--preset dgx-a100 --protocol LL64", "--protocol: expected auto, LL, LL128 or Simple"},
      {"--preset dgx-a100 --nodes 2 --platform x.json", "FILE: give exactly one of"},
      {"--preset dgx-a100 --nodes 0", "--nodes: Value 0 not in range"},
      {"--preset dgx-a100 --gpus 0", "--gpus: Value 0 not in range"},
      {"", "FILE: give exactly one of"},
  }));
  auto r = testing::run_stepsim("collective " + args);
  INFO(args << "\n" << r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(message.substr(0, 20)) != std::string::npos);
}

TEST_CASE("stepsim collective: NCCL's algorithms across nodes and the DGX-1's rings", "[network_model][collectives_nccl]")
{
  // Two DGX H100 (NVLS, 8 x 400 Gb/s NDR): NCCL's default runs NVLS-tree, which moves S per node
  // through the NICs, half the ring's; issue 309 of NVIDIA/nccl-tests measures 468 GB/s busbw at
  // 8 GiB with NCCL 2.26.2 (/work/shared/validation case issue309_qoofyk_2node_default_h100_ib400_allreduce).
  const auto h100 = run_collective_json("--preset dgx-h100 --nodes 2 --sizes 8GiB --algorithm nvls_tree");
  CHECK(h100.at("rows")[0].at("picked") == "nvls_tree/Simple");
  const double nvls_tree = h100.at("rows")[0].at("busbw_GBps").get<double>();
  CHECK(nvls_tree == Approx(468).epsilon(0.15));
  // The ring is NIC-bound, as everything is on four such nodes: issue309's four nodes measure
  // 365 GB/s at 8 GiB, 1.28 times less.
  const auto ring = run_collective_json("--preset dgx-h100 --nodes 2 --sizes 8GiB --algorithm ring");
  CHECK(nvls_tree > 1.2 * ring.at("rows")[0].at("busbw_GBps").get<double>());
  // DGX-1 (V100 hybrid cube mesh): six rings over the NVLinks, not one through PCIe-speed hops;
  // ASTRA-sim's validation page measures 512 MiB in 6,955 us with NCCL, 135 GB/s busbw.
  const auto dgx1 = run_collective_json("--preset dgx1-v100 --gpus 8 --sizes 512MiB --algorithm ring");
  CHECK(dgx1.at("rows")[0].at("busbw_GBps").get<double>() == Approx(135).epsilon(0.15));

  // A forced algorithm the platform cannot run: exit 2, naming why.
  auto [args, message] = GENERATE(table<std::string, std::string>({
      {"--preset dgx-a100 --nodes 2 --algorithm nvls_tree", "NVSwitch"},
      {"--preset dgx-h100 --nodes 2 --algorithm collnet", "platform.network.sharp"},
      {"--preset dgx-h100 --nodes 1 --algorithm nvls_tree", "across nodes"},
  }));
  auto r = testing::run_stepsim("collective " + args + " --sizes 1MiB");
  INFO(args << "\n" << r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--algorithm") != std::string::npos);
  CHECK(r.output.find(message) != std::string::npos);
}

TEST_CASE("Hopper's NVSwitch takes its own LL step, so one DGX H100 node runs small all-reduces as NCCL's tuner does",
          "[network_model][collectives_nccl]")
{
  // links.json nvswitch.step_latency_by_gpu: H100, H200 and H800 step on their NVSwitch faster than
  // the A100 rows the NVSwitch's own figure was fitted on.
  const LinkEfficiency& links = link_efficiency();
  REQUIRE(links.nvswitch_step_by_gpu_s.count("H100-SXM") == 1);
  CHECK(links.nvswitch_step_for("H100-SXM") < links.nvswitch_step_for("A100-SXM4-80GB"));
  CHECK(links.nvswitch_step_for("H200-SXM") == links.nvswitch_step_for("H100-SXM"));
  CHECK(links.nvswitch_step_for("A100-SXM4-80GB") == links.nvswitch_step_s);

  // The platform is built with each node group's own step on top of its wire latency.
  PlatformSpec spec;
  for (const char* gpu : {"H100-SXM", "A100-SXM4-80GB"}) {
    NodeGroupSpec g;
    g.gpu                      = gpu;
    g.intra_node.type          = "nvswitch";
    g.intra_node.bandwidth_Bps = 300e9;
    g.intra_node.latency_s     = 1e-6;
    spec.node_groups.push_back(g);
  }
  const PlatformSpec achieved = with_achieved_bandwidth(spec, links);
  CHECK(achieved.node_groups[0].intra_node.latency_s == Approx(1e-6 + links.nvswitch_step_for("H100-SXM")));
  CHECK(achieved.node_groups[1].intra_node.latency_s == Approx(1e-6 + links.nvswitch_step_s));

  // NCCL's tuner runs the ring with LL on small messages (NVLS's hwLat is 25 us, the ring's
  // 6.6 + 14 x 0.6), and NVLS on large ones; so does `auto` now on a DGX H100 node.
  const auto rows = run_collective_json("--preset dgx-h100 --nodes 1 --sizes 8KiB,256KiB,64MiB").at("rows");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].at("picked") == "ring/LL");
  CHECK(rows[1].at("picked") == "ring/LL");
  CHECK(rows[2].at("picked") == "nvls/Simple");
  // ... within 25 % and 15 % of the published node's 8 KiB and 256 KiB times (17.4 and 20.4 us:
  // nvidia_dgxc_dgxh100_1node_allreduce): the step stops at 0 on top of the preset's 1 us wire
  // latency, so the 8 KiB row stays about 19 % slow.
  CHECK(rows[0].at("time_us").get<double>() == Approx(17.4).epsilon(0.25));
  CHECK(rows[1].at("time_us").get<double>() == Approx(20.4).epsilon(0.15));

  // A cluster's own NVSwitch step, fitted on its logs, is every GPU's there.
  const std::string file = testing::write_temp_file("own-nvswitch.json", R"({"nvswitch": {"step_latency": "0.7us"}})");
  const LinkEfficiency own = load_network_calibration(file, links, "--network-calibration");
  CHECK(own.nvswitch_step_for("H100-SXM") == Approx(0.7e-6));
  CHECK(own.nvswitch_step_for("A100-SXM4-80GB") == Approx(0.7e-6));
}

TEST_CASE("NVLS-tree pays its own hop latency between nodes, once per hop of its trees' depth", "[network_model]")
{
  // links.json protocols.nvls_tree, fitted on NVIDIA's scaling curves, whose 1 MiB all-reduce takes
  // about 48 us more per doubling of the nodes: the fixed cost grows with log2 of the nodes.
  auto time_us = [](int nodes) {
    const auto rows = run_collective_json(fmt::format("--preset dgx-h100-superpod --nodes {} --algorithm nvls_tree "
                                                      "--sizes 8KiB",
                                                      nodes))
                          .at("rows");
    REQUIRE(rows.size() == 1);
    return rows[0].at("time_us").get<double>();
  };
  const double two = time_us(2), four = time_us(4), eight = time_us(8);
  // Each doubling adds one level to each tree, up and down: twice the hop, 18.7 us and more.
  CHECK(four - two > 2 * 18.7);
  CHECK(eight - four == Approx(four - two).epsilon(0.2));
  // The published 32-GPU (4-node) curve's 1 MiB row took 129 us; its fixed cost is most of it.
  CHECK(four < 129);
  CHECK(four > 0.6 * 129);
}

TEST_CASE("a tree of few chunks: its closed form follows its flows, and the pick caps LL as NCCL's tuner does",
          "[network_model][collectives_nccl]")
{
  // A member's flows on its node's chains leave one hop after another (collective.hpp
  // chain_places): the closed form that `auto` weighs no longer counts them all as sharing its
  // link at once. On four H100 nodes it took 114 us at 512 KiB against 79 us for the flows.
  const std::string tree = "--preset dgx-h100 --nodes 4 --algorithm tree --protocol LL --sizes 256KiB,512KiB,1MiB";
  const auto closed_form = run_collective_json(tree + " --network analytic").at("rows");
  const auto flows       = run_collective_json(tree + " --network flow").at("rows");
  REQUIRE(closed_form.size() == 3);
  REQUIRE(flows.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO(closed_form[i].at("bytes"));
    CHECK(closed_form[i].at("time_us").get<double>() == Approx(flows[i].at("time_us").get<double>()).epsilon(0.1));
  }

  // NCCL's tuner caps LL's bus bandwidth across nodes by the hosts' CPUs (tuning.cc llMaxBws: 39.0
  // GB/s on two nodes of Intel hosts, 22.5 of AMD ones): on two DGX A100 nodes a 1 MiB all-reduce
  // stays on LL with Intel hosts and leaves it with AMD ones, the DGX A100's (its preset).
  auto picked_at_1MiB = [](const std::string& vendor) {
    nlohmann::json platform  = read_json_file(config_dir() + "/platforms/dgx-a100.json").at("platform");
    auto& group              = platform.at("node_groups").at(0);
    group["count"]           = 2;
    group["host"]["cpu_vendor"] = vendor;
    const std::string file = testing::write_temp_file("dgx-a100-" + vendor + ".json", nlohmann::json{{"platform", platform}}.dump());
    const auto rows        = run_collective_json("--platform " + file + " --sizes 1MiB").at("rows");
    REQUIRE(rows.size() == 1);
    return rows[0].at("picked").get<std::string>();
  };
  const std::string intel = picked_at_1MiB("intel"), amd = picked_at_1MiB("amd");
  CHECK(intel.ends_with("/LL"));
  CHECK_FALSE(amd.ends_with("/LL"));
}

TEST_CASE("Blackwell's NVSwitch reduces at its own rate, so a B200 node runs NVLS above its ring", "[network_model]")
{
  // links.json nvswitch.in_switch_reduction_by_gpu: Hopper's figure (274 GB/s per GPU) would cap
  // a B200 node's NVLS at 480 GB/s of bus bandwidth, below the ring its NVLink 5 carries.
  const LinkEfficiency& links = link_efficiency();
  REQUIRE(links.nvls_reduction_by_gpu_Bps.count("B200") == 1);
  CHECK(links.nvls_reduction_for("B200") > links.nvls_reduction_for("H100-SXM"));
  CHECK(links.nvls_reduction_for("H100-SXM") == links.nvls_reduction_Bps);
  const auto b200 = run_collective_json("--preset dgx-b200 --nodes 1 --sizes 8GiB").at("rows").at(0);
  const auto h100 = run_collective_json("--preset dgx-h100 --nodes 1 --sizes 8GiB").at("rows").at(0);
  CHECK(b200.at("picked") == "nvls/Simple");
  CHECK(h100.at("picked") == "nvls/Simple");
  // The bus bandwidth follows each switch's figure: 1.75 x the rate per GPU, less the launch.
  CHECK(b200.at("busbw_GBps").get<double>() == Approx(1.75 * links.nvls_reduction_for("B200") / 1e9).epsilon(0.03));
  CHECK(h100.at("busbw_GBps").get<double>() == Approx(1.75 * links.nvls_reduction_for("H100-SXM") / 1e9).epsilon(0.03));
}
