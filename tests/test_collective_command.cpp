// `stepsim collective`: nccl-tests' table for one collective alone on a scenario's platform.
#include "support.hpp"

#include "models/link_calibration.hpp"

#include <catch2/catch.hpp>

#include <sstream>
#include <vector>

using namespace stepsim;

namespace {

struct Row {
  double bytes, count, time_us, algbw, busbw;
  std::string picked;
};

// The table's rows (lines of five numbers and the algorithm/protocol; the '#' lines and the
// header are skipped).
std::vector<Row> rows_of(const std::string& output)
{
  std::vector<Row> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    Row r{};
    std::string rest;
    // The last column names the algorithm/protocol that ran ("ring/LL").
    if (line.rfind('#', 0) != 0 && fields >> r.bytes >> r.count >> r.time_us >> r.algbw >> r.busbw >> r.picked &&
        r.picked.find('/') != std::string::npos && !(fields >> rest))
      rows.push_back(r);
  }
  return rows;
}

// A scenario on `nodes` DGX-like nodes: 8 GPUs on an NVSwitch (300 GB/s), 8 NICs of 200 Gb/s.
std::string dgx_scenario(int nodes)
{
  nlohmann::json s = testing::small_scenario(1, 8 * nodes, 8 * nodes);
  auto& g          = s["platform"]["node_groups"][0];
  g["count"]         = nodes;
  g["gpus_per_node"] = 8;
  g["intra_node"]    = {{"type", "nvswitch"}, {"bandwidth", "300GBps"}, {"latency", "1us"}};
  g["nic"]           = {{"count", 8}, {"bandwidth", "200Gbps"}, {"latency", "2us"}};
  return testing::write_temp_file("dgx" + std::to_string(nodes) + ".json", s.dump(2));
}

} // namespace

TEST_CASE("stepsim collective: ring all-reduce in one NVSwitch node reaches the link bandwidth")
{
  auto r = testing::run_stepsim("collective " + dgx_scenario(1) + " --gpus 8 --algorithm ring --sizes 1MB,16MB,1GB");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("all_reduce of 8 GPUs") != std::string::npos);
  auto rows = rows_of(r.output);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].bytes == 1e6);
  CHECK(rows[2].bytes == 1e9);
  for (const Row& row : rows) {
    CHECK(row.algbw == Approx(row.bytes / (row.time_us * 1e-6) / 1e9).epsilon(0.01));
    CHECK(row.busbw == Approx(row.algbw * 2 * 7 / 8.0).epsilon(0.01));
    CHECK(row.picked.rfind("ring/", 0) == 0); // the forced algorithm, with the protocol auto chose
  }
  // Latency weighs on small sizes only; the bus bandwidth climbs to the achieved NVLink rate.
  CHECK(rows[0].busbw < rows[1].busbw);
  CHECK(rows[1].busbw < rows[2].busbw);
  const double link_GBps = 300.0 * load_link_efficiency().nvswitch;
  CHECK(rows[2].busbw == Approx(link_GBps).epsilon(0.02));
}

TEST_CASE("stepsim collective: one GPU per node measures the NICs; sizes double from --min to --max")
{
  auto r = testing::run_stepsim("collective " + dgx_scenario(4) +
                                " --stride --op all_gather --algorithm direct --min 64MB --max 512MB");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("all_gather of 4 GPUs (one per node)") != std::string::npos);
  auto rows = rows_of(r.output);
  REQUIRE(rows.size() == 4);
  for (size_t i = 0; i < rows.size(); ++i)
    CHECK(rows[i].bytes == 64e6 * double(1 << i));
  for (const Row& row : rows)
    CHECK(row.busbw == Approx(row.algbw * 3 / 4.0).epsilon(0.01));
  CHECK(rows.back().busbw == Approx(25.0 * load_link_efficiency().nic).epsilon(0.02));
  // Same input, same table.
  auto again = testing::run_stepsim("collective " + dgx_scenario(4) +
                                    " --stride --op all_gather --algorithm direct --min 64MB --max 512MB");
  CHECK(again.output == r.output);
}

