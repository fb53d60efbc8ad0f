// The shipped default scenario runs end to end and gives a sane, deterministic report.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace stepsim;

TEST_CASE("default scenario: a sane report, byte-identical across runs")
{
  std::string scenario = std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/default.json";
  std::string a        = testing::write_temp_file("a.json", "");
  std::string b        = testing::write_temp_file("b.json", "");
  REQUIRE(testing::run_stepsim("run " + scenario + " --quiet --json " + a).exit_code == 0);
  REQUIRE(testing::run_stepsim("run " + scenario + " --quiet --json " + b).exit_code == 0);
  std::string first = testing::read_text_file(a);
  CHECK(first == testing::read_text_file(b));
  auto r = nlohmann::json::parse(first);
  CHECK(r["gpus"] == 1024);
  CHECK(r["stages"].size() == 16);
  // GPT-3 175B trains at a few tens of seconds per 1,536-sample step on 1,024 A100s.
  CHECK(r["step_time_s"].get<double>() > 10);
  CHECK(r["step_time_s"].get<double>() < 60);
  CHECK(r["mfu"].get<double>() > 0.2);
  CHECK(r["mfu"].get<double>() < 0.7);
  CHECK(r["fits_in_memory"] == true);
  for (const auto& st : r["stages"]) {
    CHECK(st["bubble_fraction"].get<double>() >= st["textbook_bubble_fraction"].get<double>() * 0.9);
    CHECK(st["compute_s"].get<double>() > 0);
  }
}
