#include "tools/driver/collective_bench.hpp"
#include "tools/driver/process_pool.hpp"

#include "topologies/collective_groups.hpp"

#include "models/collectives/collective.hpp"
#include "models/device.hpp"
#include "models/link_calibration.hpp"
#include "models/collectives/protocol.hpp"
#include "sim/core/input_error.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/input/limits.hpp"
#include "sim/engine/collective_timing.hpp"
#include "sim/engine/replay.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"
#include "workloads/lower.hpp"
#include "sim/simulate.hpp"

#include <simgrid/s4u.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>

namespace stepsim {

std::optional<CollectiveOp> benchmark_op(const std::string& name)
{
  for (CollectiveOp op :
       {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllToAll})
    if (name == collective_name(op))
      return op;
  return std::nullopt;
}

std::vector<int> benchmark_group(const PlatformSpec& platform, int gpus, int per_node)
{
  // The GPUs a group may take, node by node: all of them, or the first per_node of each.
  std::vector<int> candidates;
  for (int g = 0, start = 0; g < static_cast<int>(platform.node_groups.size()); ++g) {
    const auto& group = platform.node_groups[static_cast<size_t>(g)];
    if (per_node > group.gpus_per_node)
      throw InputError({fmt::format("--per-node: node group {} has {} GPUs per node, asked for {}", g,
                                    group.gpus_per_node, per_node)});
    for (int node = 0; node < group.count; ++node, start += group.gpus_per_node)
      for (int local = 0; local < (per_node > 0 ? per_node : group.gpus_per_node); ++local)
        candidates.push_back(start + local);
  }
  const int available = static_cast<int>(candidates.size());
  if (gpus < 0 || gpus > available)
    throw InputError({fmt::format("--gpus: the platform has {} {}, asked for {}", available,
                                  per_node == 1   ? "nodes (--stride takes one GPU per node)"
                                  : per_node > 1 ? fmt::format("GPUs at {} per node (--per-node)", per_node)
                                                 : std::string("GPUs"),
                                  gpus)});
  const int n = gpus == 0 ? available : gpus;
  if (n < 2) {
    if (gpus > 0)
      throw InputError({fmt::format("--gpus: a collective needs at least 2 members, got {}", n)});
    throw InputError({fmt::format("{}: the platform has {} {}: a collective needs at least 2 members to move "
                                  "anything between (nccl-tests on one GPU times a local copy, which stepsim does not)",
                                  per_node == 1 ? "--stride" : per_node > 1 ? "--per-node" : "platform.node_groups",
                                  available, per_node == 1 ? "node" : "GPU")});
  }
  if (per_node > 1 && n % per_node != 0)
    throw InputError({fmt::format("--gpus: {} GPUs at {} per node leave one node short; expected a multiple of {}", n,
                                  per_node, per_node)});
  return std::vector<int>(candidates.begin(), candidates.begin() + n);
}

Workload collective_workload(const PlatformSpec& platform, const std::vector<int>& members, CollectiveOp op,
                             double bytes, bool reduced)
{
  Workload w;
  w.world_size = platform.total_gpus();
  w.groups.push_back(Group{"bench", members, {}, false, 0, {}});
  std::vector<int> ranks = members; // the group keeps its ring order; programs go by rank
  if (reduced) {
    ranks = {members.front()};
    w.peers_may_contend = peers_may_contend(platform);
  }
  std::sort(ranks.begin(), ranks.end());
  w.ranks.reserve(ranks.size());
  for (int rank : ranks) {
    w.ranks.emplace_back();
    w.ranks.back().rank = rank;
    ProgramBuilder b(w.ranks.back());
    b.add(collective_task(Stream::Data, op, 0, bytes));
  }
  describe_groups(w, platform, {}, 0); // which members share a node, NVLS (topologies/collective_groups.hpp)
  return w;
}

double bus_bandwidth_factor(CollectiveOp op, int n)
{
  switch (op) {
  case CollectiveOp::AllReduce: return 2.0 * (n - 1) / n;
  case CollectiveOp::AllGather:
  case CollectiveOp::ReduceScatter:
  case CollectiveOp::AllToAll: return double(n - 1) / n;
  case CollectiveOp::Broadcast:
  case CollectiveOp::Reduce: return 1.0;
  }
  return 1.0;
}

double nccl_tests_iteration_seconds(double collective_s, int gpus_per_thread, const LinkEfficiency& links)
{
  if (gpus_per_thread <= 1)
    return collective_s;
  return std::max(collective_s, gpus_per_thread * links.group_launch_per_gpu_s);
}

bool closed_form_fabric(const PlatformSpec& platform)
{
  const auto& net = platform.network;
  return net.topology == "fat_tree" || net.topology == "rail_optimized";
}

void time_collectives(const PlatformSpec& platform, const std::vector<int>& members, CollectiveOp op,
                      const std::vector<double>& sizes, const std::string& algorithm, bool analytic_network,
                      const std::string& protocol, const std::function<void(size_t, const CollectiveTime&)>& row,
                      int jobs)
{
  if (sizes.empty())
    return;
  const CollectiveAlgorithm chosen =
      with_protocol_choice(collective_choice(algorithm, {}, "--algorithm"), protocol, "--protocol");
  const bool closed_form_fits = closed_form_fabric(platform);
  size_t next = 0;
  run_in_child_lines(
      [&](const std::function<void(const std::string&)>& emit) {
        // The platform, built once for every size: the sizes' workloads hold the same group, so
        // they use the same ranks.
        std::unique_ptr<simgrid::s4u::Engine> engine;
        LinkEfficiency links;
        BuiltPlatform built;
        try {
          engine = start_engine();
          links  = load_link_efficiency();
          built  = build_platform(with_achieved_bandwidth(platform, links),
                                  ranks_in_use(collective_workload(platform, members, op, sizes.front(), false)));
        } catch (const std::exception& e) {
          emit(nlohmann::json{{"error", e.what()}}.dump());
          return;
        }
        auto time_one = [&](double bytes) {
          nlohmann::json result;
          try {
            // The first member stands for the group, as a reduced-fidelity step does (its
            // peers' flows as shadows where they share links), where its collective moves as
            // one transfer per lane: an algorithm whose every member sends to one peer every
            // step (a ring). Otherwise (a tree: the lone member would not wait for the members
            // it stands for), or where one member cannot stand for the others, every member
            // runs. Both workloads hold the same group, so the algorithm that runs is known
            // from the measured paths before either is replayed.
            const Workload lone  = collective_workload(platform, members, op, bytes, true);
            const Workload every = collective_workload(platform, members, op, bytes, false);
            ReplayOptions options;
            options.analytic_network          = analytic_network;
            options.collective_base_latency_s = links.collective_base_latency_s;
            CollectiveTiming timing(every, built.gpus, chosen, true); // for the group's shape alone
            const CollectiveAlgorithm& runs = concrete_algorithm(chosen, op, timing.shape(0), bytes);
            const bool uniform              = runs.uniform_steps && runs.uniform_steps(op, timing.shape(0));
            const bool closed_form = !analytic_network && !uniform && closed_form_fits && members.size() > kFlowMembers;
            options.analytic_network = analytic_network || closed_form;
            result["closed_form"]    = closed_form;
            // The replay runs the algorithm just picked for this group and size, as `chosen`
            // would pick it again: `auto` prices every candidate on the whole group, which on
            // thousands of members costs more than the replay.
            ReplayResult r;
            try {
              r = replay(uniform && !options.analytic_network ? lone : every, built.gpus, runs, options);
            } catch (const SymmetryBroken&) {
              r = replay(every, built.gpus, runs, options);
            }
            result["seconds"]   = r.end_s;
            result["algorithm"] = r.collective_algorithms[collective_name(op)];
          } catch (const std::exception& e) {
            result["error"] = e.what();
          }
          return result.dump();
        };
        // Rows go back in the order of `sizes`, whichever grandchild ends first.
        std::vector<size_t> items(sizes.size());
        for (size_t i = 0; i < items.size(); ++i)
          items[i] = i;
        std::map<size_t, std::string> ended;
        size_t emitted = 0;
        run_in_processes(
            items, std::max(1, jobs), [&](size_t i) { return time_one(sizes[i]); },
            [&](size_t i, std::string text) {
              ended[i] = text.empty() ? nlohmann::json{{"error", "the simulation process died"}}.dump() : std::move(text);
              for (auto at = ended.find(emitted); at != ended.end(); at = ended.find(emitted)) {
                emit(at->second);
                ended.erase(at);
                ++emitted;
              }
            });
      },
      [&](const std::string& line) {
        const auto out = nlohmann::json::parse(line);
        if (out.contains("error"))
          throw std::runtime_error(out["error"].get<std::string>());
        const double bytes   = sizes[next];
        const double seconds = out["seconds"].get<double>();
        if (!std::isfinite(seconds) || seconds <= 0)
          throw std::runtime_error(fmt::format("the {} of {} bytes ended at {} s, which is not a duration",
                                               collective_name(op), bytes, seconds));
        row(next, CollectiveTime{seconds, out["algorithm"].get<std::string>(), out["closed_form"].get<bool>()});
        ++next;
      });
  if (next != sizes.size())
    throw std::runtime_error("the simulation process ended before timing every size");
}

std::vector<CollectiveTime> time_collectives(const PlatformSpec& platform, const std::vector<int>& members,
                                             CollectiveOp op, const std::vector<double>& sizes,
                                             const std::string& algorithm, bool analytic_network,
                                             const std::string& protocol, int jobs)
{
  std::vector<CollectiveTime> out;
  time_collectives(
      platform, members, op, sizes, algorithm, analytic_network, protocol,
      [&](size_t, const CollectiveTime& t) { out.push_back(t); }, jobs);
  return out;
}

CollectiveTime time_collective(const PlatformSpec& platform, const std::vector<int>& members, CollectiveOp op,
                               double bytes, const std::string& algorithm, bool analytic_network,
                               const std::string& protocol)
{
  return time_collectives(platform, members, op, {bytes}, algorithm, analytic_network, protocol).front();
}

} // namespace stepsim