TEST_CASE("stepsim collective: without sizes it doubles from 8 B to 8 GiB, as nccl-tests -b 8 -e 8G")
{
  auto r = testing::run_stepsim("collective " + dgx_scenario(1) + " --gpus 8 --network analytic");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto rows = rows_of(r.output);
  REQUIRE(rows.size() == 31);
  CHECK(rows.front().bytes == 8);
  CHECK(rows.back().bytes == 8.0 * (1 << 30));
  for (size_t i = 1; i < rows.size(); ++i)
    CHECK(rows[i].time_us >= rows[i - 1].time_us);
}

TEST_CASE("stepsim collective: a bare count of bytes is a size, as nccl-tests -b takes it")
{
  // A size copied from a task graph (`stepsim graph --json`: "bytes": 201433088) or a log.
  const auto bare  = testing::run_stepsim("collective " + dgx_scenario(1) + " --network analytic --sizes 1048576,201433088");
  const auto units = testing::run_stepsim("collective " + dgx_scenario(1) + " --network analytic --sizes 1MiB,201433088B");
  INFO(bare.output);
  REQUIRE(bare.exit_code == 0);
  const auto rows = rows_of(bare.output);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].bytes == 1048576);
  CHECK(rows[1].bytes == 201433088);
  CHECK(bare.output == units.output);
}

TEST_CASE("stepsim collective: halving_doubling beats the ring on small all-reduces")
{
  auto ring = rows_of(testing::run_stepsim("collective " + dgx_scenario(2) + " --algorithm ring --sizes 64KB").output);
  auto hd   = rows_of(
      testing::run_stepsim("collective " + dgx_scenario(2) + " --algorithm halving_doubling --sizes 64KB").output);
  REQUIRE(ring.size() == 1);
  REQUIRE(hd.size() == 1);
  // 2·log2(16) = 8 latencies instead of 2·15 = 30, for the same bytes.
  CHECK(hd[0].time_us < ring[0].time_us);
}

TEST_CASE("stepsim collective: nvls forced on an H100 NVSwitch node runs what auto picks; on A100 it is refused")
{
  const auto forced = testing::run_stepsim("collective --preset dgx-h100 --nodes 1 --sizes 256MB --algorithm nvls");
  const auto chosen = testing::run_stepsim("collective --preset dgx-h100 --nodes 1 --sizes 256MB");
  INFO(forced.output << chosen.output);
  REQUIRE(forced.exit_code == 0);
  const auto f = rows_of(forced.output), a = rows_of(chosen.output);
  REQUIRE(f.size() == 1);
  REQUIRE(a.size() == 1);
  CHECK(f[0].picked.rfind("nvls/", 0) == 0);
  if (a[0].picked.rfind("nvls/", 0) == 0)
    CHECK(f[0].time_us == a[0].time_us);
  // The A100's NVSwitch does not reduce in the switch.
  const auto a100 = testing::run_stepsim("collective --preset dgx-a100 --nodes 1 --sizes 1MB --algorithm nvls");
  CHECK(a100.exit_code == 2);
  CHECK(a100.output.find("--algorithm: the nvls algorithm needs every member on one node") != std::string::npos);
}

