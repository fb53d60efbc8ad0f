// The stepsim command line. Exit codes: 0 success, 1 simulation failure, 2 bad input.
#include "models/collective.hpp"
#include "models/compute_model.hpp"
#include "models/device.hpp"
#include "sim/input_error.hpp"
#include "sim/json_reader.hpp"
#include "topologies/platform.hpp"
#include "tools/driver/simulate.hpp"
#include "workloads/schedule.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>

using namespace stepsim;

namespace {

template <class R> void print_registry(const char* title)
{
  fmt::print("{}:\n", title);
  for (const auto& [name, item] : R::all())
    fmt::print("  {:<20} {}\n", name, item.description);
}

void write_file(const std::string& path, const std::string& text)
{
  std::ofstream out(path);
  if (!out)
    throw InputError({fmt::format("{}: cannot write the file", path)});
  out << text;
}

int run_command(const std::string& file, const std::vector<std::string>& sets, const std::string& json_out, bool quiet)
{
  Scenario s  = load_scenario(file, sets);
  auto start  = std::chrono::steady_clock::now();
  Report r    = simulate(s);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!json_out.empty())
    write_file(json_out, to_json(r).dump(2) + "\n");
  if (!quiet) {
    fmt::print("{}", to_table(r));
    fmt::print("\n  simulated {} ranks, {} activities in {:.2f} s wall\n", r.simulated_ranks, r.activities, wall);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv)
{
  CLI::App app{"stepsim: predicts one training step of a distributed deep-learning job on a SimGrid model of the "
               "platform"};
  app.require_subcommand(1);
  app.footer("Examples:\n  stepsim run configs/scenarios/default.json\n"
             "  stepsim run configs/scenarios/default.json --set parallelism.schedule=gpipe --json report.json\n"
             "  stepsim validate my_scenario.json\n  stepsim list");

  std::string file, json_out;
  std::vector<std::string> sets;
  bool quiet = false;
  auto* run  = app.add_subcommand("run", "simulate one training step and print its report");
  run->add_option("FILE", file, "scenario JSON file")->required();
  run->add_option("--set", sets, "override a field: path=value, e.g. parallelism.tensor=4 (repeatable)");
  run->add_option("--json", json_out, "write the report as JSON to this file");
  run->add_flag("--quiet,-q", quiet, "print nothing (use with --json)");

  std::string validate_file;
  std::vector<std::string> validate_sets;
  auto* validate_cmd = app.add_subcommand("validate", "check a scenario file and list every problem");
  validate_cmd->add_option("FILE", validate_file, "scenario JSON file")->required();
  validate_cmd->add_option("--set", validate_sets, "override a field: path=value");

  auto* list    = app.add_subcommand("list", "list schedules, collective algorithms, fabrics, cost models");
  auto* devices = app.add_subcommand("devices", "list the device catalogue");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    if (run->parsed())
      return run_command(file, sets, json_out, quiet);
    if (validate_cmd->parsed()) {
      load_scenario(validate_file, validate_sets);
      fmt::print("{}: valid\n", validate_file);
      return 0;
    }
    if (list->parsed()) {
      print_registry<ScheduleRegistry>("schedules (parallelism.schedule)");
      print_registry<CollectiveRegistry>("collective algorithms (simulation.collective_algorithm)");
      print_registry<FabricRegistry>("fabrics (platform.network.topology)");
      print_registry<ComputeModelRegistry>("compute models (simulation.compute_model)");
      return 0;
    }
    if (devices->parsed()) {
      for (const auto& name : device_names()) {
        Device d = load_device(name, "device");
        fmt::print("  {:<20} {:>7.1f} TFLOP/s bf16  {:>6.0f} GB  {:>6.0f} GB/s  {:>4} SMs\n", name, d.peak("bf16") / 1e12,
                   d.memory_bytes / 1e9, d.memory_bandwidth_Bps / 1e9, d.sm_count);
      }
      return 0;
    }
  } catch (const InputError& e) {
    for (const auto& p : e.problems())
      std::cerr << "error: " << p << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
