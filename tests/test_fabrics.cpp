// The cluster fabrics (topologies/fabrics/*.cpp), edge Wi-Fi and platform presets against what
// their specification implies: which links a route crosses, its bottleneck and summed latency,
// the time a transfer alone takes on it (latency + bytes / bottleneck), how transfers share a
// rail spine or the air, and that presets expand as documented.
#include "support.hpp"

#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/core/link_bandwidth.hpp"
#include "topologies/platform.hpp"
#include "topologies/preset.hpp"
#include "sim/simulate.hpp"

#include <simgrid/s4u.hpp>

#include <catch2/catch.hpp>

#include <algorithm>

using namespace stepsim;

namespace {

namespace sg4 = simgrid::s4u;

NodeGroupSpec nodes_of(int count, int gpus_per_node, double nvlink_Bps, double nvlink_s, double nic_Bps, double nic_s)
{
  return testing::nvswitch_nodes("H100-SXM", count, gpus_per_node, nvlink_Bps, nvlink_s, nic_Bps, nic_s);
}

struct Flow {
  int src, dst;
};

// Builds the platform in a child; for each flow: the links of its route, their bottleneck and
// summed latency; then the time each flow takes when all of `together` run at once (each alone
// when `together` is empty).
nlohmann::json measure(const PlatformSpec& spec, const std::vector<Flow>& flows, double bytes, bool together = false)
{
  return testing::in_child([&] {
    nlohmann::json out = nlohmann::json::array();
    auto engine        = testing::start_engine();
    BuiltPlatform p    = build_platform(spec);
    auto host          = [&](int g) { return p.gpus.at(static_cast<size_t>(g)); };
    for (const auto& f : flows) {
      std::vector<sg4::Link*> links;
      double latency = 0;
      host(f.src)->route_to(host(f.dst), links, &latency);
      nlohmann::json r{{"links", nlohmann::json::array()}, {"route_latency_s", latency}};
      double bottleneck = 1e300, summed = 0;
      for (const auto* l : links) {
        r["links"].push_back(l->get_name());
        bottleneck = std::min(bottleneck, link_bandwidth(l));
        summed += l->get_latency();
      }
      r["bottleneck_Bps"]   = bottleneck;
      r["summed_latency_s"] = summed;
      out.push_back(r);
    }
    // Transfers start together at time 0 (or one after another, each alone, from its own start).
    std::vector<double> done(flows.size(), 0);
    sg4::Actor::create("flows", host(flows.front().src), [&] {
      if (together) {
        std::vector<sg4::CommPtr> comms;
        for (const auto& f : flows)
          comms.push_back(sg4::Comm::sendto_async(host(f.src), host(f.dst), static_cast<uint64_t>(bytes)));
        for (size_t i = 0; i < comms.size(); ++i) {
          comms[i]->wait();
          done[i] = sg4::Engine::get_clock();
        }
        return;
      }
      for (size_t i = 0; i < flows.size(); ++i) {
        const double start = sg4::Engine::get_clock();
        sg4::Comm::sendto(host(flows[i].src), host(flows[i].dst), static_cast<uint64_t>(bytes));
        done[i] = sg4::Engine::get_clock() - start;
      }
    });
    engine->run();
    for (size_t i = 0; i < flows.size(); ++i)
      out[i]["transfer_s"] = done[i];
    return out;
  });
}

bool crosses(const nlohmann::json& route, const std::string& part)
{
  for (const auto& l : route["links"])
    if (l.get<std::string>().find(part) != std::string::npos)
      return true;
  return false;
}

// A transfer alone takes the route's summed latency plus bytes over its bottleneck, and the
// route's latency as SimGrid reports it is the sum of its links'.
void check_alpha_beta(const nlohmann::json& r, double bytes)
{
  CHECK(r["route_latency_s"].get<double>() == Approx(r["summed_latency_s"].get<double>()).epsilon(1e-9));
  CHECK(r["transfer_s"].get<double>() ==
        Approx(r["summed_latency_s"].get<double>() + bytes / r["bottleneck_Bps"].get<double>()).epsilon(1e-6));
}

constexpr double kBytes = 256e6;

} // namespace

