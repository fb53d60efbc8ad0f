// The road's entry points (sim/road.cpp, its stages in sim/stages.hpp): scenario → job plan →
// costed workload → SimGrid replay → report, and the loading, validation and child processes
// around it. The command line, sweeps and tests all come through here.
#pragma once

#include "sim/core/report.hpp"
#include "sim/core/scenario.hpp"
#include "sim/output/timeline.hpp"

#include <functional>
#include <string>
#include <vector>

namespace stepsim {

// Reads a scenario file, applies `--set path=value` assignments, parses and validates it.
Scenario load_scenario(const std::string& file, const std::vector<std::string>& assignments = {});
// Checks and converts a scenario document with the registered model kinds; throws InputError with
// every problem found. `base_dir` resolves relative paths inside it (model.hf_config). No
// validation against the registries: scenario_from_json does both.
Scenario parse_scenario(const nlohmann::json& document, const std::string& base_dir = ".");
// Parses and validates an in-memory document (tests, sweeps).
Scenario scenario_from_json(const nlohmann::json& document, const std::string& base_dir = ".");

// A scenario document that only carries `platform`: a one-layer model and data parallelism over
// every GPU, for commands that time their own workload on a platform (`stepsim collective`, the
// recorded traces' replay). platform_gpus counts the GPUs of a platform object not yet checked
// (each node group's count × gpus_per_node, clamped to the parser's bounds; the parser reports
// what is wrong).
long long platform_gpus(const nlohmann::json& platform);
nlohmann::json platform_carrier(const std::string& name, const nlohmann::json& platform);

// Checks what needs the registries and the device catalogue; throws InputError naming each path.
void validate(const Scenario& s);

// Why the scenario does not fit in device memory: the stage with the peak, its breakdown
// (weights, gradients, optimizer, activations, buffers) against the capacity. "" when it fits.
// simulate() rejects such a scenario (InputError) unless simulation.allow_oom; sweeps can call
// this to put the reason in the row without simulating.
std::string memory_problem(const Scenario& s);

// Simulates one step in this process. SimGrid allows one engine per process, so a process calls
// this once; simulate_isolated runs it in a child process and may be called any number of times.
// When `timeline` is given it receives what every simulated rank did and when (for traces and
// pictures).
// With `link_count` > 0 the report lists that many of the busiest links (`run --links`).
Report simulate(const Scenario& s, Timeline* timeline = nullptr, int link_count = 0);

// A scenario whose automatic stage split (parallelism.stage_layers "auto") puts stages on
// several node groups, with that split refined by simulating moves of single layers between
// neighbouring stages (sim/stage_split.cpp); any other scenario as it is. simulate() runs it.
Scenario with_refined_stage_split(const Scenario& s);
Report simulate_isolated(const Scenario& s);
// The same in a child process, its report as `run --json` writes it (to_json), with the `link_count`
// busiest links; InputError and other failures of the child are thrown again here.
nlohmann::json simulate_isolated_json(const Scenario& s, int link_count = 0);

// Runs `body` in a forked child process and returns the text it produced (SimGrid's one engine
// per process makes this the way to run several simulations from one program).
// With `peak_rss_kb`, also the child's peak resident memory (the benchmark's figure).
std::string run_in_child(const std::function<std::string()>& body, long* peak_rss_kb = nullptr);

// Runs `body` in a forked child process that hands back lines one at a time: each call of the
// `emit` it is given reaches `on_line` here as soon as it is made (a table printed row by row
// while a child that built its platform once forks a grandchild per row). A line holds no
// newline. Throws when the child dies before its body returns.
void run_in_child_lines(const std::function<void(const std::function<void(const std::string&)>& emit)>& body,
                        const std::function<void(const std::string&)>& on_line);

// A child process forked when constructed, before this process creates a SimGrid engine, that
// later runs `body` on the text run() hands it and returns what it produced: the way to run a
// second engine after a replay in the same process (SimGrid keeps state, the clock among it,
// from one engine to the next). Destroyed unused, the child ends without running it.
class DeferredChild {
public:
  explicit DeferredChild(std::function<std::string(const std::string&)> body);
  ~DeferredChild();
  DeferredChild(const DeferredChild&)            = delete;
  DeferredChild& operator=(const DeferredChild&) = delete;
  std::string run(const std::string& input); // once

private:
  int pid_ = -1, to_child_ = -1, from_child_ = -1;
};

// Called first thing in a forked child, with the pid the parent had before fork(): asks the
// kernel to SIGKILL the child when the parent dies, so that a killed command (timeout, SIGTERM,
// SIGKILL) leaves no simulation running on. A parent that died before the request took effect
// is seen as a changed parent pid, and the child exits at once.
void die_with_parent(int parent_pid);

// Report fields that need no simulation (FLOPs, memory).
Report analytic_report(const Scenario& s);

} // namespace stepsim
