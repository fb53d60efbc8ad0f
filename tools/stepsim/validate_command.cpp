// `stepsim validate FILE`: check a scenario or a sweep file and list every problem at once.
// A sweep file (one with "grid" or "zip") is checked as a file, then every point is checked as a
// scenario: points that do not divide or do not fit are allowed in a sweep (they become rows
// with their reason), so they are summarised, not failed.
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/simulate.hpp"
#include "tools/driver/sweep.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>

namespace stepsim {
namespace {

struct ValidateOptions {
  std::string file;
  std::vector<std::string> sets;
};

int validate_sweep(const std::string& file)
{
  Sweep sweep = load_sweep(file);
  std::map<std::string, size_t> reasons;
  size_t bad = 0;
  for (size_t i = 0; i < sweep.points(); ++i) {
    nlohmann::json doc = sweep.base;
    for (const auto& [path, value] : sweep.parameters(i))
      set_by_path(doc, path + "=" + value.dump());
    try {
      Scenario s = scenario_from_json(doc, sweep.base_dir);
      if (std::string oom = memory_problem(s); !oom.empty())
        throw InputError({oom});
    } catch (const InputError& e) {
      ++bad;
      for (const auto& p : e.problems())
        ++reasons[p];
    }
  }
  // A sweep none of whose points can run (a base scenario that is itself invalid) would run
  // nothing: bad input, its reasons said as every point's.
  if (bad == sweep.points() && bad > 0) {
    std::vector<std::string> problems;
    for (const auto& [reason, count] : reasons)
      problems.push_back(count == bad ? reason : fmt::format("{} ({} of the {} points)", reason, count, bad));
    problems.push_back(fmt::format("(top level): none of the sweep's {} points can run", bad));
    throw InputError(problems);
  }
  fmt::print("{}: valid sweep of {} points; {} would run, {} are infeasible and will be rows with their reason\n", file,
             sweep.points(), sweep.points() - bad, bad);
  for (const auto& [reason, count] : reasons)
    fmt::print("  {:>5} × {}\n", count, reason);
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<ValidateOptions>();
  sub.add_option("FILE", o->file, "scenario or sweep JSON file")->required();
  sub.add_option("--set", o->sets, "override a field of a scenario: path=value");
  return [o] {
    nlohmann::json doc = read_json_file(o->file);
    if (doc.is_object() && (doc.contains("grid") || doc.contains("zip")) && o->sets.empty())
      return validate_sweep(o->file);
    Scenario s = load_scenario(o->file, o->sets);
    if (std::string oom = memory_problem(s); !oom.empty()) {
      // A scenario that asks to be simulated anyway is valid, as `run` takes it; the miss is said.
      if (!s.simulation.allow_oom)
        throw InputError({oom + "; pass --allow-oom (simulation.allow_oom) to simulate it anyway"});
      fmt::print("{}: valid; {} (simulation.allow_oom is set: it is simulated anyway)\n", o->file, oom);
      return 0;
    }
    fmt::print("{}: valid\n", o->file);
    return 0;
  };
}

const bool registered =
    CommandRegistry::add("validate", "check a scenario or sweep file and list every problem", Command{setup});

} // namespace
} // namespace stepsim
