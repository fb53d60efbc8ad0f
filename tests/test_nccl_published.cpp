// The published nccl-tests cases (configs/calibration/nccl_tests_published.json) as a measured
// harness: every case timed on its preset through the code `stepsim collective --compare` uses,
// the bus bandwidth's mean absolute percentage error per case and per family of sizes printed,
// and held to today's figure plus a margin, so that work on the network model can only tighten
// these bounds (lower them when a change improves a case).
#include "support.hpp"

#include "models/device.hpp"
#include "tools/driver/nccl_compare.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <string>

using namespace stepsim;

namespace {

// Today's MAPE (percent) of each case run, per family: {>= 64 MiB, 8 KiB-1 MiB}; -1 where the
// case has no row of that family. Measured with `stepsim collective --compare
// configs/calibration/nccl_tests_published.json`; lower a bound when a change improves its case.
// Two bounds were raised once, by the change that charges NVLS-tree's protocol latency per hop as
// NCCL's tuner does (models/collectives/protocol.cpp) instead of per chunk: the two-node H100
// runs (issue309_qoofyk) lost an agreement that came from that per-chunk charge at 64 MiB-1 GiB,
// while the four NVLS-tree scaling cases went from 14-21 % to 6-8 %. Two more were raised by the
// change that keeps NCCL_STEPS chunks of a tree in flight and credits the tree on two nodes as
// NCCL's tuner does (collective.hpp pipeline_slots, protocol.cpp tree_graph_factor): on AWS p5
// the tuner now takes the tree at 64 MiB-1 GiB, which the NCCL 2.18.5 run (eks) measures slower
// than the other p5 run (slurm) does: eks 9.1 -> 20.8 %, while p4de's large sizes went from 41.7
// to 3.3 % and OCI's two RoCE nodes from 17.6 to 10.0 %. EFA's step latency was then refitted on
// the small rows of p4de and p5 together (tools/calibrate/fit_latency.py, then named fit_nic_latency.py, 45 -> 53 us): p4de's
// 8 KiB-1 MiB 43.8 -> 35.7 %, p5 slurm's 16.4 -> 25.2 % (and its large sizes 28.2 -> 24.2 %).
// Two small-row bounds were raised by the change that gives NVLS-tree its own hop latency between
// nodes (links.json protocols.nvls_tree, fitted on the GTC'24 scaling rows: 50-59 -> 0-10 %) and
// Hopper's NVSwitch its own step (nvswitch.step_latency_by_gpu, on the DGX H100 node's rows:
// 15.5 -> 10.7 %): where the tuner still runs NVLS-tree at 512 KiB-1 MiB on four H100 nodes, or
// runs the tree on EFA, those rows are slower than measured (issue309 four nodes 19.5 -> 24.7 %,
// p5 slurm 25.2 -> 27.4 %), while issue309's two nodes went from 30.6 to 18.3 %. EFA's step, refitted
// by the same program after them (53 -> 51.9 us), took p4de's small rows to 37.5 % and p5 slurm's to
// 26.3 %. One small-row bound was raised by the change that caps LL's bandwidth in the pick as
// NCCL's tuner does (protocol.cpp ll_max_bus_bandwidth, by the hosts' CPU vendor) and stops
// counting a tree's staggered chain flows as concurrent in its closed form (collective.cpp
// chain_places): on four H100 nodes the tuner's view now takes the tree with LL128 at
// 256 KiB-1 MiB, which stepsim's LL128 steps time slower than the measured run (issue309 four
// nodes 24.7 -> 28.1 %; p4de 37.5 -> 39.3 %), while NDv4's 16 and 32 GPUs went from 22.9 and
// 22.7 % to 21.2 and 18.1 % and p5 slurm's to 25.5 %. Three small-row bounds were lowered by
// the change that times the cases run with nccl-tests -g N as nccl-tests does, an iteration at
// least N launches of one host thread (collective_bench.hpp nccl_tests_iteration_seconds, the
// cases' gpus_per_thread): Azure's AI benchmark node (-g 8) 58.9 -> 9.9 %, Echo's 4 GPUs
// 75.0 -> 60.7 %, its 2 GPUs 165.8 -> 159.8 %. One large-row bound was raised by the change that
// runs NVLS-tree loop by loop with NCCL's chunking and pays the pipeline's fill over its stages
// (nvls_tree.cpp loop_bytes, fill_seconds): on AWS p5 at 64 MiB the tuner now takes NVLS-tree at
// 187 GB/s, between the two p5 logs that disagree there (eks 126, slurm 209): eks 21.2 -> 26.1 %,
// while slurm went from 23.8 to 19.2 %, issue309's two nodes from 20.1 to 6.4 % (8 KiB-1 MiB
// 18.3 -> 16.5 %) and GTC'24's 32 GPUs' 1 MiB row from 9.5 to 4.8 %. Two large-row bounds were
// raised by the change that gives each EFA generation its own step latency (links.json nic_kinds
// efa, efa-v2, efa-v3; AWS names the generation per instance type), each fitted on its own
// instances' small rows: p4de (first generation) 51.9 -> 83.9 us, p5 (EFAv2) 51.9 -> 31.1 us.
// Small rows: p4de 39.3 -> 7.8 %, p5 slurm 25.5 -> 11.3 % (and the held-out p4d run of NCCL 2.23,
// nccl_tests_heldout.json, 53.6 -> 15.5 %); large rows: p4de 3.3 -> 8.5 % (the tree's chunks on
// the slower step, 64-256 MiB), p5 eks 26.1 -> 43.6 % (NVLS-tree at 64 MiB faster on the faster
// step), while p5 slurm's went from 19.2 to 15.1 %. One small-row bound was raised by the change
// that pays NVLS's last loop after its reduction inside a node (nvls.cpp loop_bytes, as NCCL
// chunks NVLS): on the DGX H100 node the tuner's view now runs the ring with LL at 512 KiB, where
// it ran NVLS, and NVLS at 1 MiB is slower (8 KiB-1 MiB 10.7 -> 12.0 %), while its 64 MiB-16 GiB
// rows went from 6.6 to 3.7 % (the held-out issue290 NVLS node 8.1 -> 5.7 %). Five large-row
// bounds were lowered and one small-row bound raised by NVLS-tree's switch share
// (links.json protocols.nvls_tree.switch_share, 0.925): issue309's two nodes 6.4 -> 1.4 %, four
// nodes 3.0 -> 2.8 %, p5 slurm 15.1 -> 13.0 %, p5 eks 43.6 -> 42.5 %, GTC'24's 128 GPUs 6.8 ->
// 6.4 %, whose one 1 MiB row went from 0.3 to 0.6 % (the pipeline's fill, paced by the switch).
// One large-row bound was raised by GPUs sharing a NIC in the closed forms as in the flows
// (GroupShape::nic_of_member): the tuner's view now runs p4de's tree with LL128 at 64-128 MiB,
// where it ran Simple, 8.5 -> 9.5 %. Two large-row bounds were raised by the change that keeps
// NCCL_STEPS loops of NVLS-tree in flight, as NCCL's primitives do for it as for the tree
// (nvls_tree.cpp pipeline_slots): a loop's step latency no longer adds to every loop, which on
// EFA (31.1 us a step) held p5's NVLS-tree at 279 GB/s from 256 MiB to 1 GiB. The p5 log of
// NCCL 2.18.5 on EKS, which measures 126-313 GB/s there where the later Slurm log measures
// 209-437, went from 42.5 to 77.7 % and issue309's four nodes from 2.8 to 3.0 %, while p5 slurm
// went from 13.0 to 6.2 % and GTC'24's 32 and 128 GPUs from 5.3 and 6.4 % to 4.7 and 6.2 %.
// One small-row bound was raised by the aws-p4d and aws-p4de presets' NCCL_PROTO=Simple, which
// the aws-ofi-nccl plugin sets on those instances (platform.nccl_env), with first-generation
// EFA's step refitted for it on p4de's small rows (83.9 -> 65.3 us): p4de 9.5 -> 4.0 % (>= 64
// MiB) and 7.8 -> 9.4 % (8 KiB-1 MiB); the held-out p4d run of NCCL 2.23 10.8 -> 4.4 % and
// 15.5 -> 17.6 %.
struct Bound {
  double large, small;
};
const std::map<std::string, Bound>& bounds()
{
  static const std::map<std::string, Bound> b = {
      {"echo_azure_ndv4_a100_allreduce_2gpu", {20.4, 159.8}},
      {"echo_azure_ndv4_a100_allreduce_4gpu", {6.7, 60.7}},
      {"echo_azure_ndv4_a100_allreduce_16gpu", {42.1, 21.2}},
      {"echo_azure_ndv4_a100_allreduce_32gpu", {38.2, 18.1}},
      {"aws_p5_2node_h100_allreduce_eks_nccl2.18.5", {77.7, -1}},
      {"aws_p4de_2node_a100_allreduce_slurm", {4.0, 9.4}},
      {"aws_p5_2node_h100_allreduce_slurm", {6.2, 11.3}},
      {"oci_bm_gpu4_8_a100_1node_allreduce_10GiB", {0.4, -1}},
      {"oci_bm_gpu4_8_a100_2node_roce_allreduce_10GiB", {10.0, -1}},
      {"azure_aibench_nd_a100_v4_1node_allreduce", {8.2, 9.9}},
      {"nvidia_dgxc_dgxh100_1node_allreduce", {3.7, 12.0}},
      {"astrasim_hgx_h100_2gpu_ring_allreduce_digitized", {3.1, -1}},
      {"astrasim_hgx_h100_4gpu_ring_allreduce_digitized", {5.0, -1}},
      {"astrasim_hgx_h100_8gpu_ring_allreduce_digitized", {5.7, -1}},
      {"astrasim_hpe_gen10_v100_2gpu_ring_allreduce_digitized", {1.3, -1}},
      {"astrasim_hpe_gen10_v100_4gpu_ring_allreduce_digitized", {4.7, -1}},
      {"astrasim_hpe_gen10_v100_8gpu_ring_allreduce_digitized", {0.9, -1}},
      {"issue309_qoofyk_2node_default_h100_ib400_allreduce", {1.4, 16.5}},
      {"issue309_qoofyk_4node_default_h100_ib400_allreduce", {3.0, 28.1}},
      {"mleng_h200_1node_8gpu_allreduce_8GiB_default", {1.1, -1}},
      {"mleng_h200_1node_8gpu_allreduce_8GiB_nvls_off", {4.2, -1}},
      {"mleng_h200_1node_8gpu_all_gather_16GiB_ring", {3.0, -1}},
      {"mleng_h200_1node_8gpu_reduce_scatter_16GiB_ring", {3.4, -1}},
      {"gtc24_nvlstree_scaling_32gpu_allreduce_digitized", {4.7, 4.8}},
      {"gtc24_nvlstree_scaling_128gpu_allreduce_digitized", {6.2, 0.6}},
      {"coreweave_a100_32gpu_sharp_allreduce", {1.6, -1}},
      {"autodl_2x2080ti_pcie3_noP2P_all_reduce", {2.7, 10.4}},
      {"autodl_2x2080ti_pcie3_noP2P_all_gather", {17.5, 18.3}},
      {"autodl_2x2080ti_pcie3_noP2P_alltoall", {12.5, 9.7}},
      // AMD Instinct nodes on their xGMI mesh (links.json xgmi, fitted on these rows >= 64 MiB); the
      // small rows run RCCL's MSCCL all-pairs programs (links.json msccl, fitted on them).
      {"amd_aac8_mi300x_1node_allreduce", {0.4, 5.6}},
      {"amd_aac11_mi325x_1node_allreduce_ring", {0.3, -1}},
  };
  return b;
}

// Bounds are today's MAPE plus this many percentage points.
constexpr double kMarginPoints = 3;

} // namespace

