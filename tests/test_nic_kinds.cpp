// NIC kinds (platform node_groups[i].nic.kind): each its own achieved bandwidth and per-step
// latency from configs/calibration/links.json "nic_kinds"; infiniband, the default, is today's
// `nic` entry; an unknown kind is refused with the closest name.
#include "support.hpp"

#include "models/device.hpp"
#include "models/link_calibration.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/platform_parse.hpp"
#include "sim/simulate.hpp"
#include "topologies/preset.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>

using namespace stepsim;

namespace {

// Two 8-GPU H100 nodes with one 400 Gb/s NIC per GPU of the given kind ("" = none given).
std::string platform_file(const std::string& kind)
{
  nlohmann::json nic = {{"count", 8}, {"bandwidth", "400Gbps"}, {"latency", "2us"}};
  if (!kind.empty())
    nic["kind"] = kind;
  nlohmann::json doc = {{"platform",
                         {{"node_groups",
                           {{{"count", 2},
                             {"gpu", "H100-SXM"},
                             {"gpus_per_node", 8},
                             {"intra_node", {{"type", "nvswitch"}, {"bandwidth", "450GBps"}, {"latency", "1us"}}},
                             {"nic", nic}}}},
                          {"network", {{"topology", "fat_tree"}}}}}};
  return testing::write_temp_file(fmt::format("nic-kind-{}.json", kind.empty() ? "none" : kind), doc.dump());
}

nlohmann::json rows(const std::string& kind, const std::string& extra = "")
{
  auto r = testing::run_stepsim("collective --platform " + platform_file(kind) +
                                " --op all_reduce --sizes 64KiB,1GiB --json -" + extra);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output).at("rows");
}

} // namespace

TEST_CASE("links.json names every NIC kind; infiniband's figures are the nic entry's", "[nic_kinds]")
{
  const LinkEfficiency e = load_link_efficiency();
  REQUIRE(e.nic_kinds.size() == nic_kind_names().size());
  for (const auto& name : nic_kind_names()) {
    INFO(name);
    REQUIRE(e.nic_kinds.count(name) == 1);
    CHECK(e.nic_kinds.at(name).efficiency > 0);
    CHECK(e.nic_kinds.at(name).efficiency <= 1);
  }
  CHECK(e.nic_kind("infiniband").efficiency == e.nic);
  CHECK(e.nic_kind("infiniband").step_s == e.nic_step_s);
  // EFA and GPUDirect-TCPX(O) pay about an order of magnitude more per step than InfiniBand.
  for (const char* slow : {"efa", "efa-v2", "efa-v3", "tcpx", "tcpxo", "ethernet"})
    CHECK(e.nic_kind(slow).step_s > 10 * e.nic_step_s);
  // Each EFA generation's step is no longer than the one before (the aws-ofi-nccl plugin reports
  // 75 us to NCCL on p4d and p5, 35 us on p5en; the fitted figures: p4de's rows above p5's).
  CHECK(e.nic_kind("efa-v2").step_s <= e.nic_kind("efa").step_s);
  CHECK(e.nic_kind("efa-v3").step_s <= e.nic_kind("efa-v2").step_s);
}

TEST_CASE("nic.kind: infiniband by default, byte for byte; EFA slower per step and per byte", "[nic_kinds]")
{
  const auto none = rows("");
  const auto ib   = rows("infiniband");
  CHECK(none == ib);
  const auto efa          = rows("efa");
  const LinkEfficiency e  = load_link_efficiency();
  const double extra_step = (e.nic_kind("efa").step_s - e.nic_kind("infiniband").step_s) * 1e6;
  // A 64 KiB all-reduce across two nodes crosses the network at least once: it pays EFA's extra
  // step latency at least once.
  CHECK(efa[0].at("time_us").get<double>() > ib[0].at("time_us").get<double>() + extra_step);
  // 1 GiB is bandwidth-bound: EFA's lower achieved fraction shows in the bus bandwidth.
  if (e.nic_kind("efa").efficiency < e.nic_kind("infiniband").efficiency)
    CHECK(efa[1].at("busbw_GBps").get<double>() < ib[1].at("busbw_GBps").get<double>());
}