TEST_CASE("rail-optimized: same-rail traffic crosses only its rail switch, other traffic the spine", "[fabrics]")
{
  // 4 nodes of 8 GPUs in two units of 2 nodes (leaf_radix 2), the spine thinned 2:1.
  PlatformSpec spec;
  spec.node_groups              = {nodes_of(4, 8, 400e9, 1e-6, 50e9, 2e-6)};
  spec.network.topology         = "rail_optimized";
  spec.network.leaf_radix       = 2;
  spec.network.oversubscription = 2;
  // GPU 0 -> GPU 1 (same node), -> GPU 8 (node 1, rail 0, same unit), -> GPU 16 (node 2, rail 0,
  // other unit), -> GPU 9 (node 1, rail 1).
  auto r = measure(spec, {{0, 1}, {0, 8}, {0, 16}, {0, 9}}, kBytes);
  for (const auto& route : r)
    check_alpha_beta(route, kBytes);

  CHECK(r[0]["bottleneck_Bps"].get<double>() == Approx(400e9));
  CHECK(r[0]["summed_latency_s"].get<double>() == Approx(1e-6));
  CHECK_FALSE(crosses(r[0], "nic"));

  CHECK(r[1]["links"] == nlohmann::json::array({"node0-nic0-link_UP", "node1-nic0-link_DOWN"}));
  CHECK(r[1]["bottleneck_Bps"].get<double>() == Approx(50e9));
  CHECK(r[1]["summed_latency_s"].get<double>() == Approx(2e-6));

  // Another unit: up and down rail 0's uplinks, 2 nodes x 50 GB/s / 2.
  CHECK(crosses(r[2], "su0-rail0-uplink_UP"));
  CHECK(crosses(r[2], "su1-rail0-uplink_DOWN"));
  CHECK(r[2]["bottleneck_Bps"].get<double>() == Approx(50e9));

  // Another rail: leaves by NIC 0, climbs rail 0, comes down rail 1 to NIC 1.
  CHECK(crosses(r[3], "node0-nic0-link_UP"));
  CHECK(crosses(r[3], "su0-rail0-uplink_UP"));
  CHECK(crosses(r[3], "su0-rail1-uplink_DOWN"));
  CHECK(crosses(r[3], "node1-nic1-link_DOWN"));
}

TEST_CASE("rail-optimized: an oversubscribed spine slows cross-rail flows, never same-rail ones", "[fabrics]")
{
  PlatformSpec spec;
  spec.node_groups              = {nodes_of(2, 8, 400e9, 1e-6, 50e9, 2e-6)};
  spec.network.topology         = "rail_optimized";
  spec.network.leaf_radix       = 2;
  spec.network.oversubscription = 4; // each rail leaf's uplink: 2 x 50 / 4 = 25 GB/s
  // Every GPU of node 0 to its peer of node 1, all at once: 8 rails, each flow alone on its rail.
  std::vector<Flow> same_rail, cross_rail;
  for (int g = 0; g < 8; ++g) {
    same_rail.push_back({g, 8 + g});
    cross_rail.push_back({g, 8 + (g + 1) % 8});
  }
  auto same  = measure(spec, same_rail, kBytes, true);
  auto cross = measure(spec, cross_rail, kBytes, true);
  for (const auto& r : same)
    CHECK(r["transfer_s"].get<double>() == Approx(2e-6 + kBytes / 50e9).epsilon(1e-6));
  for (const auto& r : cross) // each flow alone on its source rail's uplink and its destination's
    CHECK(r["transfer_s"].get<double>() == Approx(2e-6 + kBytes / 25e9).epsilon(1e-6));
}

