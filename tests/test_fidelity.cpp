// Reduced fidelity (one representative rank per stage) against the full replay of every rank, on
// scenarios small enough to run in full.
#include "support.hpp"

#include "sim/simulate.hpp"

#include <catch2/catch.hpp>

using namespace stepsim;

TEST_CASE("reduced fidelity gives the full replay's step time, bubbles and overlap")
{
  auto [tensor, pipeline, data, schedule] = GENERATE(table<int, int, int, std::string>(
      {{2, 2, 2, "1f1b"}, {4, 2, 2, "gpipe"}, {2, 4, 2, "1f1b"}, {1, 2, 4, "zb_h1"}}));
  nlohmann::json doc = testing::small_scenario(pipeline, data, 8);
  doc["parallelism"]["tensor"]   = tensor;
  doc["parallelism"]["schedule"] = schedule;
  auto& group                    = doc["platform"]["node_groups"][0];
  group["count"]                 = pipeline * data;
  group["gpus_per_node"]         = tensor;
  group["intra_node"]["latency"] = "1us";
  group["nic"]                   = {{"count", tensor}, {"bandwidth", "100Gbps"}, {"latency", "2us"}};
  doc["simulation"]["fidelity"]  = "full";
  Report full                    = simulate_isolated(scenario_from_json(doc));
  doc["simulation"]["fidelity"]  = "reduced";
  Report reduced                 = simulate_isolated(scenario_from_json(doc));
  INFO("t=" << tensor << " p=" << pipeline << " d=" << data << " " << schedule);
  REQUIRE(full.simulated_ranks == tensor * pipeline * data);
  REQUIRE(reduced.simulated_ranks == pipeline);
  CHECK(reduced.step_time_s == Approx(full.step_time_s).epsilon(0.01));
  CHECK(reduced.bubble_fraction == Approx(full.bubble_fraction).epsilon(0.01));
  CHECK(reduced.overlap == Approx(full.overlap).epsilon(0.01).margin(0.01));
  CHECK(reduced.exposed_comm_s == Approx(full.exposed_comm_s).epsilon(0.01));
}

TEST_CASE("reduced fidelity holds when collectives share links and are not timed by their closed form")
{
  // Tensor pairs and their data-parallel peers share each node's NVSwitch ports, so tensor-parallel
  // all-reduces contend with gradient all-reduces: the replay moves them as flows (a lone
  // simulated member as one coalesced transfer), not by the closed form.
  auto [schedule, recompute] = GENERATE(table<std::string, std::string>({{"1f1b", "none"}, {"gpipe", "full"}}));
  nlohmann::json doc = testing::small_scenario(2, 2, 8);
  doc["parallelism"]["tensor"]          = 2;
  doc["parallelism"]["schedule"]        = schedule;
  doc["training"]["recompute"]          = recompute;
  doc["parallelism"]["bucket_size"]     = "4MB";
  auto& group                           = doc["platform"]["node_groups"][0];
  group["count"]                        = 2;
  group["gpus_per_node"]                = 4;
  group["intra_node"]                   = {{"type", "nvswitch"}, {"bandwidth", "50GBps"}, {"latency", "1us"}};
  group["nic"]                          = {{"count", 4}, {"bandwidth", "100Gbps"}, {"latency", "2us"}};
  doc["simulation"]["fidelity"]         = "full";
  Report full                           = simulate_isolated(scenario_from_json(doc));
  doc["simulation"]["fidelity"]         = "reduced";
  Report reduced                        = simulate_isolated(scenario_from_json(doc));
  INFO(schedule << " " << recompute);
  REQUIRE(full.simulated_ranks == 8);
  REQUIRE(reduced.simulated_ranks == 2);
  CHECK(reduced.step_time_s == Approx(full.step_time_s).epsilon(0.01));
  CHECK(reduced.bubble_fraction == Approx(full.bubble_fraction).epsilon(0.01).margin(0.005));
  CHECK(reduced.overlap == Approx(full.overlap).epsilon(0.01).margin(0.01));
  CHECK(reduced.exposed_comm_s == Approx(full.exposed_comm_s).epsilon(0.01));
}

TEST_CASE("reduced fidelity times a lone member of a group over two nodes by the group's slowest hop",
          "[fidelity][moe]")
{
  // Tensor 2 on 4-GPU nodes: the expert group {0, 2, 4, 6} (data 4, expert 4) spans two nodes;
  // rank 0's own hops in its all-to-all and gradient rings start inside its node, but every step
  // of the group also crosses the NIC. The gradient buckets share those links, so the replay moves
  // the collectives as flows rather than by their closed form. With 100 Gb/s NICs behind PCIe
  // links that carry twice as much, NCCL's tuner takes the tree on two nodes (protocol.cpp,
  // tree_graph_factor); the ring is asked for first, then the tree.
  nlohmann::json doc = testing::small_scenario(1, 4, 4);
  doc["model"]["num_experts"]             = 8;
  doc["model"]["moe_top_k"]               = 2;
  doc["parallelism"]["tensor"]            = 2;
  doc["parallelism"]["expert"]            = 4;
  doc["parallelism"]["sequence_parallel"] = true;
  doc["parallelism"]["bucket_size"]       = "4MB";
  auto& group                             = doc["platform"]["node_groups"][0];
  group["count"]                          = 2;
  group["gpus_per_node"]                  = 4;
  group["intra_node"]                     = {{"type", "nvswitch"}, {"bandwidth", "300GBps"}, {"latency", "1us"}};
  group["nic"]                            = {{"count", 4}, {"bandwidth", "100Gbps"}, {"latency", "2us"}};
  doc["simulation"]["collective_algorithm"] = "ring";
  auto run = [&doc](const char* fidelity) {
    doc["simulation"]["fidelity"] = fidelity;
    return simulate_isolated(scenario_from_json(doc));
  };
  {
    const Report full    = run("full");
    const Report reduced = run("reduced");
    REQUIRE(full.simulated_ranks == 8);
    REQUIRE(reduced.simulated_ranks == 1);
    CAPTURE(full.step_time_s, reduced.step_time_s);
    CHECK(reduced.step_time_s == Approx(full.step_time_s).epsilon(0.02));
    CHECK(reduced.exposed_comm_s == Approx(full.exposed_comm_s).epsilon(0.02));
  }
  // A tree's member sends at each step over the hop it has there: a chain inside its node or the
  // NIC. The lone member stands for its group at every step on that step's slowest hop, the NIC,
  // so the pipeline's fill through the chains costs NIC time: reduced fidelity is slower than
  // full by that (README, Shared links under reduced fidelity), never faster.
  doc["simulation"]["collective_algorithm"] = "auto";
  const Report full    = run("full");
  const Report reduced = run("reduced");
  CAPTURE(full.step_time_s, reduced.step_time_s, full.exposed_comm_s, reduced.exposed_comm_s);
  CHECK(full.collective_algorithms.at("all_reduce").find("tree") != std::string::npos);
  CHECK(reduced.step_time_s >= full.step_time_s * 0.99);
  CHECK(reduced.step_time_s <= full.step_time_s * 1.08);
}
