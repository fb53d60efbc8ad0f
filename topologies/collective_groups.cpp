#include "topologies/collective_groups.hpp"
#include "sim/core/rank_order.hpp"
#include "sim/core/scenario_check.hpp"

#include "models/collectives/protocol.hpp"
#include "models/link_calibration.hpp"

#include "models/device.hpp"
#include "sim/core/input_error.hpp"
#include "topologies/nodes/node_type.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace stepsim {

std::vector<int> node_of_gpu(const PlatformSpec& platform)
{
  std::vector<int> out;
  int node = 0;
  for (const auto& g : platform.node_groups)
    for (int i = 0; i < g.count; ++i, ++node)
      out.insert(out.end(), static_cast<size_t>(g.gpus_per_node), node);
  return out;
}

bool in_switch_reduction(const NodeGroupSpec& group)
{
  // NVLS is a feature of the NVSwitch chip (the node type says whether it has one) and of the GPU,
  // and NCCL uses it unless told not to (intra_node.nvls false: NCCL_NVLS_ENABLE=0).
  const NodeType* type = NodeTypeRegistry::find(group.intra_node.type);
  if (group.gpus_per_node < 2 || type == nullptr || !type->in_switch_reduction || !group.intra_node.nvls)
    return false;
  return load_device(group.gpu, "platform.node_groups[].gpu").nvls;
}

void describe_groups(Workload& w, const PlatformSpec& platform, const std::vector<int>& gpu_of_rank, int channels)
{
  const std::vector<int> node = node_of_gpu(platform);
  std::vector<char> reduces;  // per node
  std::vector<double> rate;   // per node: its NVSwitch's reduction rate per GPU (links.json)
  std::vector<char> mesh;     // per node: a link between each two GPUs (an xGMI or NVLink mesh)
  std::vector<char> msccl;    // per node: its RCCL runs MSCCL's programs (intra_node.msccl, xGMI only)
  // NCCL_NVLS_ENABLE=0, or an NCCL_ALGO that enables neither NVLS nor NVLS-tree for all-reduce,
  // leaves the switches' reduction unused (CollNet then gathers inside a node over the links).
  const bool nvls_enabled = (platform.nccl_env.choices.algorithms[0] & (kNcclNvls | kNcclNvlsTree)) != 0;
  for (const auto& g : platform.node_groups) {
    const bool nvls = nvls_enabled && in_switch_reduction(g);
    const NodeType* type = NodeTypeRegistry::find(g.intra_node.type);
    mesh.insert(mesh.end(), static_cast<size_t>(g.count), type != nullptr && type->full_mesh ? 1 : 0);
    // RCCL's MSCCL programs run on AMD's xGMI meshes, not on NVIDIA's NVLink ones (nvlink_mesh).
    const bool rccl = type != nullptr && type->link_class == LinkClass::Xgmi;
    msccl.insert(msccl.end(), static_cast<size_t>(g.count), g.intra_node.msccl && rccl ? 1 : 0);
    reduces.insert(reduces.end(), static_cast<size_t>(g.count), nvls ? 1 : 0);
    rate.insert(rate.end(), static_cast<size_t>(g.count), nvls ? link_efficiency().nvls_reduction_for(g.gpu) : 0.0);
  }
  for (auto& group : w.groups) {
    group.node_of_member.clear();
    for (int rank : group.ranks) {
      const int gpu = gpu_of_rank.empty() ? rank : gpu_of_rank.at(static_cast<size_t>(rank));
      group.node_of_member.push_back(node.at(static_cast<size_t>(gpu)));
    }
    // Every member's node reduces in its NVSwitch: NVLS on one node, NVLS-tree across nodes.
    bool all_reduce_in_switch = !group.node_of_member.empty(), one_node = true;
    bool all_mesh             = !group.node_of_member.empty();
    for (int n : group.node_of_member) {
      all_reduce_in_switch = all_reduce_in_switch && reduces.at(static_cast<size_t>(n));
      all_mesh             = all_mesh && mesh.at(static_cast<size_t>(n));
      one_node             = one_node && n == group.node_of_member.front();
    }
    group.full_mesh = all_mesh;
    group.msccl     = all_mesh && one_node && msccl.at(static_cast<size_t>(group.node_of_member.front()));
    group.in_switch_reduction  = all_reduce_in_switch;
    group.in_switch_reduction_Bps = 0;
    if (all_reduce_in_switch) // the slowest switch paces the pipelined reductions
      for (int n : group.node_of_member) {
        const double r = rate.at(static_cast<size_t>(n));
        if (r > 0 && (group.in_switch_reduction_Bps == 0 || r < group.in_switch_reduction_Bps))
          group.in_switch_reduction_Bps = r;
      }
    group.in_network_reduction = platform.network.sharp && !one_node; // SHARP: CollNet across nodes
    group.channels = channels;
    group.nccl     = platform.nccl_env.choices;
  }
}

