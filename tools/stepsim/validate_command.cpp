// `stepsim validate FILE`: check a scenario and list every problem at once.
#include "tools/driver/simulate.hpp"
#include "tools/stepsim/command.hpp"

#include <fmt/format.h>

#include <memory>

namespace stepsim {
namespace {

struct ValidateOptions {
  std::string file;
  std::vector<std::string> sets;
};

std::function<int()> setup(CLI::App& sub)
{
  auto o = std::make_shared<ValidateOptions>();
  sub.add_option("FILE", o->file, "scenario JSON file")->required();
  sub.add_option("--set", o->sets, "override a field: path=value");
  return [o] {
    load_scenario(o->file, o->sets);
    fmt::print("{}: valid\n", o->file);
    return 0;
  };
}

const bool registered =
    CommandRegistry::add("validate", "check a scenario file and list every problem", Command{setup});

} // namespace
} // namespace stepsim
