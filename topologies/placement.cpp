#include "topologies/placement.hpp"
#include "sim/core/framework.hpp"
#include "sim/core/scenario_check.hpp"

#include "models/compute/compute_model.hpp"
#include "models/link_calibration.hpp"
#include "topologies/nodes/node_type.hpp"
#include "workloads/stage_memory.hpp"
#include "workloads/parallel/layout.hpp"
#include "workloads/schedules/schedule.hpp"
#include "workloads/models/transformer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace stepsim {

Placement place_ranks(const Scenario& s)
{
  const auto& groups = s.platform.node_groups;
  std::vector<int> first_gpu(groups.size() + 1, 0); // group g's GPUs are [first_gpu[g], first_gpu[g+1])
  for (size_t g = 0; g < groups.size(); ++g)
    first_gpu[g + 1] = first_gpu[g] + groups[g].count * groups[g].gpus_per_node;
  const int world     = first_gpu.back();
  const int stages    = s.parallelism.pipeline;
  const Layout layout(s.parallelism);

  Placement p;
  p.gpu_of_rank.resize(static_cast<size_t>(world));
  p.group_of_rank.resize(static_cast<size_t>(world));
  p.stage_of_rank.resize(static_cast<size_t>(world));
  std::vector<int> next_free(first_gpu.begin(), first_gpu.end() - 1);
  for (int rank = 0; rank < world; ++rank) {
    const int stage = rank < layout.world_size() ? layout.coord_of(rank).pipeline : 0;
    int gpu         = rank;
    if (!s.platform.stage_groups.empty())
      gpu = next_free[static_cast<size_t>(s.platform.stage_groups.at(static_cast<size_t>(stage)))]++;
    p.gpu_of_rank[static_cast<size_t>(rank)]   = gpu;
    p.stage_of_rank[static_cast<size_t>(rank)] = stage;
    p.group_of_rank[static_cast<size_t>(rank)] =
        static_cast<int>(std::upper_bound(first_gpu.begin(), first_gpu.end(), gpu) - first_gpu.begin()) - 1;
  }
  p.group_of_stage.assign(static_cast<size_t>(stages), -2); // -2: no rank seen yet
  for (int rank = 0; rank < world; ++rank) {
    int& group      = p.group_of_stage[static_cast<size_t>(p.stage_of_rank[static_cast<size_t>(rank)])];
    const int own   = p.group_of_rank[static_cast<size_t>(rank)];
    group           = group == -2 || group == own ? own : -1;
  }
  std::replace(p.group_of_stage.begin(), p.group_of_stage.end(), -2, -1);
  return p;
}

std::vector<Device> group_devices(const Scenario& s)
{
  std::vector<Device> devices;
  for (size_t g = 0; g < s.platform.node_groups.size(); ++g) {
    const std::string& name = s.platform.node_groups[g].gpu;
    size_t same             = 0;
    while (same < g && s.platform.node_groups[same].gpu != name)
      ++same;
    devices.push_back(same < g ? devices[same]
                               : load_device(name, s.training.framework, fmt::format("platform.node_groups[{}].gpu", g)));
    if (s.simulation.host_launch_overhead_s >= 0)
      devices.back().calibration.host_launch_s = s.simulation.host_launch_overhead_s;
    if (s.simulation.step_host_overhead_s >= 0)
      devices.back().calibration.step_host_s = s.simulation.step_host_overhead_s;
  }
  return devices;
}

const Device& stage_device(const Scenario& s, const Placement& p, const std::vector<Device>& devices, int stage)
{
  const int group = p.group_of_stage.at(static_cast<size_t>(stage));
  if (group >= 0)
    return devices.at(static_cast<size_t>(group));
  const Device* slowest = nullptr;
  for (size_t r = 0; r < p.group_of_rank.size(); ++r) {
    if (p.stage_of_rank[r] != stage)
      continue;
    const Device& d = devices.at(static_cast<size_t>(p.group_of_rank[static_cast<size_t>(r)]));
    if (slowest == nullptr || d.peak(s.training.precision) < slowest->peak(s.training.precision))
      slowest = &d;
  }
  return *slowest;
}

