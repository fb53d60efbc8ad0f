#include "sim/trace_replay.hpp"

#include "sim/simulate.hpp"
#include "sim/stages.hpp"

#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "models/link_calibration.hpp"
#include "sim/core/input_error.hpp"
#include "sim/engine/graph_check.hpp"
#include "sim/engine/link_slowdown.hpp"
#include "sim/engine/replay.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/limits.hpp"
#include "topologies/collective_groups.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"
#include "topologies/preset.hpp"
#include "workloads/traces/recorded_trace.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>

namespace stepsim {

namespace {

// The platform and simulation settings of a scenario or platform file, as a scenario whose model
// and plan only carry them (the traces are the workload): a one-layer model, data parallelism
// over every GPU, as `stepsim collective --platform` builds one. A full scenario file works too; its
// model and plan are ignored, so a recording need not fit them.
Scenario platform_scenario_of(const std::string& file, const std::vector<std::string>& sets)
{
  nlohmann::json doc = read_json_file(file);
  for (const auto& a : sets)
    set_by_path(doc, a);
  if (!doc.is_object() || !doc.contains("platform") || !doc["platform"].is_object())
    throw InputError({fmt::format("{}: expected a scenario or platform file with a \"platform\" object", file)});
  // Its platform and simulation are read; a scenario's other sections are the traces' to say. A
  // key of neither would be silently ignored.
  static const std::vector<std::string> kKeys = {"platform", "simulation", "name",        "description", "sources",
                                                 "model",    "training",   "parallelism", "validation"};
  std::vector<std::string> unknown;
  for (const auto& [key, value] : doc.items())
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      const std::string near = closest_name(key, kKeys);
      unknown.push_back(fmt::format("{}: unknown key \"{}\" at the top level{}", file, key,
                                    near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
    }
  if (!unknown.empty())
    throw InputError(unknown);
  nlohmann::json carrier = platform_carrier(doc.contains("name") && doc["name"].is_string()
                                                 ? doc["name"].get<std::string>()
                                                 : std::filesystem::path(file).stem().string(),
                                             doc["platform"]);
  if (doc.contains("simulation") && doc["simulation"].is_object())
    for (const auto& [key, value] : doc["simulation"].items())
      carrier["simulation"][key] = value;
  else if (doc.contains("simulation"))
    carrier["simulation"] = doc["simulation"]; // not an object: the parser says what is wrong
  return scenario_from_json(carrier, std::filesystem::path(file).parent_path().string());
}

// The device of each GPU of the platform, in GPU order.
std::vector<std::string> gpu_types(const PlatformSpec& platform)
{
  std::vector<std::string> types;
  for (const auto& g : platform.node_groups)
    for (long long i = 0; i < static_cast<long long>(g.count) * g.gpus_per_node; ++i)
      types.push_back(g.gpu);
  return types;
}

std::string files_of(const std::vector<RecordedRank>& ranks)
{
  return ranks.size() == 1 ? ranks.front().file : fmt::format("{} ... {}", ranks.front().file, ranks.back().file);
}

} // namespace

TraceReplayReport replay_traces(const TraceReplayOptions& o)
{
  if (o.platform_file.empty())
    throw InputError({"--platform: give the scenario or platform file whose platform replays the traces"});
  const Scenario s                        = platform_scenario_of(o.platform_file, o.sets);
  const std::vector<RecordedRank> ranks   = read_traces(o.files);
  const std::vector<std::string> gpu_type = gpu_types(s.platform);
  if (ranks.size() > gpu_type.size())
    throw InputError({fmt::format("{}: {} trace files (ranks), but the platform of {} has {} GPUs; give a platform with "
                                  "a GPU per rank",
                                  files_of(ranks), ranks.size(), o.platform_file, gpu_type.size())});

  // Devices: where compute runs in the replay, and where it was recorded.
  std::map<std::string, Device> devices;
  auto device = [&](const std::string& name, const std::string& path) -> const Device* {
    auto it = devices.find(name);
    if (it == devices.end())
      it = devices.emplace(name, load_device(name, path)).first;
    return &it->second;
  };
  // Unless told otherwise, the traces were recorded on the platform's GPUs: --device alone re-times
  // from them, --recorded-on alone re-times to them, neither keeps the recorded durations.
  TraceTiming timing;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Device* platform_gpu = device(gpu_type[r], "platform.node_groups.gpu");
    timing.device_of_rank.push_back(o.device.empty() ? platform_gpu : device(o.device, "--device"));
    timing.recorded_on_of_rank.push_back(o.recorded_on.empty() ? platform_gpu : device(o.recorded_on, "--recorded-on"));
  }
  timing.model = &ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model");