CollectiveAlgorithm scenario_collective_algorithm(const SimulationSpec& s)
{
  return with_protocol_choice(
      collective_choice(s.collective_algorithm, s.collective_algorithm_per_op, "simulation.collective_algorithm"),
      s.nccl_protocol, "simulation.nccl_protocol");
}

void check_collectives(const Workload& w, const SimulationSpec& s, const CollectiveAlgorithm& algorithm)
{
  for (const CollectiveKind& t : distinct_collectives(w)) {
    const Group& group = w.groups[static_cast<size_t>(t.group)];
    const GroupShape g = group_shape(group);
    const auto forced  = s.collective_algorithm_per_op.find(collective_name(t.op));
    const bool per_op  = forced != s.collective_algorithm_per_op.end();
    const std::string name = per_op ? forced->second : s.collective_algorithm;
    try {
      const auto& a = concrete_algorithm(algorithm, t.op, g, t.bytes);
      a.steps(t.op, g, t.bytes);
    } catch (const std::invalid_argument& e) {
      throw InputError({fmt::format("simulation.collective_algorithm{}: \"{}\" cannot run the {} group of {}: {}",
                                    per_op ? std::string(".") + collective_name(t.op) : std::string(), name,
                                    group.name.substr(0, group.name.find('/')), group.ranks.size(), e.what())});
    }
  }
}

