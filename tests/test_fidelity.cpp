// Reduced fidelity (one representative rank per stage) against the full replay of every rank, on
// scenarios small enough to run in full.
#include "support.hpp"

#include "tools/driver/simulate.hpp"

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