std::string device_names_of(const std::vector<Device>& devices)
{
  std::string out;
  for (size_t i = 0; i < devices.size(); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j)
      seen = seen || devices[j].name == devices[i].name;
    if (!seen)
      out += (out.empty() ? "" : " + ") + devices[i].name;
  }
  return out;
}

namespace {

// Seconds of forward + backward (+ recompute) per micro-batch: of one transformer layer, and of
// the embedding and the head that the first and last stages carry on top.
struct StageCosts {
  double layer_s = 0, embedding_s = 0, head_s = 0;
};

StageCosts stage_costs(const Scenario& s, const Device& device)
{
  std::vector<Work> works;
  const TransformerWorks t   = add_transformer_works(s, works);
  const ComputeModel& model  = ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model");
  auto seconds = [&](int work) {
    double total = 0;
    for (const auto& k : works.at(static_cast<size_t>(work)).kernels)
      total += model.kernel_seconds(k, device, s.training.precision);
    return total;
  };
  StageCosts c;
  c.layer_s = seconds(t.attention_forward) + seconds(t.mlp_forward) + seconds(t.attention_backward) +
              seconds(t.mlp_backward);
  if (s.training.recompute == "full") // on average over the layers: a partial recompute rebuilds some
    c.layer_s += s.recomputed_layer_share() * (seconds(t.attention_recompute) + seconds(t.mlp_recompute));
  c.embedding_s = seconds(t.embedding_forward) + seconds(t.embedding_backward);
  c.head_s      = seconds(t.head_forward) + seconds(t.head_backward);
  return c;
}

// A layer's tensor-parallel collectives per micro-batch on its node: an all-reduce of the
// activation (or, with sequence parallelism, an all-gather and a reduce-scatter of it, the same
// bytes) around each block in forward and backward, and again in a full recompute; a ring over
// the tensor group at the node's achieved link bandwidth, 2(t-1)/t of the bytes and 2(t-1) steps
// (models/collectives/ring.cpp). Where the node's fabric is slow (a DGX-1's single NVLink between
// neighbours of its cube mesh) this outweighs the compute, and the split must see it.
double tensor_seconds_per_layer(const Scenario& s, const NodeGroupSpec& node)
{
  const int t = s.parallelism.tensor;
  if (t <= 1 || node.intra_node.bandwidth_Bps <= 0)
    return 0;
  const double blocks = 4 + 2 * s.recomputed_layer_share();
  const double bytes  = activation_bytes(s);
  return blocks * (2.0 * (t - 1) / t * bytes / node.intra_node.bandwidth_Bps + 2.0 * (t - 1) * node.intra_node.latency_s);
}

// Spreads each stage's layers evenly over its chunks, in virtual-stage order (chunk × p + stage).
std::vector<int> by_virtual_stage(const std::vector<int>& per_stage, int chunks)
{
  const int p = static_cast<int>(per_stage.size());
  std::vector<int> out(static_cast<size_t>(p * chunks));
  for (int stage = 0; stage < p; ++stage)
    for (int c = 0; c < chunks; ++c)
      out[static_cast<size_t>(c * p + stage)] = per_stage[static_cast<size_t>(stage)] / chunks +
                                               (c < per_stage[static_cast<size_t>(stage)] % chunks ? 1 : 0);
  return out;
}

} // namespace