TEST_CASE("stepsim collective: a ring of 72 lanes across NVL72 racks shares each GPU's NVLink among its lanes")
{
  // Two GB200 NVL72 racks: 144 GPUs, one ring per GPU of a rack (72 lanes), each leaving the rack
  // through another GPU's 400 Gb/s NIC. Every GPU sends 71 of its lanes over its own NVLink, so
  // the ring cannot pass the NVLink's rate; the lone member that stands for the group once timed
  // each lane on its NIC alone and reached 2,630 GB/s, 3.9 times the closed form.
  const std::string sizes = " --preset gb200-nvl72 --nodes 2 --algorithm ring --protocol Simple --sizes 8GiB";
  const auto flow         = testing::run_stepsim("collective" + sizes);
  const auto closed_form  = testing::run_stepsim("collective" + sizes + " --network analytic");
  INFO(flow.output << closed_form.output);
  REQUIRE(flow.exit_code == 0);
  REQUIRE(closed_form.exit_code == 0);
  const auto f = rows_of(flow.output), a = rows_of(closed_form.output);
  REQUIRE(f.size() == 1);
  REQUIRE(a.size() == 1);
  CHECK(f[0].busbw < 900.0 * load_link_efficiency().nvswitch);
  CHECK(f[0].busbw == Approx(a[0].busbw).epsilon(0.03));
  // NVLS within the rack and NVLS-tree across racks run on the GB200's own switch figure.
  const auto rack = rows_of(testing::run_stepsim("collective --preset gb200-nvl72 --gpus 8 --sizes 8GiB").output);
  REQUIRE(rack.size() == 1);
  CHECK(rack[0].picked == "nvls/Simple");
  CHECK(rack[0].busbw > 700.0);
}

TEST_CASE("stepsim collective: GPUs that share a NIC share it in the closed form as in the flows")
{
  // AWS p4d: 4 EFA NICs for 8 GPUs; GCP A3: 4 for 8; a PCIe cloud box: one for 8. A ring across
  // two nodes sends one lane through each GPU, two (eight) of them through one NIC. The closed
  // form (simulation.network_fidelity analytic, and what `auto` weighs) counted each GPU's flows
  // alone on its NIC and gave twice (eight times) the NICs' bandwidth.
  for (const char* preset : {"aws-p4d", "gcp-a3", "pcie-cloud-box"}) {
    INFO(preset);
    const std::string args = std::string(" --preset ") + preset + " --nodes 2 --algorithm ring --protocol Simple --sizes 1GiB";
    const auto flow        = rows_of(testing::run_stepsim("collective" + args).output);
    const auto closed_form = rows_of(testing::run_stepsim("collective" + args + " --network analytic").output);
    REQUIRE(flow.size() == 1);
    REQUIRE(closed_form.size() == 1);
    CHECK(closed_form[0].busbw == Approx(flow[0].busbw).epsilon(0.03));
  }
}

TEST_CASE("stepsim collective: a tree over more than 256 GPUs on a fabric without its closed form says it runs flow by flow")
{
  // 33 DGX H100 nodes (264 GPUs): on a torus `auto`'s tree runs flow by flow (minutes a size at
  // 1,024 GPUs and 64 MiB), said before the first row; not on a fat tree, oversubscribed or not
  // (its closed form shares the thinned uplinks), nor for a ring (its first member stands for all).
  const std::string base  = "collective --preset dgx-h100 --nodes 33 --sizes 8B";
  const std::string torus = " --set platform.network.topology=torus --set 'platform.network.torus={\"dimensions\":[3,11]}'";
  const auto slow         = testing::run_stepsim(base + torus);
  INFO(slow.output);
  REQUIRE(slow.exit_code == 0);
  const auto said = slow.output.find("# 264 GPUs on a torus fabric: a tree");
  CHECK(said != std::string::npos);
  CHECK(said < slow.output.find("size (B)"));
  CHECK(testing::run_stepsim(base).output.find("runs flow by flow") == std::string::npos);
  CHECK(testing::run_stepsim(base + " --set platform.network.oversubscription=2").output.find("runs flow by flow") ==
        std::string::npos);
  CHECK(testing::run_stepsim(base + torus + " --algorithm ring").output.find("runs flow by flow") == std::string::npos);
}

