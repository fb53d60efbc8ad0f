// The stepsim command line: one subcommand per file in this folder (see command.hpp).
// Exit codes: 0 success, 1 simulation failure or regression, 2 bad input.
#include "tools/stepsim/command.hpp"

#include "sim/core/input_error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>

namespace stepsim {

void write_text_file(const std::string& path, const std::string& text)
{
  std::ofstream out(path);
  if (!out)
    throw InputError({fmt::format("{}: cannot write the file", path)});
  // A full disk (or /dev/full) shows only when the buffer goes out: flush and close before
  // saying it was written.
  out << text;
  out.close();
  if (!out)
    throw InputError({fmt::format("{}: could not write all {} bytes (disk full?)", path, text.size())});
}

} // namespace stepsim

using namespace stepsim;

// Exit code 2: what went to standard output (`--json -`, tables) did not reach it.
static int unwritable_output()
{
  std::cerr << "error: standard output: could not write the output (disk full or closed pipe?)\n";
  return 2;
}

int main(int argc, char** argv)
{
  CLI::App app{"stepsim: predicts one training step of a distributed deep-learning job on a SimGrid model of the "
               "platform"};
  app.require_subcommand(1);
  app.footer("Examples:\n  stepsim run configs/scenarios/default.json\n"
             "  stepsim run configs/scenarios/default.json --set parallelism.schedule=gpipe --json report.json\n"
             "  stepsim validate my_scenario.json\n  stepsim list\n\n"
             "Run `stepsim COMMAND --help` for a command's options.");

  std::vector<std::pair<CLI::App*, std::function<int()>>> commands;
  for (const auto& [name, item] : CommandRegistry::all()) {
    CLI::App* sub = app.add_subcommand(name, item.description);
    commands.emplace_back(sub, item.entry.setup(*sub));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's own words ("Could not convert: --rank = abc"), said as every error is.
    std::cerr << "error: " << e.what() << "\nRun with --help for more information.\n";
    return 2;
  }
  // An option given an empty value ("--sizes ''") would run as if it were left out.
  for (auto& [sub, action] : commands)
    if (sub->parsed())
      for (const CLI::Option* option : sub->get_options())
        if (option->count() > 0 && option->get_expected_min() > 0)
          for (const std::string& value : option->results())
            if (value.empty()) {
              std::cerr << "error: " << option->get_name() << ": expected a value, got an empty string\n";
              return 2;
            }

  try {
    for (auto& [sub, action] : commands)
      if (sub->parsed()) {
        int code = action();
        // What went to standard output (`--json -`, tables) must have reached it too.
        std::cout.flush();
        if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout))
          return unwritable_output();
        return code;
      }
  } catch (const InputError& e) {
    for (const auto& p : e.problems())
      std::cerr << "error: " << p << "\n";
    return 2;
  } catch (const std::exception& e) {
    // fmt throws as soon as a long table no longer fits the stream's buffer: the same bad output.
    if (std::ferror(stdout))
      return unwritable_output();
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
