// Replaying recorded steps (`stepsim replay`): the road for traces instead of scenarios.
//
//   trace files ──read_traces──▶ RecordedRank per rank ──trace_workload──▶ Workload
//   platform file ──────────────▶ Scenario (its platform and simulation) ──replay──▶ TraceReplayReport
//
// Compute keeps its recorded durations (or is re-timed for another device by the kernel model,
// workloads/traces/recorded_trace.hpp TraceTiming); communication is re-timed by the network model
// of the platform; rank i runs on the platform's GPU i.
#pragma once

#include "sim/output/metrics.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace stepsim {

struct TraceReplayOptions {
  std::vector<std::string> files; // one per rank
  // A scenario file (its "platform" and "simulation" are used, the rest ignored) or a platform
  // file {"platform": {...}}, with --set assignments applied to it.
  std::string platform_file;
  std::vector<std::string> sets;
  // Compute is re-timed from `recorded_on` to `device` (both of configs/devices) where they differ;
  // "" = each rank's GPU on the platform, so that neither keeps the recorded durations.
  std::string device;
  std::string recorded_on;
};

struct TraceRankReport {
  int rank = 0;
  std::string file, gpu;
  double recorded_step_s = 0, replayed_step_s = 0;
  RankMetrics recorded, replayed;
  // The host's time per kernel launch the trace shows (RecordedRank::host_launch_s), -1: none.
  double host_launch_s = -1;
  long long launch_gaps = 0;
};

struct TraceReplayReport {
  std::string format, platform, device, recorded_on;
  double recorded_step_s = 0; // the longest rank's span in the traces (0: the traces have no times)
  double step_time_s     = 0; // replayed
  std::vector<TraceRankReport> ranks;
  std::map<std::string, std::string> collective_algorithms;
};

// Reads the traces and the platform, replays them in this process's SimGrid engine (once per
// process, as simulate()). Throws InputError naming the file and the event or node at fault.
TraceReplayReport replay_traces(const TraceReplayOptions& options);

nlohmann::json to_json(const TraceReplayReport& report);
std::string to_table(const TraceReplayReport& report);

} // namespace stepsim