  TraceWorkload traced = trace_workload(ranks, timing);
  Workload& w          = traced.workload;
  // Rank i on GPU i: the workload's world is the traces', the platform may have more GPUs.
  describe_groups(w, s.platform, {}, s.simulation.nccl_channels);
  const CollectiveAlgorithm collectives = scenario_collective_algorithm(s.simulation);
  check_collectives(w, s.simulation, collectives);
  if (auto problems = find_graph_problems(w, GraphChecks::ButCycles); !problems.empty()) {
    for (auto& p : problems)
      p = fmt::format("{}: {}", files_of(ranks), p);
    throw InputError(problems);
  }

  const auto engine          = start_engine();
  const LinkEfficiency links = load_link_efficiency();
  std::vector<bool> in_use(gpu_type.size(), false);
  std::fill(in_use.begin(), in_use.begin() + static_cast<long>(ranks.size()), true);
  BuiltPlatform platform = build_platform(with_achieved_bandwidth(s.platform, links), in_use, false);
  slow_links(s.simulation.stragglers);
  std::vector<simgrid::s4u::Host*> host_of_rank(platform.gpus.begin(), platform.gpus.begin() + static_cast<long>(ranks.size()));
  ReplayResult result;
  try {
    result = replay(w, host_of_rank, collectives, replay_options(s, links, 0));
  } catch (const Deadlock& e) {
    // Ranks that wait for each other in different orders (a collective or transfer one rank posts
    // before what another rank waits for first) hang on the real machine too. The engine names the
    // stuck tasks ("rank R task T"); the user knows them as events or nodes of a file.
    std::vector<std::string> problems;
    static const std::regex stuck(R"(rank (\d+) task (\d+))");
    const std::string what = e.what();
    for (auto it = std::sregex_iterator(what.begin(), what.end(), stuck); it != std::sregex_iterator(); ++it) {
      const size_t r = std::stoul((*it)[1].str()), t = std::stoul((*it)[2].str());
      if (r < ranks.size() && t < traced.op_of_task[r].size() && traced.op_of_task[r][t] >= 0)
        problems.push_back(fmt::format("{}: {} waits for ever", ranks[r].file,
                                       ranks[r].ops[static_cast<size_t>(traced.op_of_task[r][t])].where));
    }
    problems.insert(problems.begin(),
                    fmt::format("{}: the traces deadlock when replayed: the ranks wait for each other's collectives or "
                                "transfers in orders that never meet; first stuck:",
                                files_of(ranks)));
    throw InputError(problems);
  }