TEST_CASE("published nccl-tests cases: bus bandwidth error per case and family within today's bounds",
          "[nccl_published]")
{
  // The 512- and 2048-GPU cases take minutes: `stepsim collective --compare` runs them.
  const Comparison c = compare_published(config_dir() + "/calibration/nccl_tests_published.json", false, "", 128);
  std::cout << comparison_table(c) << std::flush;
  int run = 0;
  for (const auto& k : c.cases) {
    INFO(k.name << (k.not_modelled.empty() ? "" : ": not modelled: " + k.not_modelled));
    if (!k.not_modelled.empty()) {
      // Only a case too large for a unit test may leave a case out: every machine is described.
      const bool allowed = k.not_modelled.find("not run here") != std::string::npos;
      CHECK(allowed);
      continue;
    }
    ++run;
    const auto it = bounds().find(k.name);
    REQUIRE(it != bounds().end()); // a case that runs has a bound; add it from the printed table
    for (auto [family, bound] : {std::pair{&k.large, it->second.large}, std::pair{&k.small, it->second.small}}) {
      if (bound < 0) {
        CHECK(family->rows == 0);
        continue;
      }
      REQUIRE(family->rows > 0);
      CHECK(100 * family->mape <= bound + kMarginPoints);
    }
  }
  // Every case but those waiting for an algorithm runs.
  CHECK(run >= 28);
  // Over every row run: today 12.6 % (>= 64 MiB, 145 rows) and 32.6 % (8 KiB-1 MiB, 106 rows).
  CHECK(100 * c.large.mape <= 12.6 + kMarginPoints);
  CHECK(100 * c.small.mape <= 32.6 + kMarginPoints);
}

