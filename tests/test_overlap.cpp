// Data parallelism with gradient buckets: all-reduces that run beside backward compute are
// partly hidden; with nothing to overlap with, all of it is exposed.
#include "support.hpp"

#include "sim/simulate.hpp"

#include <catch2/catch.hpp>

using namespace stepsim;

namespace {
nlohmann::json data_parallel_scenario(bool overlap)
{
  nlohmann::json doc = testing::small_scenario(1, 4, 2);
  // A network slow enough for the all-reduce to matter, fast enough for backward to cover it.
  doc["platform"]["node_groups"][0]["nic"]["bandwidth"] = "200Gbps";
  doc["platform"]["node_groups"][0]["nic"]["latency"]   = "2us";
  doc["parallelism"]["bucket_size"]                    = "10MB";
  doc["model"]["num_layers"]                           = 16; // layer gradients outweigh the embedding
  doc["parallelism"]["overlap_grad_reduce"]            = overlap;
  return doc;
}
} // namespace

TEST_CASE("bucketed gradient all-reduce overlaps with backward")
{
  Report r = simulate_isolated(scenario_from_json(data_parallel_scenario(true)));
  REQUIRE(r.comm_s > 0);
  CHECK(r.exposed_comm_s < r.comm_s);
  CHECK(r.overlap > 0.2);
}

TEST_CASE("with nothing to overlap with, all communication is exposed")
{
  Report r = simulate_isolated(scenario_from_json(data_parallel_scenario(false)));
  REQUIRE(r.comm_s > 0);
  CHECK(r.exposed_comm_s == Approx(r.comm_s).epsilon(1e-9));
  CHECK(r.overlap == Approx(0.0).margin(1e-9));
}

TEST_CASE("exposed communication grows when the network gets slower")
{
  nlohmann::json fast = data_parallel_scenario(true);
  nlohmann::json slow = fast;
  slow["platform"]["node_groups"][0]["nic"]["bandwidth"] = "25Gbps";
  Report a = simulate_isolated(scenario_from_json(fast));
  Report b = simulate_isolated(scenario_from_json(slow));
  CHECK(b.exposed_comm_s > a.exposed_comm_s);
  CHECK(b.step_time_s > a.step_time_s);
}
