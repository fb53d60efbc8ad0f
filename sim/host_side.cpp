// The host side of a step beside its replay: the data loader (training.input) and checkpoint
// writes (training.checkpoint), replayed on a SimGrid platform of their own
// (sim/engine/input_replay.hpp, checkpoint_replay.hpp) in a child process forked before the
// step's engine. The loader is paced by what the step's replay measured: when the first
// pipeline stage reaches each micro-batch's forward.
#include "sim/host_side.hpp"

#include "sim/core/rank_order.hpp"
#include "sim/engine/checkpoint_replay.hpp"
#include "sim/engine/input_replay.hpp"
#include "sim/simulate.hpp"
#include "topologies/platform.hpp"
#include "workloads/models/model_kind.hpp"

#include <boost/range/iterator_range.hpp>
#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

namespace stepsim {

namespace {

// The node (over all node groups, in platform order) and the index on it of every GPU.
struct GpuSeat {
  int node = 0, local = 0, group = 0;
};
std::vector<GpuSeat> seats(const PlatformSpec& p)
{
  std::vector<GpuSeat> out;
  int node = 0;
  for (size_t g = 0; g < p.node_groups.size(); ++g)
    for (int n = 0; n < p.node_groups[g].count; ++n, ++node)
      for (int local = 0; local < p.node_groups[g].gpus_per_node; ++local)
        out.push_back({node, local, static_cast<int>(g)});
  return out;
}

HostSideNode host_node(const Scenario& s, const JobPlan& job, int group, int gpus)
{
  const NodeGroupSpec& g = s.platform.node_groups[static_cast<size_t>(group)];
  HostSideNode n;
  n.cores               = std::max(1, g.host.cpu_cores);
  n.gpus                = gpus;
  n.host_link_Bps       = g.host.link_bandwidth_Bps > 0 ? g.host.link_bandwidth_Bps
                                                        : job.devices[static_cast<size_t>(group)].host_link_bandwidth_Bps;
  n.host_link_latency_s = g.host.link_latency_s;
  n.memory_Bps          = g.host.memory_bandwidth_Bps;
  n.nvme_Bps            = g.host.nvme_bandwidth_Bps;
  n.nvme_latency_s      = g.host.nvme_latency_s;
  // Without a figure of its own, a node reaches storage through its NICs together.
  n.storage_link_Bps = s.platform.storage.node_bandwidth_Bps > 0 ? s.platform.storage.node_bandwidth_Bps
                                                                 : g.nic.count * g.nic.bandwidth_Bps;
  return n;
}

nlohmann::json spec_to_json(const HostSideSpec& p)
{
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : p.nodes)
    nodes.push_back({n.cores, n.gpus, n.host_link_Bps, n.host_link_latency_s, n.memory_Bps, n.nvme_Bps,
                     n.nvme_latency_s, n.storage_link_Bps});
  return {{"nodes", nodes}, {"storage", {p.storage_Bps, p.storage_latency_s}}};
}

HostSideSpec spec_from_json(const nlohmann::json& j)
{
  HostSideSpec p;
  for (const auto& n : j.at("nodes"))
    p.nodes.push_back({n[0].get<int>(), n[1].get<int>(), n[2].get<double>(), n[3].get<double>(), n[4].get<double>(),
                       n[5].get<double>(), n[6].get<double>(), n[7].get<double>()});
  p.storage_Bps       = j.at("storage")[0].get<double>();
  p.storage_latency_s = j.at("storage")[1].get<double>();
  return p;
}

// When the first pipeline stage starts each micro-batch's forward, from the start of its step.
std::vector<double> forward_starts(const Workload& w, const StepReplay& step, int micro_batches)
{
  std::vector<double> need(static_cast<size_t>(micro_batches), std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < w.ranks.size(); ++i) {
    if (w.ranks[i].stage != 0)
      continue;
    const auto& graph  = w.ranks[i].graph;
    const Interval win = step.windows[i];
    for (auto v : boost::make_iterator_range(boost::vertices(graph))) {
      const Task& t = graph[v];
      const double start = step.result.ranks[i].tasks[v].start;
      if (t.kind != TaskKind::Compute || t.pass != Pass::Forward || t.chunk != 0 || t.micro_batch < 0 ||
          t.micro_batch >= micro_batches || start < win.start)
        continue;
      need[static_cast<size_t>(t.micro_batch)] = std::min(need[static_cast<size_t>(t.micro_batch)], start - win.start);
    }
    break; // one rank of the first stage stands for all
  }
  // A micro-batch with no forward in the measured step (asynchronous schedules number them per
  // step differently) is needed when the one before it is.
  double last = 0;
  for (auto& t : need) {
    if (!std::isfinite(t))
      t = last;
    last = t = std::max(t, last);
  }
  return need;
}

// The closed form of each resource the loaders use, per step: the one with the longest time
// limits the pipeline (a loader is a pipeline of read, decode and copy).
std::string limiting_resource(const InputReplayPlan& p, const std::vector<int>& loaders_on_node)
{
  double cpu = 0, read = 0, copy = 0;
  double storage_bytes = 0;
  for (size_t n = 0; n < p.platform.nodes.size(); ++n) {
    const HostSideNode& node = p.platform.nodes[n];
    const double batches     = double(loaders_on_node[n]) * p.micro_batches;
    cpu = std::max(cpu, batches * p.decode_cpu_s / std::min<double>(node.cores, double(loaders_on_node[n]) * p.workers));
    if (p.from_storage)
      read = std::max(read, batches * p.read_bytes / node.storage_link_Bps);
    else
      read = std::max(read, batches * p.read_bytes / node.nvme_Bps);
    copy = std::max(copy, double(p.micro_batches) * p.device_bytes / node.host_link_Bps);
    copy = std::max(copy, batches * p.device_bytes / node.memory_Bps);
    storage_bytes += batches * p.read_bytes;
  }
  if (p.from_storage)
    read = std::max(read, storage_bytes / p.platform.storage_Bps);
  if (cpu >= read && cpu >= copy)
    return "CPU";
  if (read >= copy)
    return p.from_storage ? "storage" : "NVMe";
  return "host link";
}

struct InputJob {
  InputReplayPlan plan;
  std::vector<int> loaders_on_node;
};

InputJob input_job(const Scenario& s, const JobPlan& job, const Workload& w, const StepReplay& step)
{
  const InputPipelineSpec& in = s.training.input;
  InputJob out;
  InputReplayPlan& p = out.plan;
  // A loader on the first stage's first tensor-parallel rank of every data- and context-parallel
  // coordinate: Megatron builds the data iterator on tensor rank 0 and broadcasts the batch to
  // its tensor-parallel peers (megatron/training/training.py, build_train_valid_test_data_iterators;
  // get_batch in pretrain_gpt.py), and each context-parallel rank loads the whole micro-batch
  // before keeping its share (get_batch_on_this_cp_rank, megatron/training/utils.py). Under plain
  // data parallelism that is every rank.
  const RankGrid grid = dense_grid(s.parallelism);
  const auto where    = seats(s.platform);
  std::map<int, int> node_index; // job node -> index in the host side
  for (int rank = 0; rank < grid.world_size(); ++rank) {
    const AxisCoords c = grid.coords_of(rank);
    if (c[static_cast<size_t>(Axis::Tensor)] != 0 || c[static_cast<size_t>(Axis::Pipeline)] != 0)
      continue;
    const GpuSeat& seat = where.at(static_cast<size_t>(job.placement.gpu_of_rank[static_cast<size_t>(rank)]));
    auto [it, added]    = node_index.emplace(seat.node, static_cast<int>(p.platform.nodes.size()));
    if (added) {
      p.platform.nodes.push_back(host_node(s, job, seat.group, 0));
      out.loaders_on_node.push_back(0);
    }
    HostSideNode& node = p.platform.nodes[static_cast<size_t>(it->second)];
    p.loaders.push_back({it->second, node.gpus});
    node.gpus += 1;
    out.loaders_on_node[static_cast<size_t>(it->second)] += 1;
  }
  p.platform.storage_Bps       = s.platform.storage.bandwidth_Bps;
  p.platform.storage_latency_s = s.platform.storage.latency_s;
  p.workers                    = in.workers;
  p.prefetch_factor            = in.prefetch_factor;
  p.from_storage               = in.source == "storage";
  p.micro_batches              = static_cast<int>(s.micro_batches_per_replica());
  const double samples         = double(s.training.micro_batch_size);
  p.read_bytes                 = samples * in.sample_bytes;
  p.decode_cpu_s               = samples * in.decode_cpu_s;
  p.device_bytes = samples * (in.device_bytes >= 0 ? in.device_bytes : model_kind(s.model).loaded_bytes_per_sample(s));
  p.need_s       = forward_starts(w, step, p.micro_batches);
  p.step_s       = step.step_time_s;
  // From an empty queue the loader needs about window / micro-batches steps to fill it (or drain
  // it, when it cannot keep up); two more and it is in its steady state. Workers take batches
  // in turn, so the steady state repeats every lcm(workers, micro-batches) batches: the
  // measured steps are whole repeats, at least 8 steps.
  const long long window = 1LL * p.workers * p.prefetch_factor;
  const long long warmup = 2 + (window + p.micro_batches - 1) / p.micro_batches;
  const long long repeat = p.workers / std::gcd(p.workers, p.micro_batches);
  p.measured_steps       = static_cast<int>(repeat * ((8 + repeat - 1) / repeat));
  p.steps                = static_cast<int>(warmup + p.measured_steps + 1);
  return out;
}

nlohmann::json input_plan_to_json(const InputReplayPlan& p)
{
  nlohmann::json loaders = nlohmann::json::array();
  for (const auto& l : p.loaders)
    loaders.push_back({l.node, l.gpu});
  return {{"platform", spec_to_json(p.platform)}, {"loaders", loaders},  {"workers", p.workers},
          {"prefetch", p.prefetch_factor},       {"storage", p.from_storage}, {"micro_batches", p.micro_batches},
          {"read", p.read_bytes},                {"decode", p.decode_cpu_s}, {"device", p.device_bytes},
          {"need", p.need_s},                    {"step", p.step_s},        {"steps", p.steps},
          {"measured", p.measured_steps}};
}

InputReplayPlan input_plan_from_json(const nlohmann::json& j)
{
  InputReplayPlan p;
  p.platform = spec_from_json(j.at("platform"));
  for (const auto& l : j.at("loaders"))
    p.loaders.push_back({l[0].get<int>(), l[1].get<int>()});
  p.workers         = j.at("workers");
  p.prefetch_factor = j.at("prefetch");
  p.from_storage    = j.at("storage");
  p.micro_batches   = j.at("micro_batches");
  p.read_bytes      = j.at("read");
  p.decode_cpu_s    = j.at("decode");
  p.device_bytes    = j.at("device");
  p.need_s          = j.at("need").get<std::vector<double>>();
  p.step_s          = j.at("step");
  p.steps           = j.at("steps");
  p.measured_steps  = j.at("measured");
  return p;
}

// The checkpoint's bytes: one copy of the weights (at their training precision) and of the
// optimizer state (fp32 master weights and Adam's moments), which is what Megatron's
// save_checkpoint puts in its state dict (megatron/training/checkpointing.py: the model's and
// the optimizer's state_dict). Per rank of a stage, the state no other rank holds: the stage's
// rank parameters (experts counted once per expert-parallel group), spread evenly over the
// data- and context-parallel replicas, as Megatron-Core's fully parallel save does
// (megatron/core/dist_checkpointing/strategies/fully_parallel.py).
double checkpoint_bytes_of_rank(const Scenario& s, int stage)
{
  const ModelFootprint f = model_kind(s.model).footprint(s, stage, 1);
  // A stage's experts are split over expert × expert_tensor ranks, its dense layers over tensor.
  const auto& p          = s.parallelism;
  const double split     = expert_tensor_size(p) == p.tensor ? 1.0 : double(expert_tensor_size(p)) / p.tensor;
  const double unique    = f.parameters - f.expert_parameters + f.expert_parameters * p.expert * split;
  return unique * (f.element_bytes + f.optimizer_bytes_per_parameter) / (s.parallelism.data * s.parallelism.context);
}

struct CheckpointJob {
  CheckpointReplayPlan plan;
  double bytes = 0;
};

CheckpointJob checkpoint_job(const Scenario& s, const JobPlan& job)
{
  CheckpointJob out;
  CheckpointReplayPlan& p = out.plan;
  const auto where        = seats(s.platform);
  const int world         = static_cast<int>(job.placement.gpu_of_rank.size());
  std::vector<double> stage_bytes(static_cast<size_t>(s.parallelism.pipeline));
  for (int st = 0; st < s.parallelism.pipeline; ++st)
    stage_bytes[static_cast<size_t>(st)] = checkpoint_bytes_of_rank(s, st);
  std::map<int, int> node_index;
  std::vector<std::map<int, double>> by_gpu; // per host-side node: local GPU -> bytes
  auto add = [&](int rank, double bytes) {
    const GpuSeat& seat = where.at(static_cast<size_t>(job.placement.gpu_of_rank[static_cast<size_t>(rank)]));
    auto [it, added]    = node_index.emplace(seat.node, static_cast<int>(p.platform.nodes.size()));
    if (added) {
      p.platform.nodes.push_back(host_node(s, job, seat.group, 0));
      by_gpu.emplace_back();
    }
    by_gpu[static_cast<size_t>(it->second)][seat.local] += bytes;
  };
  for (int rank = 0; rank < world; ++rank)
    out.bytes += stage_bytes[static_cast<size_t>(job.placement.stage_of_rank[static_cast<size_t>(rank)])];
  if (s.training.checkpoint.layout == "gathered") {
    // Everything goes to rank 0 over the training network first, into its node's NICs.
    const double own = stage_bytes[static_cast<size_t>(job.placement.stage_of_rank[0])];
    add(0, out.bytes);
    const NodeGroupSpec& g = s.platform.node_groups[static_cast<size_t>(job.placement.group_of_rank[0])];
    p.gather_bytes         = out.bytes - own;
    p.gather_Bps           = g.nic.count * g.nic.bandwidth_Bps;
  } else {
    for (int rank = 0; rank < world; ++rank)
      add(rank, stage_bytes[static_cast<size_t>(job.placement.stage_of_rank[static_cast<size_t>(rank)])]);
  }
  for (size_t n = 0; n < by_gpu.size(); ++n) {
    const int gpus            = by_gpu[n].rbegin()->first + 1;
    p.platform.nodes[n].gpus  = gpus;
    p.bytes.emplace_back(static_cast<size_t>(gpus), 0.0);
    for (const auto& [local, bytes] : by_gpu[n])
      p.bytes.back()[static_cast<size_t>(local)] = bytes;
  }
  p.platform.storage_Bps       = s.platform.storage.bandwidth_Bps;
  p.platform.storage_latency_s = s.platform.storage.latency_s;
  return out;
}

nlohmann::json checkpoint_plan_to_json(const CheckpointReplayPlan& p)
{
  return {{"platform", spec_to_json(p.platform)}, {"bytes", p.bytes}, {"gather", {p.gather_bytes, p.gather_Bps}}};
}

CheckpointReplayPlan checkpoint_plan_from_json(const nlohmann::json& j)
{
  CheckpointReplayPlan p;
  p.platform     = spec_from_json(j.at("platform"));
  p.bytes        = j.at("bytes").get<std::vector<std::vector<double>>>();
  p.gather_bytes = j.at("gather")[0];
  p.gather_Bps   = j.at("gather")[1];
  return p;
}

// In the child: one engine for both replays, on disjoint copies of the host side.
std::string replay_in_child(const std::string& input)
{
  nlohmann::json result;
  try {
    const auto j = nlohmann::json::parse(input);
    const auto engine = start_engine();
    auto* root = simgrid::s4u::create_full_zone("host-sides"); // copies that never talk to each other
    std::optional<InputReplayPlan> input_plan;
    std::optional<CheckpointReplayPlan> checkpoint_plan;
    std::unique_ptr<InputReplay> input;
    std::unique_ptr<CheckpointReplay> checkpoint;
    if (j.contains("input")) {
      input_plan = input_plan_from_json(j["input"]);
      input      = std::make_unique<InputReplay>(root, *input_plan);
    }
    if (j.contains("checkpoint")) {
      checkpoint_plan = checkpoint_plan_from_json(j["checkpoint"]);
      checkpoint      = std::make_unique<CheckpointReplay>(root, *checkpoint_plan);
    }
    root->seal();
    engine->run();
    if (input)
      result["input"] = {input->result().step_s, input->result().input_path_s};
    if (checkpoint) {
      const auto c         = checkpoint->result();
      result["checkpoint"] = {c.gather_s, c.snapshot_s, c.write_s};
    }
  } catch (const std::exception& e) {
    result["error"] = e.what();
  }
  return result.dump();
}

bool has_host_side(const Scenario& s)
{
  return s.training.input.enabled || s.training.checkpoint.every_steps > 0;
}

} // namespace

