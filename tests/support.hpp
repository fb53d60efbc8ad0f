// Helpers shared by the tests: scenarios built in code, and running SimGrid work in a child
// process (SimGrid allows one engine per process).
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/core/task_graph.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

namespace simgrid::s4u {
class Engine;
}

namespace stepsim::testing {

// A small GPT-style scenario on `nodes` single-GPU nodes, with free-ish links unless changed.
nlohmann::json small_scenario(int pipeline, int data, int micro_batches);

// Inside a child process: SimGrid's engine, quiet, with stepsim's network model settings.
std::unique_ptr<simgrid::s4u::Engine> start_engine();
// n single-GPU nodes (A100) whose NICs have bandwidth B and latency L between them.
PlatformSpec single_gpu_nodes(int n, double bandwidth_Bps, double latency_s);
// `count` NVSwitch nodes of `gpus_per_node` GPUs of type `gpu`, one NIC per GPU as on DGX nodes.
NodeGroupSpec nvswitch_nodes(const std::string& gpu, int count, int gpus_per_node, double nvlink_Bps, double nvlink_s,
                             double nic_Bps, double nic_s);

// The route from GPU `src` to GPU `dst` as SimGrid resolves it (route_latency_s, links,
// bottleneck_Bps, summed_latency_s) and the time a Send/Recv pair of `bytes` between them takes
// when replayed alone (transfer_s); in a child process.
nlohmann::json measure_route(const PlatformSpec& spec, int src, int dst, double bytes);

// The compute model "test_uniform_layers": only transformer layers cost time (1 us per forward
// kernel, 2 us per backward kernel); embedding, head and optimizer are free, so that every
// pipeline stage does the same work (bubble tests against the textbook formulas).
inline constexpr const char* kUniformLayers = "test_uniform_layers";

// The bytes and count of one rank's tasks of `kind` on `stream` in pass `pass`.
struct Traffic {
  double bytes = 0;
  int tasks    = 0;
};
Traffic traffic(const RankProgram& r, TaskKind kind, Stream stream, Pass pass);

// The problems of the InputError `body` throws, one per line; "" when it throws none.
std::string input_problems(const std::function<void()>& body);

// Runs `body` in a forked child and returns the JSON it produced.
nlohmann::json in_child(const std::function<nlohmann::json()>& body);

struct CommandResult {
  int exit_code;
  std::string output; // stdout and stderr together
};
// Runs the stepsim binary with the given arguments.
CommandResult run_stepsim(const std::string& arguments);
std::string write_temp_file(const std::string& name, const std::string& text);
std::string read_text_file(const std::string& path);

} // namespace stepsim::testing