namespace stepsim {

std::vector<std::string> platform_presets()
{
  std::vector<std::string> names;
  const std::filesystem::path dir = std::filesystem::path(config_dir()) / "platforms";
  if (std::filesystem::is_directory(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".json")
        names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Scenario platform_scenario(const std::string& preset, const std::string& platform_file, int nodes,
                           const std::vector<std::string>& sets)
{
  std::string file = platform_file;
  if (!preset.empty()) {
    const auto names = platform_presets();
    if (std::find(names.begin(), names.end(), preset) == names.end()) {
      std::string known, near = closest_name(preset, names);
      for (const auto& n : names)
        known += (known.empty() ? "" : ", ") + n;
      throw InputError({fmt::format("--preset: unknown platform preset \"{}\"{}; presets in configs/platforms/: {}", preset,
                                    near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near), known)});
    }
    file = (std::filesystem::path(config_dir()) / "platforms" / (preset + ".json")).string();
  }
  nlohmann::json doc = read_json_file(file);
  if (!doc.is_object() || !doc.contains("platform") || !doc["platform"].is_object())
    throw InputError({fmt::format("{}: expected an object {{\"platform\": {{...}}}}", file)});
  // A platform file holds its platform, and may hold the simulation settings it is meant with
  // (taken as a scenario's), a name and free text; a misspelled key would be silently ignored.
  static const std::vector<std::string> kKeys = {"platform", "simulation", "name", "description", "sources"};
  std::vector<std::string> unknown;
  for (const auto& [key, value] : doc.items())
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      const std::string near = closest_name(key, kKeys);
      unknown.push_back(fmt::format("{}: unknown key \"{}\" at the top level{}; a platform file holds \"platform\" and "
                                    "optionally \"simulation\", \"name\", \"description\" and \"sources\"",
                                    file, key, near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
    }
  if (!unknown.empty())
    throw InputError(unknown);
  nlohmann::json platform = doc["platform"];
  if (nodes < 0 || nodes > 1 << 17)
    throw InputError({fmt::format("--nodes: expected a node count from 1 to 131072, got {}", nodes)});
  if (nodes > 0 && platform.contains("node_groups") && platform["node_groups"].is_array() &&
      !platform["node_groups"].empty() && platform["node_groups"][0].is_object())
    platform["node_groups"][0]["count"] = nodes;
  // A machine that is a preset but for a figure or two (fewer NICs, another NIC kind): the
  // platform's fields are set before the carrier counts its GPUs, the simulation's after.
  std::vector<std::string> simulation_sets;
  nlohmann::json wrapper = {{"platform", platform}};
  for (const auto& a : sets) {
    if (a.rfind("platform.", 0) == 0)
      set_by_path(wrapper, a);
    else if (a.rfind("simulation.", 0) == 0)
      simulation_sets.push_back(a);
    else
      throw InputError({fmt::format("--set {}: with --preset or --platform, expected a platform.* or simulation.* "
                                    "field (the carried job has no model or plan to set)",
                                    a)});
  }
  platform = wrapper["platform"];
  const long long gpus = platform_gpus(platform);
  if (gpus > limits::kMaxCollectiveBenchGpus)
    throw InputError({fmt::format("{}: {} GPUs; the collective benchmark replays one collective over every GPU, which "
                                  "beyond {} takes many minutes (an 8,192-node ring needed 34 GB); expected at most "
                                  "that many",
                                  nodes > 0 ? "--nodes" : (preset.empty() ? "--platform" : "--preset"), gpus,
                                  limits::kMaxCollectiveBenchGpus)});
  nlohmann::json scenario =
      platform_carrier(preset.empty() ? std::filesystem::path(file).stem().string() : preset, platform);
  if (doc.contains("simulation") && doc["simulation"].is_object())
    for (const auto& [key, value] : doc["simulation"].items())
      scenario["simulation"][key] = value;
  else if (doc.contains("simulation"))
    scenario["simulation"] = doc["simulation"]; // not an object: the parser says what is wrong
  for (const auto& a : simulation_sets)
    set_by_path(scenario, a);
  return scenario_from_json(scenario, std::filesystem::path(file).parent_path().string());
}

} // namespace stepsim