TEST_CASE("stepsim collective: bad options exit 2 naming the option")
{
  auto [args, message] = GENERATE(table<std::string, std::string>({
      {"--op all_sum", "--op: expected all_reduce, all_gather, reduce_scatter or all_to_all, got \"all_sum\""},
      {"--gpus 6 --algorithm halving_doubling", "--algorithm: the halving_doubling algorithm needs a power-of-two"},
      {"--algorithm trees", "--algorithm"},
      {"--gpus 9", "--gpus: the platform has 8 GPUs, asked for 9"},
      {"--sizes 1MB,lots", "--sizes: \"lots\" is not a size"},
      {"--min 8MB --max 1MB", "--max: 1MB is below --min 8MB"},
  }));
  auto r = testing::run_stepsim("collective " + dgx_scenario(1) + " " + args);
  INFO(args << "\n" << r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(message) != std::string::npos);
}

TEST_CASE("stepsim collective: intra_node.nvls false runs neither NVLS nor NVLS-tree, as NCCL_NVLS_ENABLE=0")
{
  // On H100 nodes auto takes NVLS inside a node and NVLS-tree across two at 256 MB (NCCL's tuner
  // does); with NVLS switched off (GCP's A3 Mega preset, whose NCCL profile sets
  // NCCL_NVLS_ENABLE=0) it takes the ring or the tree, and a forced nvls is refused with the reason.
  const std::string off = " --set platform.node_groups.0.intra_node.nvls=false";
  for (int nodes : {1, 2}) {
    const std::string base = "collective --preset dgx-h100 --nodes " + std::to_string(nodes) + " --sizes 256MB";
    const auto on      = rows_of(testing::run_stepsim(base).output);
    const auto without = rows_of(testing::run_stepsim(base + off).output);
    REQUIRE(on.size() == 1);
    REQUIRE(without.size() == 1);
    INFO(nodes << " nodes: " << on[0].picked << " / " << without[0].picked);
    CHECK(on[0].picked.rfind("nvls", 0) == 0);
    CHECK(without[0].picked.rfind("nvls", 0) == std::string::npos);
  }
  const auto forced = testing::run_stepsim("collective --preset dgx-h100 --nodes 1 --sizes 1MB --algorithm nvls" + off);
  INFO(forced.output);
  CHECK(forced.exit_code == 2);
  CHECK(forced.output.find("intra_node.nvls not false") != std::string::npos);
  const auto a3mega = rows_of(testing::run_stepsim("collective --preset gcp-a3-mega --sizes 256MB").output);
  REQUIRE(a3mega.size() == 1);
  CHECK(a3mega[0].picked.rfind("nvls", 0) == std::string::npos);
  // A training step's replay follows it too: the default scenario's tensor all-reduces on H100
  // nodes run NVLS, and the ring without it.
  const std::string h100 = "run " + std::string(STEPSIM_SOURCE_DIR) +
                           "/configs/scenarios/default.json -q --json - --set platform.node_groups.0.gpu=H100-SXM";
  const auto with_nvls = testing::run_stepsim(h100), no_nvls = testing::run_stepsim(h100 + off);
  REQUIRE(with_nvls.exit_code == 0);
  REQUIRE(no_nvls.exit_code == 0);
  const auto algorithms = [](const std::string& out) {
    return nlohmann::json::parse(out).at("collective_algorithms").at("all_reduce").get<std::string>();
  };
  CHECK(algorithms(with_nvls.output).find("nvls/") != std::string::npos);
  CHECK(algorithms(no_nvls.output) == "ring/Simple");
  // Not a boolean: exit 2 with the path.
  const auto bad =
      testing::run_stepsim("collective --preset dgx-h100 --sizes 1MB --set platform.node_groups.0.intra_node.nvls=2");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("platform.node_groups[0].intra_node.nvls") != std::string::npos);
}

