#include "tools/driver/collective_bench.hpp"

#include "models/collective.hpp"
#include "models/link_calibration.hpp"
#include "sim/input_error.hpp"
#include "sim/replay.hpp"
#include "topologies/platform.hpp"
#include "tools/driver/simulate.hpp"

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
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

std::vector<int> benchmark_group(const PlatformSpec& platform, int gpus, bool one_per_node)
{
  const int total = platform.total_gpus();
  std::vector<int> first_gpu_of_node;
  for (int g = 0, start = 0; g < static_cast<int>(platform.node_groups.size()); ++g) {
    const auto& group = platform.node_groups[static_cast<size_t>(g)];
    for (int node = 0; node < group.count; ++node, start += group.gpus_per_node)
      first_gpu_of_node.push_back(start);
  }
  const int available = one_per_node ? static_cast<int>(first_gpu_of_node.size()) : total;
  if (gpus < 0 || gpus > available)
    throw InputError({fmt::format("--gpus: the platform has {} {}, asked for {}", available,
                                  one_per_node ? "nodes (--stride takes one GPU per node)" : "GPUs", gpus)});
  const int n = gpus == 0 ? available : gpus;
  if (n < 2)
    throw InputError({fmt::format("--gpus: a collective needs at least 2 members, got {}", n)});
  std::vector<int> members;
  for (int i = 0; i < n; ++i)
    members.push_back(one_per_node ? first_gpu_of_node[static_cast<size_t>(i)] : i);
  return members;
}

Workload collective_workload(const PlatformSpec& platform, const std::vector<int>& members, CollectiveOp op,
                             double bytes)
{
  Workload w;
  w.world_size = platform.total_gpus();
  w.groups.push_back(Group{"bench", members});
  std::vector<int> ranks = members; // the group keeps its ring order; programs go by rank
  std::sort(ranks.begin(), ranks.end());
  w.ranks.reserve(ranks.size());
  for (int rank : ranks) {
    w.ranks.push_back(RankProgram{rank, 0, {}});
    ProgramBuilder b(w.ranks.back());
    Task t;
    t.kind   = TaskKind::Collective;
    t.stream = Stream::Data;
    t.group  = 0;
    t.bytes  = bytes;
    t.op     = op;
    b.add(t);
  }
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

double time_collective(const PlatformSpec& platform, const std::vector<int>& members, CollectiveOp op, double bytes,
                       const std::string& algorithm)
{
  const auto& chosen = CollectiveRegistry::get(algorithm, "--algorithm");
  Workload w         = collective_workload(platform, members, op, bytes);
  auto out           = nlohmann::json::parse(run_in_child([&] {
    nlohmann::json result;
    try {
      xbt_log_control_set("root.thres:critical");
      int argc     = 1;
      char name[]  = "stepsim";
      char* argv[] = {name, nullptr};
      simgrid::s4u::Engine engine(&argc, argv);
      configure_network_model();
      BuiltPlatform built = build_platform(with_achieved_bandwidth(platform, load_link_efficiency()), ranks_in_use(w));
      result["seconds"]   = replay(w, built.gpus, chosen).end_s;
    } catch (const std::exception& e) {
      result["error"] = e.what();
    }
    return result.dump();
  }));
  if (out.contains("error"))
    throw std::runtime_error(out["error"].get<std::string>());
  const double seconds = out["seconds"].get<double>();
  if (!std::isfinite(seconds) || seconds <= 0)
    throw std::runtime_error(fmt::format("the {} of {} bytes ended at {} s, which is not a duration",
                                         collective_name(op), bytes, seconds));
  return seconds;
}

} // namespace stepsim
