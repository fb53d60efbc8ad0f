// `stepsim check`: the regression gate over a baseline of scenarios and their expected throughput.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace stepsim;

namespace {


// A small scenario next to a baseline that names it by a relative path.
std::string write_baseline(const std::string& tag, const nlohmann::json& entries, double tolerance = 0.02)
{
  testing::write_temp_file(tag + "-small.json", testing::small_scenario(2, 1, 4).dump());
  nlohmann::json baseline = {{"tolerance", tolerance}, {"scenarios", entries}};
  return testing::write_temp_file(tag + "-baseline.json", baseline.dump(2));
}

double predicted_tokens_per_s(const std::string& scenario, const std::string& sets)
{
  std::string out = testing::write_temp_file("predicted.json", "");
  auto r          = testing::run_stepsim("run " + scenario + " -q " + sets + " --json " + out);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(testing::read_text_file(out))["tokens_per_s"].get<double>();
}

} // namespace

TEST_CASE("check passes on a baseline written by --update, and --update is deterministic", "[check]")
{
  std::string file = write_baseline("update", {{{"scenario", "update-small.json"}}});
  auto updated     = testing::run_stepsim("check " + file + " --update");
  INFO(updated.output);
  REQUIRE(updated.exit_code == 0);
  std::string first = testing::read_text_file(file);
  auto baseline     = nlohmann::json::parse(first);
  CHECK(baseline["scenarios"][0]["expected_tokens_per_s"].get<double>() > 0);
  CHECK(baseline["scenarios"][0]["scenario"] == "update-small.json");

  auto checked = testing::run_stepsim("check " + file);
  INFO(checked.output);
  CHECK(checked.exit_code == 0);
  CHECK(checked.output.find("update-small.json") != std::string::npos);
  CHECK(checked.output.find(" ok") != std::string::npos);

  REQUIRE(testing::run_stepsim("check " + file + " --update").exit_code == 0);
  CHECK(testing::read_text_file(file) == first);
}

// The baseline is recorded with the roofline compute model; then the shape-aware kernel model is
// swapped in for every entry. For this small GPT (hidden 1,024, one sample of 1,024 tokens per
// micro-batch) the kernel model is much slower: its GEMMs run in partial waves over the SMs and
// every one of its hundreds of kernels pays a launch overhead, which the roofline ignores. The
// test first measures that the swapped-in model really predicts lower throughput.
TEST_CASE("check fails when a slower cost model is swapped in", "[check]")
{
  std::string file = write_baseline(
      "slower", {{{"scenario", "slower-small.json"}, {"set", {{"simulation.compute_model", "roofline"}}}}});
  REQUIRE(testing::run_stepsim("check " + file + " --update").exit_code == 0);

  std::string scenario = std::filesystem::path(file).parent_path() / "slower-small.json";
  double roofline      = predicted_tokens_per_s(scenario, "--set simulation.compute_model=roofline");
  double kernel        = predicted_tokens_per_s(scenario, "--set simulation.compute_model=kernel");
  REQUIRE(kernel < roofline * 0.98);

  auto r = testing::run_stepsim("check " + file + " --set simulation.compute_model=kernel");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("REGRESSED") != std::string::npos);
  CHECK(r.output.find("1 of 1 scenarios regressed") != std::string::npos);
}

TEST_CASE("a prediction faster beyond the tolerance is flagged but passes", "[check]")
{
  std::string file = write_baseline("faster", {{{"scenario", "faster-small.json"}}});
  REQUIRE(testing::run_stepsim("check " + file + " --update").exit_code == 0);
  auto r = testing::run_stepsim("check " + file + " --set simulation.compute_model=roofline");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("changed (faster") != std::string::npos);
}

TEST_CASE("the tolerance decides: per entry over the file's default", "[check]")
{
  std::string file = write_baseline("tolerance", {{{"scenario", "tolerance-small.json"}}});
  REQUIRE(testing::run_stepsim("check " + file + " --update").exit_code == 0);
  auto baseline     = nlohmann::json::parse(testing::read_text_file(file));
  double prediction = baseline["scenarios"][0]["expected_tokens_per_s"].get<double>();

  // Expect 1% more than the model predicts: within 2%, beyond 0.5%.
  baseline["scenarios"][0]["expected_tokens_per_s"] = prediction * 1.01;
  testing::write_temp_file("tolerance-baseline.json", baseline.dump(2));
  CHECK(testing::run_stepsim("check " + file).exit_code == 0);
  baseline["scenarios"][0]["tolerance"] = 0.005;
  testing::write_temp_file("tolerance-baseline.json", baseline.dump(2));
  auto r = testing::run_stepsim("check " + file);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("-0.99%") != std::string::npos);
}