namespace {

// An algorithm may not handle every group (halving-doubling needs a power of two, NVLS one
// NVSwitch node): ask it about the all-reduces of the groups this plan will form, so that a
// misfit is bad input, not a failed run. simulate() checks every collective once lowered.
void check_collective_algorithm(const Scenario& s)
{
  // "auto" picks among algorithms that take every group (ring, tree; NVLS only where it applies):
  // only a named algorithm can misfit. Asking auto would time each candidate on the group, step
  // by step, which at thousands of ranks costs more than the rest of reading the scenario.
  if (s.simulation.collective_algorithm == "auto" && s.simulation.collective_algorithm_per_op.empty())
    return;
  if (s.platform.node_groups.empty()) // a federated round: refused where it is read
    return;
  const CollectiveAlgorithm algorithm = scenario_collective_algorithm(s.simulation);
  const auto& first = s.platform.node_groups.front();
  bool nvls         = false;
  try {
    nvls = in_switch_reduction(first);
  } catch (const InputError&) { // an unknown device is reported by its own check
  }
  const int tensor = s.parallelism.tensor, data = s.parallelism.data * s.parallelism.context;
  // Under parallelism.rank_order the tensor group's members are a stride apart.
  const bool tensor_in_node = 1LL * tensor * dense_grid(s.parallelism).stride(Axis::Tensor) <= first.gpus_per_node;
  GroupShape data_group              = group_shape(data); // one member per node
  data_group.in_network_reduction    = s.platform.network.sharp && data > 1;
  const std::pair<const char*, GroupShape> groups[] = {
      {"tensor", tensor_in_node ? group_shape(std::vector<int>(static_cast<size_t>(tensor), 0), nvls) : group_shape(tensor)},
      {"data", data_group}};
  const auto forced = s.simulation.collective_algorithm_per_op.find("all_reduce");
  const bool per_op = forced != s.simulation.collective_algorithm_per_op.end();
  for (const auto& [name, g] : groups) {
    try {
      concrete_algorithm(algorithm, CollectiveOp::AllReduce, g, 1e6).steps(CollectiveOp::AllReduce, g, 1e6);
    } catch (const std::invalid_argument& e) {
      throw InputError({fmt::format("simulation.collective_algorithm{}: \"{}\" cannot run the {} group of {}: {}",
                                    per_op ? ".all_reduce" : "", per_op ? forced->second : s.simulation.collective_algorithm,
                                    name, g.n, e.what())});
    }
  }
}

// The platform's NCCL_ALGO (platform.nccl_env) may leave a collective of the plan no algorithm
// of `auto`'s, which NCCL fails ("no algorithm/protocol available"): ask auto's candidates (no
// timing) about the collectives the plan's tensor and data groups run, so that `stepsim
// validate` says so too. simulate() checks every collective once lowered, protocols included.
void check_nccl_env(const Scenario& s)
{
  const NcclChoices& enabled = s.platform.nccl_env.choices;
  if (enabled == NcclChoices{} || s.platform.node_groups.empty())
    return;
  const auto& chosen = s.simulation.collective_algorithm_per_op;
  const auto& all    = s.simulation.collective_algorithm;
  auto tuned = [&](CollectiveOp op) { // auto picks this type's algorithm
    const auto it = chosen.find(collective_name(op));
    return (it == chosen.end() ? all : it->second) == "auto";
  };
  const auto& first = s.platform.node_groups.front();
  bool nvls         = false;
  try {
    nvls = (enabled.algorithms[0] & (kNcclNvls | kNcclNvlsTree)) != 0 && in_switch_reduction(first);
  } catch (const InputError&) { // an unknown device is reported by its own check
  }
  const auto& p    = s.parallelism;
  const int tensor = p.tensor, data = p.data * p.context;
  // A group of `members` ranks `stride` apart, on nodes of the first group's size.
  auto plan_group = [&](int members, long long stride) {
    const long long per_node = std::clamp<long long>(first.gpus_per_node / std::max(1LL, stride), 1, members);
    std::vector<int> node(static_cast<size_t>(members));
    for (int i = 0; i < members; ++i)
      node[static_cast<size_t>(i)] = static_cast<int>(i / per_node);
    GroupShape g           = group_shape(node, nvls);
    g.in_network_reduction = s.platform.network.sharp && g.nodes() > 1;
    return g;
  };
  const auto grid         = dense_grid(p);
  GroupShape tensor_group = plan_group(tensor, grid.stride(Axis::Tensor));
  // data x context: the context ranks sit inside the data ranks in Megatron's orders.
  GroupShape data_group = plan_group(data, grid.stride(p.context > 1 ? Axis::Context : Axis::Data));
  tensor_group.nccl = data_group.nccl = enabled;
  using Ops = std::vector<CollectiveOp>;
  const Ops sharded = {CollectiveOp::ReduceScatter, CollectiveOp::AllGather}, reduced = {CollectiveOp::AllReduce};
  const std::pair<const GroupShape*, Ops> runs[] = {
      {&tensor_group, tensor > 1 ? (p.sequence_parallel ? sharded : reduced) : Ops{}},
      {&data_group, data > 1 ? (p.zero_stage >= 1 ? sharded : reduced) : Ops{}}};
  const CollectiveAlgorithm& automatic = CollectiveRegistry::get("auto", "simulation.collective_algorithm");
  for (const auto& [g, ops] : runs)
    for (CollectiveOp op : ops)
      if (tuned(op))
        automatic.candidates(op, *g); // throws InputError naming platform.nccl_env.NCCL_ALGO
}

const bool checked_nccl_env = ScenarioCheckRegistry::add(
    "nccl_env", "the platform's NCCL_ALGO leaves every collective of the tensor and data groups an algorithm",
    ScenarioCheck{check_nccl_env});

const bool checked = ScenarioCheckRegistry::add("collective_algorithm",
                                                "the collective algorithm can run the plan's tensor and data groups",
                                                ScenarioCheck{check_collective_algorithm});

} // namespace

} // namespace stepsim