  TraceReplayReport report;
  report.format      = ranks.front().format;
  report.platform    = s.name;
  report.device      = o.device;
  report.recorded_on = o.recorded_on;
  report.step_time_s = result.end_s;
  report.collective_algorithms = result.collective_algorithms;
  for (size_t r = 0; r < ranks.size(); ++r) {
    TraceRankReport row;
    row.rank = static_cast<int>(r);
    row.file = ranks[r].file;
    row.gpu  = timing.device_of_rank[r]->name;
    const RankTimeline& timeline = result.ranks[r];
    for (const auto& t : timeline.tasks)
      row.replayed_step_s = std::max(row.replayed_step_s, t.end);
    row.replayed = rank_metrics(w.ranks[r], timeline);
    const RecordedTimeline recorded = recorded_timeline(ranks[r], traced, r);
    row.recorded_step_s             = recorded.step_s;
    RankTimeline as_recorded;
    as_recorded.rank = static_cast<int>(r);
    for (const auto& [start, end] : recorded.tasks)
      as_recorded.tasks.push_back({start, end});
    row.recorded           = rank_metrics(w.ranks[r], as_recorded);
    row.host_launch_s      = ranks[r].host_launch_s;
    row.launch_gaps        = ranks[r].launch_gaps;
    report.recorded_step_s = std::max(report.recorded_step_s, row.recorded_step_s);
    report.ranks.push_back(std::move(row));
  }
  // As `run` (sim/step_bounds.cpp): no training step lasts a week. A trace whose step does, as
  // recorded or as replayed, holds a duration, a timestamp or a tensor size off by orders of
  // magnitude ("dur": 3.2e13), and a report of it would be read as a measurement.
  constexpr double kLongestStep_s = 7 * 24 * 3600.0;
  for (const auto& row : report.ranks)
    for (const auto& [what, seconds] : {std::pair{"recorded", row.recorded_step_s}, std::pair{"replayed", row.replayed_step_s}})
      if (!(seconds <= kLongestStep_s))
        throw InputError({fmt::format("{}: the {} step lasts {:.3g} s, beyond any training run (a week at most); a "
                                      "duration, timestamp or tensor size in the trace is off by orders of magnitude",
                                      row.file, what, seconds)});
  return report;
}

nlohmann::json to_json(const TraceReplayReport& r)
{
  auto metrics = [](const RankMetrics& m, double step) {
    return nlohmann::json{{"step_time_s", step},
                          {"compute_s", m.compute_s},
                          {"comm_s", m.comm_s},
                          {"exposed_comm_s", m.exposed_comm_s}};
  };
  nlohmann::json doc = {{"format", r.format},
                        {"platform", r.platform},
                        {"device", r.device.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.device)},
                        {"recorded_on", r.recorded_on.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.recorded_on)},
                        {"recorded_step_time_s", r.recorded_step_s},
                        {"step_time_s", r.step_time_s},
                        {"collective_algorithms", r.collective_algorithms},
                        {"ranks", nlohmann::json::array()}};
  for (const auto& row : r.ranks) {
    doc["ranks"].push_back({{"rank", row.rank},
                            {"file", row.file},
                            {"gpu", row.gpu},
                            {"recorded", metrics(row.recorded, row.recorded_step_s)},
                            {"replayed", metrics(row.replayed, row.replayed_step_s)}});
    if (row.host_launch_s >= 0)
      doc["ranks"].back()["host_launch_overhead_s"] = row.host_launch_s;
  }
  return doc;
}

std::string to_table(const TraceReplayReport& r)
{
  auto ms = [](double s) { return fmt::format("{:.3f}", s * 1e3); };
  std::string out = fmt::format("replay of {} {} trace{} on the platform of {}", r.ranks.size(), r.format,
                                r.ranks.size() == 1 ? "" : "s", r.platform);
  if (!r.recorded_on.empty() || !r.device.empty())
    out += fmt::format(", compute re-timed from {} to {}", r.recorded_on.empty() ? "the platform's GPUs" : r.recorded_on,
                       r.device.empty() ? "the platform's GPUs" : r.device);
  out += "\n\n";
  out += fmt::format("  {:<24} {:>12} {:>12}\n", "", "recorded", "replayed");
  out += fmt::format("  {:<24} {:>12} {:>12}\n", "step time (ms)", r.recorded_step_s > 0 ? ms(r.recorded_step_s) : "-",
                     ms(r.step_time_s));
  out += "\n";
  out += fmt::format("  {:>4}  {:>10} {:>10}  {:>10} {:>10}  {:>10} {:>10}  {}\n", "rank", "step rec", "step rep",
                     "comp rec", "comp rep", "exp rec", "exp rep", "gpu");
  for (const auto& row : r.ranks)
    out += fmt::format("  {:>4}  {:>10} {:>10}  {:>10} {:>10}  {:>10} {:>10}  {}\n", row.rank,
                       row.recorded_step_s > 0 ? ms(row.recorded_step_s) : "-", ms(row.replayed_step_s),
                       ms(row.recorded.compute_s), ms(row.replayed.compute_s), ms(row.recorded.exposed_comm_s),
                       ms(row.replayed.exposed_comm_s), row.gpu);
  out += "\n  milliseconds; comp = compute busy, exp = exposed communication (not under compute)\n";
  // What the traces say of their host, for simulation.host_launch_overhead (README, Host launches).
  std::string launches;
  for (const auto& row : r.ranks)
    if (row.host_launch_s >= 0)
      launches += fmt::format("    rank {}: {:.1f} us (median of {} gaps)\n", row.rank, row.host_launch_s * 1e6,
                              row.launch_gaps);
  if (!launches.empty())
    out += "\n  host time per kernel launch (between a thread's launches with no synchronising call; give it as "
           "simulation.host_launch_overhead):\n" +
           launches;
  return out;
}

} // namespace stepsim
