// libFuzzer target: scenario text → JSON → parse_scenario → validate → memory model → lowering →
// graph check, the whole road up to (not into) SimGrid, which allows one engine per process.
// Bad input must end as an InputError; anything else that escapes (another exception, a crash, a
// sanitizer report, a non-finite figure, a graph that would deadlock) is a finding.
// Build and run: `make fuzz` (FUZZ_SECONDS=60 by default).
#include "sim/engine/graph_check.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "workloads/lower.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// Lowering is linear in (simulated ranks × micro-batches × layers). Under the sanitizers the
// default scenario (18,432 such passes) takes 2.6 s, and at `nice -n 19` next to a build it ran
// past the 10 s timeout; small shapes reach the same code, so larger ones are parsed and
// validated but not lowered.
constexpr double kLoweringBudget = 256;

void finding(const std::string& what)
{
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::abort();
}

void check_finite(double value, const char* name)
{
  if (!std::isfinite(value) || value < 0)
    finding(std::string(name) + " is " + std::to_string(value));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  using namespace stepsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    nlohmann::json document = parse_json_text(text, "fuzz.json");
    // Relative hf_config paths resolve as in the shipped scenarios.
    Scenario s = scenario_from_json(document, STEPSIM_SOURCE_DIR "/configs/scenarios");
    Report r   = analytic_report(s);
    check_finite(r.memory_peak_bytes, "memory_peak_bytes");
    check_finite(r.model_flops_per_step, "model_flops_per_step");
    for (const auto& st : r.stages)
      check_finite(st.textbook_bubble_fraction, "textbook_bubble_fraction");
    (void)memory_problem(s);

    const double ranks = s.simulation.fidelity == "full" ? double(s.platform.total_gpus()) / s.parallelism.pipeline : 1;
    double layers = s.model.architecture == "transformer" ? s.model.num_layers : 128; // CNNs: at most 128
    if (s.model.architecture == "layers") { // a layer list: its layers, repeats counted
      layers = 0;
      for (const auto& l : s.model.layers)
        layers += l.repeat;
    }
    if (ranks * double(s.micro_batches_per_replica()) * layers > kLoweringBudget)
      return 0;
    Workload w = lower(s);
    for (const auto& problem : find_graph_problems(w))
      finding(problem);
  } catch (const InputError&) {
    // The expected end of bad input.
  }
  return 0;
}