TEST_CASE("a bad baseline is an input error naming each path", "[check]")
{
  testing::write_temp_file("bad-small.json", testing::small_scenario(2, 1, 4).dump());
  nlohmann::json baseline = {
      {"tolerance", 2},
      {"scenarios",
       {{{"scenario", "missing.json"}, {"expected_tokens_per_s", "fast"}},
        {{"scenaro", "bad-small.json"}, {"expected_tokens_per_s", 1}},
        {{"scenario", "bad-small.json"}, {"set", {{"parallelism.tensor", "eight"}}}, {"expected_tokens_per_s", 1}},
        {{"scenario", "bad-small.json"}},
        {{"scenario", "bad-small.json"}, {"expected_tokens_per_s", 2}}}}};
  std::string file = testing::write_temp_file("bad-baseline.json", baseline.dump(2));
  auto r           = testing::run_stepsim("check " + file);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  for (const char* message : {"tolerance: expected a fraction below 1",
                              "scenarios[0].scenario: no scenario file \"missing.json\"",
                              "scenarios[0].expected_tokens_per_s: expected a number, got the string \"fast\"",
                              "scenarios[1].scenaro: unknown key (did you mean \"scenario\"?)",
                              "scenarios[2]: scenario bad-small.json: parallelism.tensor: expected a positive integer",
                              "scenarios[3].expected_tokens_per_s: required field is missing",
                              "scenarios[4]: scenario bad-small.json with the same settings as scenarios[3]"}) {
    INFO(message);
    CHECK(r.output.find(message) != std::string::npos);
  }
  CHECK(r.output.find(file + ": ") != std::string::npos);

  CHECK(testing::run_stepsim("check /nonexistent/baseline.json").exit_code == 2);
  CHECK(testing::run_stepsim("check " + file + " --update --set parallelism.data=2").exit_code == 2);
}

TEST_CASE("the shipped baseline covers every shipped scenario", "[check]")
{
  const std::filesystem::path root = STEPSIM_SOURCE_DIR;
  auto baseline = nlohmann::json::parse(testing::read_text_file((root / "configs/baselines/scenarios.json").string()));
  std::set<std::string> covered;
  for (const auto& e : baseline.at("scenarios"))
    covered.insert(
        (root / "configs/baselines" / e.at("scenario").get<std::string>()).lexically_normal().string());
  for (const auto& f : std::filesystem::directory_iterator(root / "configs/scenarios")) {
    if (f.path().extension() != ".json")
      continue;
    INFO(f.path().string());
    CHECK(covered.count(f.path().lexically_normal().string()) == 1);
  }
}

// A CNN has no tokens: its baseline entry holds samples per second, and the wrong figure's key
// is refused with its path.
TEST_CASE("check holds a model without tokens by its samples per second", "[check]")
{
  const std::string root = STEPSIM_SOURCE_DIR;
  nlohmann::json cnn     = nlohmann::json::parse(
      testing::read_text_file(root + "/configs/validation/torchgpipe_resnet101_baseline.json"));
  cnn.erase("validation");
  testing::write_temp_file("cnn-small.json", cnn.dump());
  const std::string file = testing::write_temp_file(
      "cnn-baseline.json", nlohmann::json{{"scenarios", {{{"scenario", "cnn-small.json"}}}}}.dump());
  auto updated = testing::run_stepsim("check " + file + " --update");
  INFO(updated.output);
  REQUIRE(updated.exit_code == 0);
  auto baseline = nlohmann::json::parse(testing::read_text_file(file));
  REQUIRE(baseline["scenarios"][0].contains("expected_samples_per_s"));
  CHECK(baseline["scenarios"][0]["expected_samples_per_s"].get<double>() > 0);
  CHECK(testing::run_stepsim("check " + file).exit_code == 0);

  baseline["scenarios"][0]["expected_tokens_per_s"] = baseline["scenarios"][0]["expected_samples_per_s"];
  baseline["scenarios"][0].erase("expected_samples_per_s");
  testing::write_temp_file("cnn-baseline.json", baseline.dump());
  auto wrong = testing::run_stepsim("check " + file);
  CHECK(wrong.exit_code == 2);
  CHECK(wrong.output.find("scenarios[0].expected_tokens_per_s") != std::string::npos);
  CHECK(wrong.output.find("expected_samples_per_s") != std::string::npos);
}

TEST_CASE("stepsim check refuses an expected throughput no job reaches, naming its path")
{
  const std::string scenario = testing::write_temp_file("huge-small.json", testing::small_scenario(2, 1, 4).dump());
  const nlohmann::json baseline = {{"scenarios", {{{"scenario", scenario}, {"expected_tokens_per_s", 1e308}}}}};
  const auto r = testing::run_stepsim("check " + testing::write_temp_file("huge-baseline.json", baseline.dump()));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("scenarios[0].expected_tokens_per_s: 1e+308: expected at most"));
}