TEST_CASE("stepsim collective: an 8-GPU AMD node runs RCCL's MSCCL all-pairs all-reduce up to 16 MiB")
{
  // RCCL hands an 8-GPU all-reduce of up to 16 MiB to its all-pairs MSCCL programs (LL below
  // 512 KiB, Simple from there; models/collectives/msccl.cpp) before its tuner; larger ones, other
  // group sizes and intra_node.msccl false (RCCL_MSCCL_ENABLE=0) run the tuner's ring.
  const std::string base = "collective --preset azure-nd-mi300x-v5 --nodes 1 --sizes 8KB,1MB,16MiB,64MiB";
  const auto on = rows_of(testing::run_stepsim(base).output);
  REQUIRE(on.size() == 4);
  CHECK(on[0].picked == "msccl_allpairs/LL");
  CHECK(on[1].picked == "msccl_allpairs/Simple");
  CHECK(on[2].picked == "msccl_allpairs/Simple");
  CHECK(on[3].picked.rfind("ring/", 0) == 0);
  const auto off = rows_of(testing::run_stepsim(base + " --set platform.node_groups.0.intra_node.msccl=false").output);
  REQUIRE(off.size() == 4);
  for (const auto& r : off)
    CHECK(r.picked.rfind("ring/", 0) == 0);
  // Two exchanges side by side beat the ring's 14 steps on a small message.
  CHECK(on[0].time_us < off[0].time_us);
  const auto four = rows_of(testing::run_stepsim(base + " --gpus 4").output);
  REQUIRE(four.size() == 4);
  CHECK(four[0].picked.rfind("ring/", 0) == 0);
  // A forced algorithm is what the user asked for.
  const auto ring = rows_of(testing::run_stepsim(base + " --algorithm ring").output);
  REQUIRE(ring.size() == 4);
  CHECK(ring[0].picked.rfind("ring/", 0) == 0);
  const auto bad = testing::run_stepsim(base + " --set platform.node_groups.0.intra_node.msccl=yes");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("platform.node_groups[0].intra_node.msccl") != std::string::npos);
}

TEST_CASE("stepsim collective: rings across DGX-1 nodes cross each node over its NVLinks, one lane out of each GPU")
{
  // Going up the local ranks sent 3 -> 4 and 7 -> 0, which no NVLink joins, over two hops: two
  // DGX-1 on 4 x EDR gave 25.7 GB/s; NCCL's maintainer gives 48 with the four NICs
  // (nccl-tests#29), their bound 4 x 12.5 x 0.92 = 46. With 2 NICs (DeepOps' RoCE pair) the NICs
  // bound it at half that, and flows and closed forms agree.
  for (const auto& [nics, low, high] : {std::tuple{4, 44.0, 48.0}, std::tuple{2, 22.0, 24.0}})
    for (const char* network : {"flow", "analytic"}) {
      const auto r = testing::run_stepsim(
          fmt::format("collective --preset dgx1-v100 --nodes 2 --sizes 1GB --algorithm ring --json - --network {} "
                      "--set platform.node_groups.0.nic.count={}",
                      network, nics));
      INFO(nics << " NICs, " << network << "\n" << r.output);
      REQUIRE(r.exit_code == 0);
      const double busbw = nlohmann::json::parse(r.output)["rows"][0]["busbw_GBps"].get<double>();
      CHECK(busbw > low);
      CHECK(busbw < high);
    }
}

TEST_CASE("stepsim collective on a platform of one GPU says the platform has one GPU")
{
  // It blamed --gpus, which the user had not given.
  const auto file = testing::write_temp_file(
      "one-gpu-platform.json",
      R"({"platform": {"node_groups": [{"count": 1, "gpu": "H100-SXM", "gpus_per_node": 1,
          "intra_node": {"type": "pcie"}, "nic": {"count": 1, "bandwidth": "400Gbps", "latency": "2us"}}]}})");
  const auto r = testing::run_stepsim("collective --platform " + file + " --sizes 1MB");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("platform.node_groups: the platform has 1 GPU") &&
                           !Catch::Contains("--gpus"));
}
