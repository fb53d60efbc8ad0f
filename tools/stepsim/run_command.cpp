// `stepsim run FILE`: simulate one training step and print its report.
#include "tools/driver/simulate.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <chrono>
#include <memory>

namespace stepsim {
namespace {

struct RunOptions {
  std::string file, json_out;
  std::vector<std::string> sets;
  bool quiet = false;
};

int run(const RunOptions& o)
{
  Scenario s  = load_scenario(o.file, o.sets);
  auto start  = std::chrono::steady_clock::now();
  Report r    = simulate(s);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.json_out.empty())
    write_text_file(o.json_out, to_json(r).dump(2) + "\n");
  if (!o.quiet) {
    fmt::print("{}", to_table(r));
    fmt::print("\n  simulated {} ranks, {} activities in {:.2f} s wall\n", r.simulated_ranks, r.activities, wall);
  }
  return 0;
}

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<RunOptions>();
  sub.add_option("FILE", o->file, "scenario JSON file")->required();
  sub.add_option("--set", o->sets, "override a field: path=value, e.g. parallelism.tensor=4 (repeatable)");
  sub.add_option("--json", o->json_out, "write the report as JSON to this file");
  sub.add_flag("--quiet,-q", o->quiet, "print nothing (use with --json)");
  sub.footer("Examples:\n  stepsim run configs/scenarios/default.json\n"
             "  stepsim run configs/scenarios/default.json --set parallelism.pipeline=8 --set parallelism.data=16\n"
             "  stepsim run configs/scenarios/default.json --json report.json --quiet");
  return [o] { return run(*o); };
}

const bool registered = CommandRegistry::add("run", "simulate one training step and print its report", Command{setup});

} // namespace
} // namespace stepsim