TEST_CASE("torus: routes go the shorter way round, one torus link per hop", "[fabrics]")
{
  PlatformSpec spec;
  spec.node_groups                       = {nodes_of(6, 1, 400e9, 1e-6, 50e9, 2e-6)};
  spec.network.topology                  = "torus";
  spec.network.torus.dimensions          = {6};
  spec.network.torus.link.bandwidth_Bps  = 20e9; // the torus links, not the NICs, are the bottleneck
  spec.network.torus.link.latency_s      = 1e-6;
  auto r = measure(spec, {{0, 1}, {0, 3}, {0, 5}}, kBytes);
  const int hops[] = {1, 3, 1}; // 0 -> 5 wraps around
  for (size_t i = 0; i < r.size(); ++i) {
    check_alpha_beta(r[i], kBytes);
    int torus_links = 0;
    for (const auto& l : r[i]["links"])
      torus_links += l.get<std::string>().find("torus_link") != std::string::npos ? 1 : 0;
    CHECK(torus_links == hops[i]);
    CHECK(r[i]["bottleneck_Bps"].get<double>() == Approx(20e9));
    CHECK(r[i]["summed_latency_s"].get<double>() == Approx(2e-6 + hops[i] * 1e-6));
  }
}

TEST_CASE("dragonfly: a flow between groups takes one global link; latency adds up per hop", "[fabrics]")
{
  PlatformSpec spec;
  spec.node_groups                          = {nodes_of(8, 1, 400e9, 1e-6, 50e9, 2e-6)};
  spec.network.topology                     = "dragonfly";
  spec.network.dragonfly.groups             = 2;
  spec.network.dragonfly.chassis            = 2;
  spec.network.dragonfly.routers            = 2;
  spec.network.dragonfly.nodes_per_router   = 1;
  spec.network.dragonfly.link.bandwidth_Bps = 30e9;
  spec.network.dragonfly.link.latency_s     = 0.5e-6;
  auto r = measure(spec, {{0, 1}, {0, 7}}, kBytes);
  for (const auto& route : r) {
    check_alpha_beta(route, kBytes);
    CHECK(route["bottleneck_Bps"].get<double>() == Approx(30e9));
    // Two NIC halves (2 us) and 0.5 us for each dragonfly link.
    int fabric_links = 0;
    for (const auto& l : route["links"]) {
      const auto name = l.get<std::string>();
      fabric_links += name.find("nic") == std::string::npos && name.find("backplane") == std::string::npos ? 1 : 0;
    }
    CHECK(route["summed_latency_s"].get<double>() == Approx(2e-6 + fabric_links * 0.5e-6));
  }
  CHECK_FALSE(crosses(r[0], "blue")); // same group, same chassis
  CHECK(crosses(r[1], "blue"));       // the global link between groups
}

TEST_CASE("custom topology: shortest path between the switches, bottleneck and latency of its links", "[fabrics]")
{
  PlatformSpec spec;
  spec.node_groups      = {nodes_of(6, 1, 400e9, 1e-6, 50e9, 2e-6)};
  spec.network.topology = "custom";
  spec.network.switches = {{"tor0", {0, 1}}, {"tor1", {2, 3}}, {"tor2", {4, 5}}, {"spine", {}}};
  spec.network.links    = {{"tor0", "spine", 40e9, 1e-6},
                           {"tor1", "spine", 40e9, 1e-6},
                           {"tor2", "spine", 40e9, 1e-6},
                           {"tor0", "tor2", 10e9, 5e-6}}; // a direct, thinner link: one hop beats two
  auto r = measure(spec, {{0, 1}, {0, 2}, {0, 4}}, kBytes);
  for (const auto& route : r)
    check_alpha_beta(route, kBytes);
  CHECK(r[0]["links"].size() == 2); // the two NIC links under tor0
  CHECK(r[0]["bottleneck_Bps"].get<double>() == Approx(50e9));
  CHECK(r[1]["bottleneck_Bps"].get<double>() == Approx(40e9));
  CHECK(r[1]["summed_latency_s"].get<double>() == Approx(2e-6 + 2e-6));
  CHECK(crosses(r[2], "tor0-tor2"));
  CHECK_FALSE(crosses(r[2], "spine"));
  CHECK(r[2]["bottleneck_Bps"].get<double>() == Approx(10e9));
  CHECK(r[2]["summed_latency_s"].get<double>() == Approx(2e-6 + 5e-6));
}

