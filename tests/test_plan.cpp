// The planner: what it prints divides, fits and is simulated; its pruning (simulating only the
// best-estimated candidates) finds what simulating every valid candidate finds.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace stepsim;
using testing::run_stepsim;
using testing::write_temp_file;

namespace {

nlohmann::json planning_scenario()
{
  nlohmann::json doc = testing::small_scenario(1, 1, 64);
  doc["model"]["num_layers"]                          = 8;
  doc["training"]["global_batch_size"]                = 64;
  doc["platform"]["node_groups"][0]["count"]          = 2;
  doc["platform"]["node_groups"][0]["gpus_per_node"]  = 8;
  doc["platform"]["node_groups"][0]["intra_node"]     = {{"type", "nvswitch"}, {"bandwidth", "300GBps"}, {"latency", "1us"}};
  doc["platform"]["node_groups"][0]["nic"]            = {{"count", 8}, {"bandwidth", "100Gbps"}, {"latency", "2us"}};
  return doc;
}

nlohmann::json read_json(const std::string& file)
{
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

} // namespace

TEST_CASE("plan: the pruned search finds a configuration within 5% of the exhaustive best", "[plan]")
{
  std::string file = write_temp_file("plan.json", planning_scenario().dump());
  std::string all = file + ".all.json", pruned = file + ".pruned.json";
  auto exhaustive = run_stepsim("plan " + file + " --simulate 0 --top 1000 -j 2 -q --json " + all);
  INFO(exhaustive.output);
  REQUIRE(exhaustive.exit_code == 0);
  auto quick = run_stepsim("plan " + file + " --simulate 8 --top 5 -j 2 -q --json " + pruned);
  INFO(quick.output);
  REQUIRE(quick.exit_code == 0);

  nlohmann::json every = read_json(all), top = read_json(pruned);
  REQUIRE(every.size() > 20); // many valid configurations
  REQUIRE(top.size() == 5);
  double best = 0;
  for (const auto& c : every) {
    best = std::max(best, c["report"]["tokens_per_s"].get<double>());
    const auto& s = c["settings"];
    CHECK(s["parallelism.tensor"].get<int>() * s["parallelism.pipeline"].get<int>() * s["parallelism.data"].get<int>() ==
          16);
    CHECK(c["report"]["fits_in_memory"].get<bool>());
  }
  double best_of_top = 0;
  for (const auto& c : top)
    best_of_top = std::max(best_of_top, c["report"]["tokens_per_s"].get<double>());
  CHECK(best_of_top >= 0.95 * best);
  // Ranked by predicted throughput.
  for (size_t i = 1; i < every.size(); ++i)
    CHECK(every[i - 1]["report"]["tokens_per_s"].get<double>() >= every[i]["report"]["tokens_per_s"].get<double>());
}

TEST_CASE("plan refuses a GPU count that is not whole nodes", "[plan]")
{
  std::string file = write_temp_file("plan-bad.json", planning_scenario().dump());
  auto result      = run_stepsim("plan " + file + " --gpus 12");
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("--gpus 12: not a whole number of 8-GPU nodes") != std::string::npos);
}
