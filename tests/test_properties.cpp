// Property tests over generated scenarios (issue 23): what must hold for any valid input, not
// only for the shipped ones. Each case comes from a seed (tests/scenario_generator.hpp); a failure
// prints it, and `STEPSIM_PROPERTY_SEED=N` replays the same cases under another base seed.
//
// Through the real `stepsim run --json`, as a user runs it:
// - valid scenarios give finite, positive figures with MFU and HFU at most 1, the same bytes
//   twice over;
// - more bandwidth never slows a step, a faster GPU never slows a step, and more micro-batches of
//   the same size never raise a 1F1B or GPipe pipeline's bubble fraction;
// - a mutated scenario exits 0 or 2, never 1, another code or a signal.
#include "scenario_generator.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>

using namespace stepsim::testing;

namespace {

// A relative slack for "never slower": the report prints 9 significant digits.
constexpr double kSlack = 1e-8;

struct Run {
  int exit_code = 0;
  std::string output;     // stdout and stderr
  std::string json_text;  // the --json report, byte for byte
  nlohmann::json report;
};

Run run_scenario(const nlohmann::json& scenario, const std::string& tag)
{
  const std::string input  = write_temp_file("property-" + tag + ".json", scenario.dump(2));
  const std::string output = input + ".report.json";
  std::remove(output.c_str());
  auto result = run_stepsim(fmt::format("run '{}' --json '{}'", input, output));
  Run run{result.exit_code, result.output, {}, {}};
  if (run.exit_code == 0) {
    run.json_text = read_text_file(output);
    run.report    = nlohmann::json::parse(run.json_text);
  }
  return run;
}

// What a failure prints: the case's seed and how to rerun the same cases.
std::string replay(uint64_t seed)
{
  return fmt::format("case seed {} (rerun with STEPSIM_PROPERTY_SEED={})", seed, property_base_seed());
}

double number(const Run& run, const char* key)
{
  return run.report.at(key).get<double>();
}

// Runs the scenario of case `index`, requiring it to succeed: the generator makes only valid ones.
Run valid_run(const nlohmann::json& scenario, uint64_t seed, const std::string& tag)
{
  Run run = run_scenario(scenario, tag);
  INFO(replay(seed) << "\n" << scenario.dump(2) << "\n" << run.output);
  REQUIRE(run.exit_code == 0);
  return run;
}

} // namespace

TEST_CASE("Generated scenarios give finite, sane and deterministic figures", "[properties]")
{
  for (int i = 0; i < 64; ++i) {
    const uint64_t seed = property_seed(i);
    const auto scenario = random_scenario(seed);
    const Run run       = valid_run(scenario, seed, "sane");
    INFO(replay(seed) << "\n" << scenario.dump(2) << "\n" << run.json_text);
    for (const char* key : {"step_time_s", "tokens_per_s", "samples_per_s", "model_tflops_per_gpu",
                            "hardware_tflops_per_gpu", "mfu", "hfu"}) {
      CAPTURE(key);
      CHECK(std::isfinite(number(run, key)));
      CHECK(number(run, key) > 0);
    }
    CHECK(number(run, "mfu") <= 1.0);
    CHECK(number(run, "hfu") <= 1.0);
    CHECK(number(run, "mfu") <= number(run, "hfu") * (1 + kSlack));
    CHECK(number(run, "bubble_fraction") >= 0);
    CHECK(number(run, "bubble_fraction") < 1);
    CHECK(number(run, "memory_peak_bytes") > 0);
    if (i % 8 == 0) {
      const Run again = run_scenario(scenario, "again");
      CHECK(again.json_text == run.json_text);
    }
  }
}

TEST_CASE("More bandwidth never slows a generated step", "[properties]")
{
  for (int i = 100; i < 140; ++i) {
    const uint64_t seed = property_seed(i);
    auto scenario       = random_scenario(seed);
    const Run slow      = valid_run(scenario, seed, "bandwidth");
    auto& group         = scenario["platform"]["node_groups"][0];
    group["intra_node"]["bandwidth"] = "900GBps";
    group["nic"]["bandwidth"]        = "800Gbps";
    const Run fast = valid_run(scenario, seed, "bandwidth-fast");
    INFO(replay(seed) << "\n" << scenario.dump(2));
    CHECK(number(fast, "step_time_s") <= number(slow, "step_time_s") * (1 + kSlack));
  }
}