// The logs that no figure was fitted on (configs/calibration/nccl_tests_heldout.json): the
// prediction's error, printed, and the Echo authors' single node held to today's figure plus the
// margin. The cases over 8 GPUs take minutes and are left to `stepsim collective --compare`.
TEST_CASE("held-out nccl-tests logs: the single-process 8-GPU node within today's bound", "[nccl_published]")
{
  const Comparison c = compare_published(config_dir() + "/calibration/nccl_tests_heldout.json", false, "", 8);
  std::cout << comparison_table(c) << std::flush;
  REQUIRE(c.cases.size() == 34); // the Echo logs first, then those collected from public pages
  const auto& node = c.cases.front();
  REQUIRE(node.name == "echo_azure_ndv4_a100_allreduce_8gpu");
  REQUIRE(node.not_modelled.empty());
  CHECK(node.gpus_per_thread == 8);
  // Today 1.6 % (>= 64 MiB) and 28.6 % (8 KiB-1 MiB; 44.1 % timed as if one process drove each GPU).
  CHECK(100 * node.large.mape <= 1.6 + kMarginPoints);
  CHECK(100 * node.small.mape <= 28.6 + kMarginPoints);
}

// nccl-tests on N nodes runs the same number of ranks on each: a case of 2 nodes and 2 GPUs is
// one GPU per node across the NICs, not two GPUs of the first node over its NVSwitch.
TEST_CASE("a published case's GPUs are spread evenly over its nodes", "[nccl_published]")
{
  auto one_case = [](int nodes, int gpus) {
    return fmt::format(R"({{"cases": [{{"name": "two_nodes", "preset": "dgx-h100", "nodes": {}, "gpus": {},
        "op": "all_reduce", "algorithm": "ring", "rows": [{{"bytes": 1073741824, "time_us": 25000}}]}}]}})",
                       nodes, gpus);
  };
  const Comparison across = compare_published(testing::write_temp_file("spread.json", one_case(2, 2)), false, "", 8);
  REQUIRE(across.cases.size() == 1);
  REQUIRE(across.cases.front().rows.size() == 1);
  // One 400 Gb/s NIC each way: about 46 GB/s, never the NVSwitch's hundreds.
  const double busbw = across.cases.front().rows.front().predicted_GBps;
  CHECK(busbw > 30);
  CHECK(busbw < 60);
  CHECK_THROWS_WITH(compare_published(testing::write_temp_file("uneven.json", one_case(2, 3)), false, "", 8),
                    Catch::Contains("cases[0].gpus") && Catch::Contains("multiple of the case's 2 nodes"));
}

