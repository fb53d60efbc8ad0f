// A subcommand of the stepsim program. Each command is one file in tools/stepsim/ that registers
// itself by name; `setup` declares its options on the CLI11 subcommand and returns the action to
// run once the command line is parsed. Actions return the exit code: 0 success, 1 a simulation
// failed or a check found a regression, 2 bad input (InputError).
#pragma once

#include "sim/core/registry.hpp"

#include <CLI/CLI.hpp>

#include <functional>

namespace stepsim {

struct Command {
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

using CommandRegistry = Registry<Command>;

// Writes `text` to `path`, or throws InputError naming the path.
void write_text_file(const std::string& path, const std::string& text);

} // namespace stepsim
