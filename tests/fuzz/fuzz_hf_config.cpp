// libFuzzer target: the text of a HuggingFace config.json → a scenario whose model is that file
// (model.hf_config, on the 8-GPU base of tests/bad_inputs/) → parse, validate and the memory model.
// Bad input must end as an InputError naming the file or path; another exception, a crash, a
// sanitizer report or a non-finite figure is a finding.
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  using namespace stepsim;
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("stepsim-fuzz-hf-" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }();
  std::ofstream(dir / "config.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  static const nlohmann::json base =
      read_json_file(std::string(STEPSIM_SOURCE_DIR) + "/tests/bad_inputs/base.scenario");
  nlohmann::json scenario = base;
  scenario["model"]       = {{"hf_config", "config.json"}, {"seq_length", 512}};
  try {
    Scenario s = scenario_from_json(scenario, dir.string());
    Report r   = analytic_report(s);
    if (!std::isfinite(r.memory_peak_bytes) || !std::isfinite(r.model_flops_per_step) || r.model_flops_per_step < 0) {
      std::fprintf(stderr, "fuzz finding: memory %g, FLOPs %g\n", r.memory_peak_bytes, r.model_flops_per_step);
      std::abort();
    }
  } catch (const InputError&) {
    // The expected end of bad input.
  }
  return 0;
}