// A machine that is a preset but for its NICs: the case's "set" changes the preset's platform
// fields, as `stepsim collective --preset NAME --set path=value` does.
TEST_CASE("a published case describes a machine that differs from its preset with \"set\"", "[nccl_published]")
{
  auto one_case = [](const std::string& set) {
    return fmt::format(R"({{"cases": [{{"name": "half_the_nics", "preset": "dgx-h100", "nodes": 2, "gpus": 16,
        "op": "all_reduce", "algorithm": "ring", {} "rows": [{{"bytes": 1073741824, "time_us": 25000}}]}}]}})",
                       set);
  };
  auto busbw = [&](const std::string& set) {
    const Comparison c = compare_published(testing::write_temp_file("set.json", one_case(set)), false, "", 16);
    REQUIRE(c.cases.size() == 1);
    REQUIRE(c.cases.front().rows.size() == 1);
    return c.cases.front().rows.front().predicted_GBps;
  };
  // A ring across nodes is bound by the node's NICs: 4 of them instead of 8, half the bandwidth.
  const double eight = busbw("");
  const double four  = busbw(R"("set": {"platform.node_groups.0.nic.count": 4},)");
  CHECK(four == Approx(eight / 2).epsilon(0.1));
  const Comparison c = compare_published(
      testing::write_temp_file("set.json", one_case(R"("set": {"platform.node_groups.0.nic.count": 4},)")), false, "", 16);
  CHECK(c.cases.front().sets == std::vector<std::string>{"platform.node_groups.0.nic.count=4"});
  CHECK(comparison_table(c).find("dgx-h100 +") != std::string::npos);
  CHECK(comparison_json(c)["cases"][0]["set"][0] == "platform.node_groups.0.nic.count=4");

  // What cannot be set is refused with the case's path.
  CHECK_THROWS_WITH(compare_published(testing::write_temp_file("set.json", one_case(R"("set": {"model.num_layers": 2},)")),
                                      false, "", 16),
                    Catch::Contains("cases[0].set: --set model.num_layers=2: with --preset or --platform, expected a "
                                    "platform.* or simulation.* field"));
  CHECK_THROWS_WITH(compare_published(testing::write_temp_file("set.json", one_case(R"("set": [1],)")), false, "", 16),
                    Catch::Contains("cases[0].set: expected an object of platform fields"));
  CHECK_THROWS_WITH(compare_published(testing::write_temp_file(
                                          "set.json", one_case(R"("set": {"platform.node_groups.0.nic.count": "many"},)")),
                                      false, "", 16),
                    Catch::Contains("cases[0].set: platform.node_groups[0].nic.count"));

  // The command line: --set with --preset, and a field of the model refused.
  const auto half = testing::run_stepsim("collective --preset dgx-h100 --nodes 2 --stride --sizes 1GiB --json - --set "
                                         "platform.node_groups.0.nic.bandwidth=200Gbps");
  REQUIRE(half.exit_code == 0);
  const auto full = testing::run_stepsim("collective --preset dgx-h100 --nodes 2 --stride --sizes 1GiB --json -");
  REQUIRE(full.exit_code == 0);
  const double t_half = nlohmann::json::parse(half.output)["rows"][0]["time_us"].get<double>();
  const double t_full = nlohmann::json::parse(full.output)["rows"][0]["time_us"].get<double>();
  CHECK(t_half == Approx(2 * t_full).epsilon(0.1));
  const auto refused = testing::run_stepsim("collective --preset dgx-h100 --set parallelism.data=4");
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("--set parallelism.data=4: with --preset or --platform, expected a platform.* or "
                            "simulation.* field") != std::string::npos);
}