TEST_CASE("wifi: two devices sending at once each get about half the throughput of one alone", "[fabrics]")
{
  PlatformSpec spec;
  NodeGroupSpec device = nodes_of(2, 1, 1e9, 1e-6, 50e6, 2e-3);
  device.gpu           = "Jetson-AGX-Orin";
  NodeGroupSpec server = nodes_of(1, 1, 1e9, 1e-6, 1.25e9, 20e-6);
  server.gpu           = "A100-PCIe-80GB";
  spec.node_groups     = {device, server};
  spec.network.topology       = "wifi";
  spec.network.wifi.stations  = {0};
  spec.network.wifi.rate_Bps  = 50e6; // 400 Mb/s
  spec.network.wifi.latency_s = 2e-3;
  const double bytes = 10e6;
  auto alone = measure(spec, {{0, 2}, {1, 2}}, bytes);
  auto both  = measure(spec, {{0, 2}, {1, 2}}, bytes, true);
  for (const auto& r : alone) {
    CHECK(r["links"].front() == "wifi-air"); // the air first, then the server's wired NIC
    check_alpha_beta(r, bytes);
  }
  for (size_t i = 0; i < 2; ++i) {
    const double alone_Bps = bytes / (alone[i]["transfer_s"].get<double>() - 2e-3 - 10e-6);
    const double both_Bps  = bytes / (both[i]["transfer_s"].get<double>() - 2e-3 - 10e-6);
    CHECK(both_Bps / alone_Bps == Approx(0.5).epsilon(0.05));
  }
}

