// Command-line values and outputs that used to crash, hang or pass silently (issue 23): each is
// refused with exit 2 and a message naming the option or the field, or its failure is reported.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>
#include <string>

using namespace stepsim;
using testing::run_stepsim;

namespace {

const std::string kBase = std::string(STEPSIM_SOURCE_DIR) + "/tests/bad_inputs/base.scenario";

} // namespace

TEST_CASE("values and paths of --set obey the depth bound of scenario files", "[command_line]")
{
  const std::string deep = std::string(65000, '[') + std::string(65000, ']');
  auto value             = run_stepsim("run " + kBase + " --set 'model.x=" + deep + "'");
  CHECK(value.exit_code == 2);
  CHECK(value.output.find("--set model.x: the value nests arrays and objects deeper than the 64 levels") !=
        std::string::npos);
  std::string path = "a";
  for (int i = 0; i < 20000; ++i)
    path += ".a";
  auto long_path = run_stepsim("run " + kBase + " --set " + path + "=1");
  CHECK(long_path.exit_code == 2);
  CHECK(long_path.output.find("a path of 20001 names, deeper than the 64 levels") != std::string::npos);
}

TEST_CASE("an output that cannot be written fails the command", "[command_line]")
{
  auto json = run_stepsim("run " + kBase + " --quiet --json /dev/full");
  CHECK(json.exit_code == 2);
  CHECK(json.output.find("/dev/full: could not write all") != std::string::npos);
  const std::string errors = testing::write_temp_file("bounds-stdout-errors.txt", "");
  const int status = std::system((std::string(STEPSIM_BINARY) + " list > /dev/full 2> " + errors).c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(testing::read_text_file(errors).find("standard output: could not write") != std::string::npos);
}

TEST_CASE("collective refuses platforms beyond its bound and sizes without a unit it knows", "[command_line]")
{
  auto nodes = run_stepsim("collective --preset dgx-a100 --nodes 8192 --sizes 1MB");
  CHECK(nodes.exit_code == 2);
  CHECK(nodes.output.find("--nodes: 65536 GPUs") != std::string::npos);
  auto unit = run_stepsim("collective " + kBase + " --sizes 1PB");
  CHECK(unit.exit_code == 2);
  CHECK(unit.output.find("--sizes: \"1PB\" is not a size") != std::string::npos);
  auto range = run_stepsim("collective " + kBase + " --sizes 2000TB");
  CHECK(range.exit_code == 2);
  CHECK(range.output.find("expected a size from 1B to 1000TB") != std::string::npos);
}

TEST_CASE("plan refuses a CNN, which has no tokens, with the reason; check holds it by samples", "[command_line]")
{
  auto scenario = nlohmann::json::parse(testing::read_text_file(kBase));
  scenario["model"]       = {{"architecture", "resnet50"}};
  scenario["parallelism"] = {{"data", 8}};
  scenario["training"]["global_batch_size"] = 64;
  const std::string file = testing::write_temp_file("bounds-cnn.json", scenario.dump());
  auto plan              = run_stepsim("plan " + file);
  CHECK(plan.exit_code == 2);
  CHECK(plan.output.find("model.architecture: the planner searches layouts of transformer models") !=
        std::string::npos);
  const nlohmann::json baseline = {{"scenarios", {{{"scenario", "bounds-cnn.json"}}}}};
  const std::string text        = baseline.dump();
  const std::string baseline_file = testing::write_temp_file("bounds-cnn-baseline.json", text);
  // check holds it by its samples per second instead (tests/test_check.cpp).
  auto check                      = run_stepsim("check " + baseline_file + " --update");
  CHECK(check.exit_code == 0);
  CHECK(nlohmann::json::parse(testing::read_text_file(baseline_file))["scenarios"][0].contains("expected_samples_per_s"));
}