TEST_CASE("A faster GPU never slows a generated step", "[properties]")
{
  for (int i = 200; i < 240; ++i) {
    const uint64_t seed = property_seed(i);
    auto scenario       = random_scenario(seed);
    // A100 80GB → H100 SXM: every peak and the memory bandwidth higher, the same capacity.
    scenario["platform"]["node_groups"][0]["gpu"] = "A100-SXM4-80GB";
    const Run a100 = valid_run(scenario, seed, "a100");
    scenario["platform"]["node_groups"][0]["gpu"] = "H100-SXM";
    const Run h100 = valid_run(scenario, seed, "h100");
    INFO(replay(seed) << "\n" << scenario.dump(2));
    CHECK(number(h100, "step_time_s") <= number(a100, "step_time_s") * (1 + kSlack));
  }
}

// The bubble the schedule adds, its fill and drain, shrinks as micro-batches are added: on a
// pipeline of equal stages that is all the idle time there is. (Where stages differ, the faster
// ones also wait on the slowest each micro-batch, a share that grows towards its limit as the
// micro-batches outweigh the step's fixed part; the report's bubble counts that too, by its
// definition in the README, so it may rise there. The slowest stage waits only for the fill and
// drain, so its bubble never rises.)
TEST_CASE("More micro-batches of one size never raise a 1F1B or GPipe bubble", "[properties]")
{
  for (int i = 300; i < 330; ++i) {
    const uint64_t seed = property_seed(i);
    auto scenario       = random_balanced_pipeline(seed);
    const Run fewer     = valid_run(scenario, seed, "micro");
    scenario["training"]["global_batch_size"] = 2 * scenario["training"]["global_batch_size"].get<int>();
    const Run more = valid_run(scenario, seed, "micro-more");
    INFO(replay(seed) << "\n" << scenario.dump(2));
    CHECK(number(more, "bubble_fraction") <= number(fewer, "bubble_fraction") + kSlack);
  }
}

TEST_CASE("More micro-batches never raise the slowest pipeline stage's bubble", "[properties]")
{
  // The stage that idles least is the slowest one.
  const auto slowest_bubble = [](const Run& run) {
    double least = 1;
    for (const auto& stage : run.report.at("stages"))
      least = std::min(least, stage.at("bubble_fraction").get<double>());
    return least;
  };
  int pipelined = 0;
  for (int i = 330; pipelined < 20 && i < 430; ++i) {
    const uint64_t seed = property_seed(i);
    auto scenario       = random_scenario(seed);
    if (scenario["parallelism"]["pipeline"].get<int>() < 2)
      continue;
    ++pipelined;
    const Run fewer = valid_run(scenario, seed, "slowest");
    scenario["training"]["global_batch_size"] = 2 * scenario["training"]["global_batch_size"].get<int>();
    const Run more = valid_run(scenario, seed, "slowest-more");
    INFO(replay(seed) << "\n" << scenario.dump(2));
    CHECK(slowest_bubble(more) <= slowest_bubble(fewer) + kSlack);
  }
  CHECK(pipelined == 20);
}

TEST_CASE("Mutated scenarios exit 0 or 2, never another code or a signal", "[properties]")
{
  for (int i = 400; i < 700; ++i) {
    const uint64_t seed = property_seed(i);
    std::string what;
    const auto scenario = mutate(random_scenario(seed), seed, &what);
    const Run run       = run_scenario(scenario, "mutated");
    INFO(replay(seed) << ": " << what << "\n" << run.output);
    CHECK((run.exit_code == 0 || run.exit_code == 2));
    if (run.exit_code == 2)
      CHECK(run.output.find("json.exception") == std::string::npos);
  }
}