TEST_CASE("wifi: device to device crosses the air twice and pays its latency each time", "[fabrics][cli]")
{
  // SimGrid's WIFI links carry no latency ("Latency cannot be set for WiFi Links"): the fabric's
  // 2 ms link between the access point and the wired side gave device-to-server transfers their
  // latency and device-to-device ones none, so an all-reduce of 8 B between two boards took
  // 0.64 us. A 2-device ring all-reduce has 2 steps, each across the air twice: 8 ms, under flows
  // and closed forms alike.
  for (const char* network : {"flow", "analytic"}) {
    const auto r = testing::run_stepsim(std::string("collective --preset jetson-wifi-edge --gpus 2 --sizes 8B "
                                                    "--algorithm ring --json - --network ") + network);
    INFO(network << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    const double us = nlohmann::json::parse(r.output)["rows"][0]["time_us"].get<double>();
    CHECK(us > 8000);
    CHECK(us < 8100);
  }
}

TEST_CASE("the edge split-learning example runs, and the Wi-Fi rate sets its step time", "[fabrics][cli]")
{
  const std::string file = std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/edge-split-learning-wifi.json";
  const std::string slow = testing::write_temp_file("edge-slow.json", "");
  const std::string fast = testing::write_temp_file("edge-fast.json", "");
  auto a = testing::run_stepsim("run " + file + " --quiet --json " + slow);
  REQUIRE(a.exit_code == 0);
  auto b = testing::run_stepsim("run " + file + " --set platform.network.wifi.rate=1600Mbps --quiet --json " + fast);
  REQUIRE(b.exit_code == 0);
  auto ra = nlohmann::json::parse(testing::read_text_file(slow));
  auto rb = nlohmann::json::parse(testing::read_text_file(fast));
  CHECK(ra["step_time_s"].get<double>() > 0);
  CHECK(rb["step_time_s"].get<double>() < ra["step_time_s"].get<double>());
  CHECK(ra["comm_s"].get<double>() > rb["comm_s"].get<double>());
}

TEST_CASE("a preset expands into its platform; nodes and explicit fields override it", "[fabrics]")
{
  nlohmann::json doc = {{"platform",
                         {{"preset", "dgx-a100-superpod"},
                          {"nodes", 16},
                          {"node_groups", {{{"nic", {{"latency", "3us"}}}}}},
                          {"network", {{"oversubscription", 2}}}}}};
  nlohmann::json out = expand_platform_preset(doc);
  const auto& p      = out["platform"];
  CHECK(p["preset"] == "dgx-a100-superpod");
  CHECK_FALSE(p.contains("nodes"));
  CHECK(p["node_groups"][0]["count"] == 16);
  CHECK(p["node_groups"][0]["gpu"] == "A100-SXM4-80GB");
  CHECK(p["node_groups"][0]["nic"]["latency"] == "3us");        // overridden
  CHECK(p["node_groups"][0]["nic"]["bandwidth"] == "200Gbps");  // kept
  CHECK(p["network"]["topology"] == "rail_optimized");
  CHECK(p["network"]["leaf_radix"] == 20);
  CHECK(p["network"]["oversubscription"] == 2);
  CHECK(expand_platform_preset(nlohmann::json{{"platform", {{"node_groups", 1}}}}) ==
        nlohmann::json{{"platform", {{"node_groups", 1}}}});
  // `--set platform.node_groups.0.gpu=...` on a scenario that names a preset builds an object
  // keyed by the group's index: it patches that group as the list would.
  nlohmann::json by_set = {{"platform", {{"preset", "dgx-a100"}}}};
  set_by_path(by_set, "platform.node_groups.0.gpu=A800-SXM4-80GB");
  set_by_path(by_set, "platform.node_groups.0.nic.latency=3us");
  const auto patched = expand_platform_preset(by_set)["platform"]["node_groups"];
  REQUIRE(patched.size() == 1);
  CHECK(patched[0]["gpu"] == "A800-SXM4-80GB");
  CHECK(patched[0]["nic"]["latency"] == "3us");
  CHECK(patched[0]["nic"]["bandwidth"] == expand_platform_preset(nlohmann::json{{"platform", {{"preset", "dgx-a100"}}}})[
                                              "platform"]["node_groups"][0]["nic"]["bandwidth"]);
  // An index the preset has not, or a key that is no index, is refused with the path.
  for (const char* bad : {"platform.node_groups.1.gpu=A800-SXM4-80GB", "platform.node_groups.first.gpu=A800-SXM4-80GB"}) {
    nlohmann::json doc = {{"platform", {{"preset", "dgx-a100"}}}};
    set_by_path(doc, bad);
    INFO(bad);
    CHECK_THROWS_WITH(expand_platform_preset(doc), Catch::Contains("platform.node_groups: expected an array"));
  }
}

TEST_CASE("every shipped preset parses, names its sources and builds", "[fabrics]")
{
  const auto names = platform_preset_names();
  for (const char* expected : {"dgx-a100-superpod", "dgx-h100-superpod", "h100-rail-roce", "pcie-cloud-box",
                               "jetson-wifi-edge"})
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  for (const auto& name : names) {
    INFO(name);
    auto file = read_json_file(std::string(STEPSIM_SOURCE_DIR) + "/configs/platforms/" + name + ".json");
    CHECK(file["sources"].is_object());
    CHECK_FALSE(file["sources"].empty());
    nlohmann::json doc = testing::small_scenario(1, 1, 1);
    doc["platform"]    = {{"preset", name}, {"nodes", 2}};
    const auto expanded = expand_platform_preset(doc);
    int gpus            = 0;
    for (const auto& g : expanded["platform"]["node_groups"])
      gpus += g["count"].get<int>() * g.value("gpus_per_node", 8);
    doc["parallelism"] = {{"tensor", 1}, {"pipeline", 1}, {"data", gpus}};
    doc["training"]["global_batch_size"] = gpus;
    Scenario s = parse_scenario(expand_platform_preset(doc));
    CHECK(s.platform.preset == name);
    CHECK(s.platform.node_groups[0].count == 2);
    auto built = testing::in_child([&] {
      auto engine     = testing::start_engine();
      BuiltPlatform p = build_platform(s.platform);
      int hosts       = 0;
      for (auto* h : p.gpus)
        hosts += h != nullptr ? 1 : 0;
      return nlohmann::json{{"gpus", hosts}};
    });
    CHECK(built["gpus"] == gpus);
  }
}

TEST_CASE("bad presets and fabrics name the JSON path", "[fabrics]")
{
  auto problems = [](const nlohmann::json& platform) {
    nlohmann::json doc = testing::small_scenario(1, 1, 1);
    doc["platform"]    = platform;
    return testing::input_problems([&] { parse_scenario(expand_platform_preset(doc)); });
  };
  CHECK_THAT(problems({{"preset", "dgx-h100-superpd"}}),
             Catch::Contains("platform.preset: unknown preset \"dgx-h100-superpd\" (did you mean \"dgx-h100-superpod\"?)"));
  CHECK_THAT(problems({{"preset", "pcie-cloud-box"}, {"nodes", "two"}}), Catch::Contains("platform.nodes: expected"));
  nlohmann::json custom = {{"node_groups", {{{"count", 2}, {"gpu", "A100-SXM4-80GB"}, {"gpus_per_node", 1}, {"nic", {{"count", 1}}}}}},
                           {"network",
                            {{"topology", "custom"},
                             {"switches", {{{"name", "a"}, {"nodes", {0}}}, {{"name", "b"}, {"nodes", {1}}}}},
                             {"links", {{{"from", "a"}, {"to", "c"}, {"bandwidth", "1GBps"}}}}}}};
  CHECK_THAT(problems(custom), Catch::Contains("platform.network.links[0].to: unknown switch \"c\""));
  custom["network"]["links"][0]["to"] = "b";
  CHECK_THAT(problems(custom), !Catch::Contains("platform.network"));
  custom["network"]["switches"][1]["nodes"] = {0};
  CHECK_THAT(problems(custom), Catch::Contains("platform.network.switches[1].nodes: node 0 already hangs from switch \"a\""));
}

TEST_CASE("stepsim platform describes the new fabrics: rails, other rail, the air", "[fabrics][cli]")
{
  const std::string rail = testing::write_temp_file(
      "rail-preset.json",
      R"({"name": "rail", "model": {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 128,
          "vocab_size": 1000}, "training": {"global_batch_size": 4}, "parallelism": {"tensor": 8, "data": 4},
          "platform": {"preset": "dgx-h100-superpod", "nodes": 4, "network": {"leaf_radix": 2}}})");
  const std::string out = testing::write_temp_file("rail-platform.json", "");
  auto r                = testing::run_stepsim("platform " + rail + " --json " + out + " --quiet");
  REQUIRE(r.exit_code == 0);
  auto d = nlohmann::json::parse(testing::read_text_file(out));
  CHECK(d["fabric"]["topology"] == "rail_optimized");
  CHECK(d["fabric"]["preset"] == "dgx-h100-superpod");
  bool other_rail = false;
  for (const auto& route : d["routes"])
    if (route["label"] == "node 1, other rail") {
      other_rail = true;
      std::string names;
      for (const auto& l : route["links"])
        names += l["name"].get<std::string>() + " ";
      CHECK_THAT(names, Catch::Contains("su0-rail0-uplink_UP") && Catch::Contains("su0-rail1-uplink_DOWN"));
    }
  CHECK(other_rail);

  const std::string edge = std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/edge-split-learning-wifi.json";
  auto e                 = testing::run_stepsim("platform " + edge + " --json " + out + " --quiet");
  REQUIRE(e.exit_code == 0);
  d = nlohmann::json::parse(testing::read_text_file(out));
  CHECK(d["fabric"]["topology"] == "wifi");
  REQUIRE(d["routes"].size() >= 1);
  const auto& to_server = d["routes"].back(); // node 1 is the server: device 0 to it
  CHECK(to_server["to"] == "node1-gpu0");
  CHECK(to_server["links"][0]["name"] == "wifi-air");
  CHECK(to_server["bottleneck_Bps"].get<double>() == Approx(400e6 / 8)); // the station's rate, not SimGrid's placeholder
}
