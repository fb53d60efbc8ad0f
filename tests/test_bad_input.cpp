// Bad input: a clear message that names the JSON path, exit code 2, never a crash.
#include "support.hpp"

#include "sim/units.hpp"

#include <catch2/catch.hpp>

using namespace stepsim;

namespace {
std::string default_scenario() { return std::string(STEPSIM_SOURCE_DIR) + "/configs/scenarios/default.json"; }

void expect_rejected(const std::string& args, const std::string& message)
{
  auto r = testing::run_stepsim(args);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(message) != std::string::npos);
}
} // namespace

TEST_CASE("malformed JSON names the line and column")
{
  auto file = testing::write_temp_file("bad.json", "{\n  \"model\": {\n    \"num_layers\": 96,\n  }\n}\n");
  expect_rejected("run " + file, "malformed JSON at line 4");
}

// Each bad input as a --set on the default scenario, with the message it must produce.
TEST_CASE("bad inputs name the JSON path and what was expected")
{
  auto [sets, message] = GENERATE(table<std::string, std::string>({
      {"--set parallelism.tensor='\"eight\"'",
       "parallelism.tensor: expected a positive integer, got the string \"eight\""},
      {"--set parallelism.tensr=8", "parallelism.tensr: unknown key (did you mean \"tensor\"?)"},
      {"--set platform.node_groups.0.count=64",
       "parallelism.tensor: 8 × pipeline 16 × data 8 = 1024 GPUs, but the platform has 512"},
      {"--set parallelism.tensor=5 --set parallelism.data=12 --set platform.node_groups.0.count=120",
       "model.num_attention_heads 96 is not divisible by tensor 5"},
      {"--set platform.node_groups.0.gpu=A100-SXM4-80G",
       "platform.node_groups[0].gpu: unknown device \"A100-SXM4-80G\" (did you mean \"A100-SXM4-80GB\"?)"},
      {"--set parallelism.schedule=1f1bb", "parallelism.schedule: unknown name \"1f1bb\" (did you mean \"1f1b\"?)"},
      {"--set platform.node_groups.0.nic.bandwidth=200Gbs", "platform.node_groups[0].nic.bandwidth: expected a bandwidth"},
      {"--set parallelism.schedule=interleaved_1f1b", "parallelism.virtual_stages: schedule \"interleaved_1f1b\" needs"},
  }));
  expect_rejected("run " + default_scenario() + " " + sets, message);
}

TEST_CASE("several independent problems are reported together")
{
  auto r = testing::run_stepsim("run " + default_scenario() +
                                " --set training.precision=fp12 --set training.micro_batch_size=0");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("training.precision") != std::string::npos);
  CHECK(r.output.find("training.micro_batch_size") != std::string::npos);
}

TEST_CASE("a missing file is an input error")
{
  expect_rejected("run /nonexistent/scenario.json", "cannot open the file");
}

TEST_CASE("units parse as SimGrid writes them")
{
  CHECK(*units::parse_bandwidth("200Gbps") == Approx(25e9));
  CHECK(*units::parse_bandwidth("300GBps") == Approx(300e9));
  CHECK(*units::parse_time("1.5us") == Approx(1.5e-6));
  CHECK(*units::parse_bytes("25MiB") == Approx(25 * 1048576.0));
  CHECK_FALSE(units::parse_bandwidth("fast").has_value());
  CHECK_FALSE(units::parse_time("3 parsecs").has_value());
}

TEST_CASE("every device of the catalogue loads and lists")
{
  auto r = testing::run_stepsim("devices");
  CHECK(r.exit_code == 0);
  for (const char* name : {"A100-SXM4-80GB", "H100-SXM", "V100-SXM3-32GB", "H200-SXM", "Tesla-P40", "Chiplet-Die"})
    CHECK(r.output.find(name) != std::string::npos);
  CHECK(r.output.find(" 0.0 TFLOP/s") == std::string::npos);
}
