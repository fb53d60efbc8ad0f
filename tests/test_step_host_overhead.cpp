// The framework's host time between steps (DeviceCalibration::step_host_s, sim/step_report.cpp):
// every GPU idles while the train loop's host runs between one step's weight update and the next
// step's first kernel. It is added to the replayed step, is not a pipeline bubble, and comes from
// simulation.step_host_overhead or the framework's calibration file
// (configs/calibration/DEVICE.FRAMEWORK.json, tools/calibrate/fit_step_overhead.py).
#include "support.hpp"
#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/report.hpp"
#include "sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace stepsim;

namespace {

Report run_with(nlohmann::json doc, const char* overhead)
{
  if (overhead != nullptr)
    doc["simulation"]["step_host_overhead"] = overhead;
  return simulate_isolated(scenario_from_json(doc));
}

} // namespace

TEST_CASE("the host time between steps lengthens the step by itself, and is not counted as a bubble")
{
  const nlohmann::json doc = testing::small_scenario(2, 2, 4); // two stages: bubbles of their own
  const Report plain       = run_with(doc, nullptr);
  const Report zero        = run_with(doc, "0ms");
  const Report with        = run_with(doc, "50ms");
  CHECK(plain.step_host_s == 0);
  CHECK(zero.step_time_s == plain.step_time_s);
  CHECK_FALSE(to_json(zero).contains("step_host_overhead_s"));
  CHECK(with.step_host_s == Approx(0.05));
  CHECK(with.step_time_s == Approx(plain.step_time_s + 0.05).epsilon(1e-12));
  // The figures that follow the step time follow it; the pipeline's bubbles are those of the
  // replayed step, the same seconds as without it.
  CHECK(with.tokens_per_s == Approx(plain.tokens_per_s * plain.step_time_s / with.step_time_s));
  CHECK(with.mfu == Approx(plain.mfu * plain.step_time_s / with.step_time_s));
  REQUIRE(with.stages.size() == plain.stages.size());
  for (size_t i = 0; i < with.stages.size(); ++i)
    CHECK(with.stages[i].bubble_s == Approx(plain.stages[i].bubble_s).margin(1e-12));
  // The report says it, and a merged report keeps it.
  const nlohmann::json j = to_json(with);
  CHECK(j["step_host_overhead_s"].get<double>() == Approx(0.05));
  CHECK(report_from_json(j).step_host_s == Approx(0.05));
  CHECK(to_table(with).find("host between steps") != std::string::npos);
  CHECK(to_table(plain).find("host between steps") == std::string::npos);
}

TEST_CASE("a host time between steps that is no step's is refused, naming the field")
{
  nlohmann::json doc = testing::small_scenario(1, 1, 1);
  for (const char* bad : {"10s", "-1ms", "fast"}) {
    INFO(bad);
    doc["simulation"]["step_host_overhead"] = bad;
    try {
      (void)scenario_from_json(doc);
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find("simulation.step_host_overhead") != std::string::npos);
    }
  }
}

TEST_CASE("Megatron-Core on the H100 takes the host time between steps fitted on its published runs")
{
  // configs/calibration/H100-SXM.megatron-core.json, fitted by tools/calibrate/fit_step_overhead.py
  // on Megatron-Core's and NeMo's H100 runs; no other framework's run on the H100 has it, and the
  // scenario's own figure replaces it.
  const Device mcore = load_device("H100-SXM", "megatron-core", "test");
  CHECK(mcore.calibration.step_host_s > 0.001);
  CHECK(mcore.calibration.step_host_s < 1.0);
  CHECK(load_device("H100-SXM", "pytorch-fsdp", "test").calibration.step_host_s == 0);
  CHECK(load_device("H100-SXM", "", "test").calibration.step_host_s == 0);
  nlohmann::json doc = nlohmann::json::parse(testing::read_text_file(
      (std::filesystem::path(STEPSIM_SOURCE_DIR) / "configs" / "validation" / "megatron_core_h100_weak_1.7B.json").string()));
  const Report fitted = run_with(doc, nullptr);
  CHECK(fitted.step_host_s == Approx(mcore.calibration.step_host_s));
  const Report none = run_with(doc, "0ms");
  CHECK(none.step_host_s == 0);
  CHECK(fitted.step_time_s == Approx(none.step_time_s + mcore.calibration.step_host_s).epsilon(1e-9));
}
