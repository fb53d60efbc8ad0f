// libFuzzer target: the text of a sweep file → load_sweep (its axes, base and digest) → the
// parameters of its first and last points, each applied to the base and parsed as a scenario.
// The sweep file is written into a scratch folder beside a link to configs/scenarios, so that the
// shipped sweeps' relative "base" paths resolve. Bad input must end as an InputError; another
// exception, a crash or a sanitizer report is a finding.
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "tools/driver/sweep.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

std::string sweep_file()
{
  static const std::string file = [] {
    const fs::path dir = fs::temp_directory_path() / ("stepsim-fuzz-sweep-" + std::to_string(getpid()));
    fs::create_directories(dir / "sweeps");
    std::error_code ignored;
    fs::create_directory_symlink(fs::path(STEPSIM_SOURCE_DIR) / "configs" / "scenarios", dir / "scenarios", ignored);
    return (dir / "sweeps" / "input.json").string();
  }();
  return file;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  using namespace stepsim;
  const std::string file = sweep_file();
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  try {
    Sweep sweep = load_sweep(file);
    (void)sweep.columns();
    const size_t points = sweep.points();
    for (size_t index : {size_t{0}, points - 1}) {
      if (index >= points)
        continue;
      // As evaluate_point applies a point (tools/driver/sweep.cpp), short of simulating it.
      nlohmann::json point = sweep.base;
      try {
        for (const auto& [path, value] : sweep.parameters(index))
          set_by_path(point, path + "=" + value.dump());
        (void)scenario_from_json(point, sweep.base_dir);
      } catch (const InputError&) {
        // An infeasible point: the sweep keeps it as a row with its reason.
      }
    }
  } catch (const InputError&) {
    // The expected end of bad input.
  }
  return 0;
}
