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
  double busy_gpu_seconds = 0;
  for (const auto& st : r["stages"]) {
    CHECK(st["bubble_fraction"].get<double>() >= st["textbook_bubble_fraction"].get<double>() * 0.9);
    CHECK(st["compute_s"].get<double>() > 0);
    busy_gpu_seconds += 64 * st["compute_s"].get<double>(); // 64 GPUs per stage
  }
  // Energy: 400 W (A100 SXM TDP) while computing, 55 W idle otherwise, over 1,024 GPUs.
  const double step = r["step_time_s"].get<double>();
  const double expected = busy_gpu_seconds * 400 + (1024 * step - busy_gpu_seconds) * 55;
  CHECK(r["energy_j_per_step"].get<double>() == Approx(expected).epsilon(1e-6));
  CHECK(r["energy_j_per_token"].get<double>() * r["tokens_per_s"].get<double>() * step ==
        Approx(expected).epsilon(1e-6));
}