void balance_stage_layers(Scenario& s)
{
  if (!s.parallelism.stage_layers_auto)
    return;
  const int p      = s.parallelism.pipeline;
  const int chunks = s.parallelism.virtual_stages;
  const Placement placement         = place_ranks(s);
  const std::vector<Device> devices = group_devices(s);
  const auto& schedule              = ScheduleRegistry::get(s.parallelism.schedule, "parallelism.schedule");
  const PipelineShape shape{p, static_cast<int>(s.micro_batches_per_replica()), chunks};

  std::vector<double> fixed_s(static_cast<size_t>(p), 0), layer_s(static_cast<size_t>(p), 0);
  std::vector<double> capacity(static_cast<size_t>(p), 0);
  const FrameworkProfile& framework = FrameworkRegistry::get(s.training.framework, "training.framework");
  // Each GPU link as transfers achieve it (the replay's platform), for the tensor collectives.
  PlatformSpec rated = s.platform;
  apply_rated_bandwidths(rated);
  const PlatformSpec achieved = with_achieved_bandwidth(rated, link_efficiency());
  for (int stage = 0; stage < p; ++stage) {
    const Device& d    = stage_device(s, placement, devices, stage);
    const StageCosts c = stage_costs(s, d);
    const int group    = placement.group_of_stage[static_cast<size_t>(stage)];
    layer_s[static_cast<size_t>(stage)] =
        c.layer_s + tensor_seconds_per_layer(s, achieved.node_groups[static_cast<size_t>(std::max(0, group))]);
    fixed_s[static_cast<size_t>(stage)] = (stage == 0 ? c.embedding_s : 0) + (stage == p - 1 ? c.head_s : 0);
    capacity[static_cast<size_t>(stage)] = usable_memory_bytes(d.memory_bytes, framework);
  }

  // Every chunk needs one layer; the rest go one at a time where they cost least.
  std::vector<int> layers(static_cast<size_t>(p), chunks);
  Scenario trial = s;
  auto fits_one_more = [&](int stage) {
    std::vector<int> more = layers;
    ++more[static_cast<size_t>(stage)];
    trial.parallelism.stage_layers = by_virtual_stage(more, chunks);
    return stage_memory(trial, stage, schedule.peak_in_flight(stage, shape)).total() <=
           capacity[static_cast<size_t>(stage)];
  };
  for (int left = s.model.num_layers - p * chunks; left > 0; --left) {
    int best = -1, best_fitting = -1;
    double best_s = std::numeric_limits<double>::infinity(), best_fitting_s = best_s;
    for (int stage = 0; stage < p; ++stage) {
      const double t = fixed_s[static_cast<size_t>(stage)] + (layers[static_cast<size_t>(stage)] + 1) * layer_s[static_cast<size_t>(stage)];
      if (t < best_s) {
        best_s = t;
        best   = stage;
      }
      if (t < best_fitting_s && fits_one_more(stage)) {
        best_fitting_s = t;
        best_fitting   = stage;
      }
    }
    // When no stage can take another layer the job does not fit anywhere; the memory check of
    // the simulation then says so, for the split that is fastest.
    ++layers[static_cast<size_t>(best_fitting >= 0 ? best_fitting : best)];
  }
  s.parallelism.stage_layers = by_virtual_stage(layers, chunks);
}

namespace {

// Reduced fidelity lets one rank stand for its stage: that needs the whole stage on one GPU type.
void check_stage_placement(const Scenario& s)
{
  if (s.platform.node_groups.size() <= 1 || s.simulation.fidelity != "reduced")
    return;
  Problems problems;
  const Placement placement = place_ranks(s);
  for (size_t stage = 0; stage < placement.group_of_stage.size(); ++stage)
    if (placement.group_of_stage[stage] < 0)
      problems.add("simulation.fidelity",
                   fmt::format("pipeline stage {} runs on GPUs of several node groups, so one rank cannot stand for "
                               "it: place whole stages on groups (platform.placement.stages) or use \"full\"",
                               stage));
  problems.throw_if_any();
}

const bool checked = ScenarioCheckRegistry::add("stage_placement",
                                                "under reduced fidelity, every pipeline stage on one node group",
                                                ScenarioCheck{check_stage_placement, true});

} // namespace

} // namespace stepsim