TEST_CASE("nic.kind: a ring pays a NIC kind's transport once per crossing of its data path, not per step",
          "[nic_kinds]")
{
  // An all-gather ring over 2 nodes of 8 GPUs has 15 steps, of which NCCL's tuner charges the
  // network's latency on nNodes - 1 = 1 (tuning.cc nInterSteps); an all-reduce ring 2(nNodes - 1)
  // = 2 of 30. Every step but those pays InfiniBand's figures.
  const LinkEfficiency e = load_link_efficiency();
  const double extra_us  = (e.nic_kind("tcpxo").step_s - e.nic_kind("infiniband").step_s) * 1e6;
  REQUIRE(extra_us > 10);
  auto time_us = [](const std::string& kind, const std::string& op) {
    auto r = testing::run_stepsim("collective --platform " + platform_file(kind) + " --op " + op +
                                  " --algorithm ring --protocol Simple --sizes 8KiB --json -");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.output).at("rows")[0].at("time_us").get<double>();
  };
  for (const auto& [op, crossings] : {std::pair<std::string, int>{"all_gather", 1}, {"all_reduce", 2}}) {
    INFO(op);
    const double paid = time_us("tcpxo", op) - time_us("infiniband", op);
    CHECK(paid == Approx(crossings * extra_us).epsilon(0.02));
  }
  // The same collective, timed flow by flow and in closed form, pays it alike.
  auto r_flow = testing::run_stepsim("collective --platform " + platform_file("efa") +
                                     " --op all_gather --algorithm ring --sizes 8KiB,64MiB --json -");
  auto r_form = testing::run_stepsim("collective --platform " + platform_file("efa") +
                                     " --op all_gather --algorithm ring --sizes 8KiB,64MiB --network analytic --json -");
  REQUIRE(r_flow.exit_code == 0);
  REQUIRE(r_form.exit_code == 0);
  const auto flow = nlohmann::json::parse(r_flow.output).at("rows");
  const auto form = nlohmann::json::parse(r_form.output).at("rows");
  for (size_t i = 0; i < flow.size(); ++i)
    CHECK(flow[i].at("time_us").get<double>() == Approx(form[i].at("time_us").get<double>()).epsilon(1e-6));
}

TEST_CASE("nic.kind: an unknown kind exits 2 naming the path and the closest kind", "[nic_kinds]")
{
  auto r = testing::run_stepsim("collective --platform " + platform_file("efx") + " --sizes 1MiB");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("platform.node_groups[0].nic.kind: unknown value \"efx\" (did you mean \"efa\"?)"));
}

TEST_CASE("the cloud presets parse with their NIC kinds and layouts", "[nic_kinds]")
{
  struct Expect {
    const char* preset;
    const char* kind;
    int nics;          // as built: one per PCIe group
    double nic_Bps;    // per built NIC
  };
  for (const Expect& x : {Expect{"aws-p5", "efa-v2", 8, 4 * 100e9 / 8}, Expect{"aws-p5en", "efa-v3", 8, 2 * 200e9 / 8},
                          Expect{"aws-p4d", "efa", 4, 100e9 / 8}, Expect{"aws-p4de", "efa", 4, 100e9 / 8},
                          Expect{"gcp-a3", "tcpx", 4, 200e9 / 8}, Expect{"gcp-a3-mega", "tcpxo", 8, 200e9 / 8},
                          Expect{"oci-bm-gpu4-8", "roce", 8, 2 * 100e9 / 8},
                          Expect{"azure-ndv4", "infiniband", 8, 200e9 / 8},
                          Expect{"azure-ndv5", "infiniband", 8, 400e9 / 8},
                          Expect{"aws-p5e", "efa-v2", 8, 4 * 100e9 / 8}, Expect{"gcp-a3-ultra", "roce", 8, 400e9 / 8},
                          Expect{"azure-nd-h200-v5", "infiniband", 8, 400e9 / 8},
                          Expect{"dgx-b200", "infiniband", 8, 400e9 / 8}, Expect{"gcp-a4", "roce", 8, 400e9 / 8}}) {
    INFO(x.preset);
    nlohmann::json doc = testing::small_scenario(1, 16, 16);
    doc["platform"]    = {{"preset", x.preset}, {"nodes", 2}};
    const Scenario s   = parse_scenario(expand_platform_preset(doc));
    const auto& g      = s.platform.node_groups[0];
    CHECK(g.nic.kind == x.kind);
    CHECK(g.nic.count == x.nics);
    CHECK(g.nic.bandwidth_Bps == Approx(x.nic_Bps));
  }
}