HostSideReplay::HostSideReplay(const Scenario& s)
{
  if (has_host_side(s))
    child_ = std::make_unique<DeferredChild>(replay_in_child);
}

HostSideReplay::~HostSideReplay() = default;

HostSide HostSideReplay::run(const Scenario& s, const JobPlan& job, const Workload& workload, const StepReplay& step)
{
  HostSide out;
  out.step_time_s = step.step_time_s;
  if (!child_)
    return out;
  nlohmann::json request;
  InputJob input;
  CheckpointJob checkpoint;
  if (s.training.input.enabled) {
    input            = input_job(s, job, workload, step);
    request["input"] = input_plan_to_json(input.plan);
  }
  if (s.training.checkpoint.every_steps > 0) {
    checkpoint            = checkpoint_job(s, job);
    request["checkpoint"] = checkpoint_plan_to_json(checkpoint.plan);
  }
  const auto answer = nlohmann::json::parse(child_->run(request.dump()));
  child_.reset();
  if (answer.contains("error"))
    throw std::runtime_error(fmt::format("the host-side replay failed: {}", answer["error"].get<std::string>()));
  if (answer.contains("input")) {
    InputReport r;
    r.step_without_input_s = step.step_time_s;
    r.input_path_s         = answer["input"][1].get<double>();
    // The replay's steady state may come out a hair shorter than the step it was paced by
    // (rounding of the clock): no data loader makes a step faster.
    r.stall_s     = std::max(0.0, answer["input"][0].get<double>() - step.step_time_s);
    // Input-bound: waiting for data takes more than a thousandth of the step.
    r.input_bound = r.stall_s > 1e-3 * step.step_time_s;
    r.limited_by  = limiting_resource(input.plan, input.loaders_on_node);
    r.loaders     = static_cast<int>(input.plan.loaders.size());
    r.workers     = input.plan.workers;
    out.step_time_s += r.stall_s;
    out.input = r;
  }
  if (answer.contains("checkpoint")) {
    const CheckpointSpec& c = s.training.checkpoint;
    CheckpointReport r;
    r.every_steps = c.every_steps;
    r.mode        = c.mode;
    r.layout      = c.layout;
    r.bytes       = checkpoint.bytes;
    r.gather_s    = answer["checkpoint"][0].get<double>();
    r.snapshot_s  = answer["checkpoint"][1].get<double>();
    r.write_s     = answer["checkpoint"][2].get<double>();
    // Synchronous: training waits for the gather, the copy to host memory and the write. An
    // asynchronous save waits for the gather and the copy; its write runs behind the next steps,
    // and the next save first waits for it to finish (Megatron-Core's --async-save:
    // maybe_finalize_async_save(blocking=True) before a new one, megatron/training/checkpointing.py).
    const double blocking = r.gather_s + r.snapshot_s + (c.mode == "sync" ? r.write_s : 0.0);
    if (c.mode == "async")
      r.stall_s = std::max(0.0, r.write_s - c.every_steps * out.step_time_s);
    r.step_s      = out.step_time_s + blocking + r.stall_s;
    r.amortized_s = (blocking + r.stall_s) / c.every_steps;
    out.checkpoint = r;
  }
  return out;
}

} // namespace stepsim
