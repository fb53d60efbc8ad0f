#include "sim/simulate.hpp"

#include "models/collectives/collective.hpp"
#include "models/compute/compute_model.hpp"
#include "models/device.hpp"
#include "models/link_calibration.hpp"
#include "workloads/stage_memory.hpp"
#include "sim/engine/graph_check.hpp"
#include "sim/input/json_reader.hpp"
#include "sim/output/metrics.hpp"
#include "sim/core/rank_order.hpp"
#include "sim/engine/link_slowdown.hpp"
#include "sim/engine/replay.hpp"
#include "topologies/collective_groups.hpp"
#include "topologies/placement.hpp"
#include "topologies/preset.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"
#include "workloads/models/model_kind.hpp"
#include "workloads/lower.hpp"
#include "workloads/schedules/schedule.hpp"

#include <simgrid/s4u.hpp>
#include <boost/range/iterator_range.hpp>
#include <xbt/log.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace stepsim {

Scenario parse_scenario(const nlohmann::json& document, const std::string& base_dir)
{
  return parse_scenario(document, base_dir, model_hooks());
}

Scenario scenario_from_json(const nlohmann::json& document, const std::string& base_dir)
{
  Scenario s = parse_scenario(expand_platform_preset(document), base_dir, model_hooks());
  validate(s);
  balance_stage_layers(s);
  return s;
}

Scenario load_scenario(const std::string& file, const std::vector<std::string>& assignments)
{
  nlohmann::json document = read_json_file(file);
  for (const auto& a : assignments)
    set_by_path(document, a);
  return scenario_from_json(document, std::filesystem::path(file).parent_path().string());
}

void validate(const Scenario& s)
{
  Problems problems;
  auto check = [&](auto&& fn) {
    try {
      fn();
    } catch (const InputError& e) {
      for (const auto& p : e.problems())
        problems.add("", p);
    }
  };
  for (size_t i = 0; i < s.platform.node_groups.size(); ++i)
    check([&] { load_device(s.platform.node_groups[i].gpu, fmt::format("platform.node_groups[{}].gpu", i)); });
  check([&] {
    const auto& schedule = ScheduleRegistry::get(s.parallelism.schedule, "parallelism.schedule");
    if (schedule.needs_virtual_stages && s.parallelism.pipeline < 2)
      throw InputError({fmt::format("parallelism.pipeline: schedule \"{}\" needs at least 2 stages, got {}",
                                    s.parallelism.schedule, s.parallelism.pipeline)});
    if (schedule.needs_virtual_stages && s.parallelism.virtual_stages < 2)
      throw InputError({fmt::format("parallelism.virtual_stages: schedule \"{}\" needs virtual_stages >= 2, got {}",
                                    s.parallelism.schedule, s.parallelism.virtual_stages)});
    if (schedule.needs_whole_groups && s.micro_batches_per_replica() % s.parallelism.pipeline != 0)
      throw InputError({fmt::format("training.global_batch_size: schedule \"{}\" needs micro-batches per replica ({}) "
                                    "to be a multiple of pipeline {}",
                                    s.parallelism.schedule, s.micro_batches_per_replica(), s.parallelism.pipeline)});
    if (schedule.needs_full_pipeline && s.micro_batches_per_replica() < s.parallelism.pipeline)
      throw InputError({fmt::format("training.global_batch_size: schedule \"{}\" needs at least as many micro-batches "
                                    "per replica ({}) as pipeline stages ({})",
                                    s.parallelism.schedule, s.micro_batches_per_replica(), s.parallelism.pipeline)});
    if (!schedule.needs_virtual_stages && s.parallelism.virtual_stages > 1)
      throw InputError({fmt::format("parallelism.virtual_stages: {} chunks need an interleaved schedule, not \"{}\"",
                                    s.parallelism.virtual_stages, s.parallelism.schedule)});
  });
  check([&] {
    // An algorithm may not handle every group (halving-doubling needs a power of two, NVLS one
    // NVSwitch node): ask it about the all-reduces of the groups this plan will form, so that a
    // misfit is bad input, not a failed run. simulate() checks every collective once lowered.
    const CollectiveAlgorithm algorithm = scenario_collective_algorithm(s.simulation);
    const auto& first = s.platform.node_groups.front();
    bool nvls         = false;
    try {
      nvls = in_switch_reduction(first);
    } catch (const InputError&) { // an unknown device is reported by its own check
    }
    const int tensor = s.parallelism.tensor, data = s.parallelism.data * s.parallelism.context;
    // Under parallelism.rank_order the tensor group's members are a stride apart.
    const bool tensor_in_node =
        1LL * tensor * dense_grid(s.parallelism).stride(Axis::Tensor) <= first.gpus_per_node;
    const std::pair<const char*, GroupShape> groups[] = {
        {"tensor", tensor_in_node ? group_shape(std::vector<int>(static_cast<size_t>(tensor), 0), nvls) : group_shape(tensor)},
        {"data", group_shape(data)}};
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
  });
  check([&] { ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model"); });
  check([&] { FabricRegistry::get(s.platform.network.topology, "platform.network.topology"); });
  check([&] { check_node_types(s.platform); });
  problems.throw_if_any();
  // Reduced fidelity lets one rank stand for its stage: that needs the whole stage on one GPU type.
  if (s.platform.node_groups.size() > 1 && s.simulation.fidelity == "reduced") {
    const Placement placement = place_ranks(s);
    for (size_t stage = 0; stage < placement.group_of_stage.size(); ++stage)
      if (placement.group_of_stage[stage] < 0)
        problems.add("simulation.fidelity",
                     fmt::format("pipeline stage {} runs on GPUs of several node groups, so one rank cannot stand for "
                                 "it: place whole stages on groups (platform.placement.stages) or use \"full\"",
                                 stage));
  }
  problems.throw_if_any();
}

namespace {

// Returns the stage with the least room left in its device's memory (the one whose breakdown
// the report keeps).
int fill_analytic(const Scenario& s, const Placement& placement, const std::vector<Device>& devices, Report& r)
{
  const auto& shape_schedule = ScheduleRegistry::get(s.parallelism.schedule, "parallelism.schedule");
  PipelineShape shape{s.parallelism.pipeline, static_cast<int>(s.micro_batches_per_replica()),
                      s.parallelism.virtual_stages};
  r.name                  = s.name;
  r.gpus                  = s.platform.total_gpus();
  r.device                = device_names_of(devices);
  r.schedule              = s.parallelism.schedule;
  r.fidelity              = s.simulation.fidelity;
  r.micro_batches         = shape.micro_batches;
  r.model_flops_per_step  = model_flops_per_step(s);
  r.stages.clear();
  r.fits_in_memory = true;
  double tightest  = -1; // the stage closest to (or furthest over) its device's capacity
  int tightest_stage = 0;
  for (int stage = 0; stage < s.parallelism.pipeline; ++stage) {
    StageReport st;
    st.stage                    = stage;
    st.textbook_bubble_fraction = shape_schedule.textbook_bubble(shape);
    MemoryBreakdown m           = stage_memory(s, stage, shape_schedule.peak_in_flight(stage, shape),
                                               shape_schedule.weight_versions ? shape_schedule.weight_versions(stage, shape) : 1);
    const Device& device        = stage_device(s, placement, devices, stage);
    st.memory_bytes             = m.total();
    st.device                   = device.name;
    st.layers                   = model_kind(s.model).reported_layers(s, stage);
    r.fits_in_memory            = r.fits_in_memory && m.total() <= device.memory_bytes;
    if (m.total() / device.memory_bytes >= tightest) {
      tightest                = m.total() / device.memory_bytes;
      tightest_stage          = stage;
      r.memory_peak_bytes     = m.total();
      r.memory_capacity_bytes = device.memory_bytes;
      r.memory                = m;
    }
    r.stages.push_back(st);
  }
  return tightest_stage;
}

// How the replay times the network, and the straggler knobs, from the scenario.
ReplayOptions replay_options(const Scenario& s, const LinkEfficiency& links, int link_count)
{
  ReplayOptions o;
  o.analytic_network          = s.simulation.network_fidelity == "analytic";
  o.collective_base_latency_s = links.collective_base_latency_s;
  for (const auto& st : s.simulation.stragglers)
    if (st.rank >= 0) {
      o.compute_slowdown.resize(static_cast<size_t>(s.platform.total_gpus()), 1.0);
      o.compute_slowdown[static_cast<size_t>(st.rank)] *= st.slowdown;
    }
  o.jitter_sigma = s.simulation.jitter_sigma;
  o.jitter_seed  = s.simulation.jitter_seed;
  o.record_links = link_count > 0;
  return o;
}

void silence_simgrid()
{
  xbt_log_control_set("root.thres:critical");
}

} // namespace

Report analytic_report(const Scenario& s)
{
  Report r;
  fill_analytic(s, place_ranks(s), group_devices(s), r);
  return r;
}

std::string memory_problem(const Scenario& s)
{
  const Placement placement = place_ranks(s);
  Report r;
  const int stage = fill_analytic(s, placement, group_devices(s), r);
  if (r.fits_in_memory)
    return "";
  const int group = std::max(0, placement.group_of_stage[static_cast<size_t>(stage)]);
  constexpr double GiB = 1024.0 * 1024 * 1024;
  const auto& m        = r.memory;
  return fmt::format("platform.node_groups[{}].gpu: does not fit in memory: pipeline stage {} needs {:.2f} GiB per GPU "
                     "(weights {:.2f}, gradients {:.2f}, optimizer {:.2f}, activations {:.2f}, buffers {:.2f} GiB) "
                     "but {} has {:.2f} GiB",
                     group, stage, r.memory_peak_bytes / GiB, m.weights / GiB, m.gradients / GiB, m.optimizer / GiB,
                     m.activations / GiB, m.buffers / GiB, r.stages[static_cast<size_t>(stage)].device,
                     r.memory_capacity_bytes / GiB);
}

Report simulate(const Scenario& s, Timeline* timeline, int link_count)
{
  const Placement placement         = place_ranks(s);
  const std::vector<Device> devices = group_devices(s);
  auto device_of_rank = [&](int rank) -> const Device& {
    return devices[static_cast<size_t>(placement.group_of_rank[static_cast<size_t>(rank)])];
  };
  Report r;
  fill_analytic(s, placement, devices, r);
  // A step time for a job that cannot run would mislead, so a scenario that does not fit is bad
  // input unless asked for. Checked here rather than in validate() so that FLOP and memory queries
  // (analytic_report, plans) still accept it.
  if (!r.fits_in_memory && !s.simulation.allow_oom)
    throw InputError({memory_problem(s) + "; pass --allow-oom (simulation.allow_oom) to simulate it anyway"});

  Workload workload = lower(s);
  describe_groups(workload, s.platform, placement.gpu_of_rank, s.simulation.nccl_channels);
  const CollectiveAlgorithm collectives = scenario_collective_algorithm(s.simulation);
  check_collectives(workload, s.simulation, collectives);
  check_task_graphs(workload); // a graph that would deadlock fails here, naming the rank and task
  std::vector<const Device*> device_of_program;
  for (const auto& program : workload.ranks)
    device_of_program.push_back(&device_of_rank(program.rank));
  assign_work_seconds(workload, device_of_program,
                      ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model"),
                      s.training.precision);
  for (auto& program : workload.ranks)
    program.comm_compute_interference = s.simulation.comm_compute_interference
                                            ? device_of_rank(program.rank).calibration.comm_compute_interference
                                            : 0.0;

  silence_simgrid();
  int argc    = 1;
  char name[] = "stepsim";
  char* argv[] = {name, nullptr};
  simgrid::s4u::Engine engine(&argc, argv);
  configure_network_model();
  // Ranks are placed on GPUs (topologies/placement.hpp); the platform numbers GPUs.
  const std::vector<bool> rank_in_use = ranks_in_use(workload);
  std::vector<bool> gpu_in_use(rank_in_use.size(), false);
  for (size_t rank = 0; rank < rank_in_use.size(); ++rank)
    gpu_in_use[static_cast<size_t>(placement.gpu_of_rank[rank])] = rank_in_use[rank];
  const LinkEfficiency links = load_link_efficiency();
  // CPU hosts and host links only where the job copies to host memory (offload, FCDP).
  bool host_side = false;
  for (const auto& program : workload.ranks)
    for (auto v : boost::make_iterator_range(boost::vertices(program.graph)))
      host_side = host_side || program.graph[v].kind == TaskKind::HostCopy || program.graph[v].stream == Stream::Host;
  BuiltPlatform platform = build_platform(with_achieved_bandwidth(s.platform, links), gpu_in_use, host_side);
  slow_links(s.simulation.stragglers);
  std::vector<simgrid::s4u::Host*> host_of_rank(rank_in_use.size(), nullptr);
  for (size_t rank = 0; rank < rank_in_use.size(); ++rank)
    host_of_rank[rank] = platform.gpus[static_cast<size_t>(placement.gpu_of_rank[rank])];
  ReplayResult result = replay(workload, host_of_rank, collectives, replay_options(s, links, link_count));

  if (!std::isfinite(result.end_s) || result.end_s <= 0)
    throw std::runtime_error(fmt::format("the simulation ended at {} s, which is not a step time", result.end_s));
  r.step_time_s     = result.end_s;
  // Without a flush the step is measured in steady state: on each rank, from the end of the
  // previous step's weight update to the end of its own; the step time is the longest.
  std::vector<Interval> windows(workload.ranks.size(), Interval{0, result.end_s});
  if (workload.steps > 1) {
    r.step_time_s = 0;
    for (size_t i = 0; i < workload.ranks.size(); ++i) {
      const auto& ends = workload.ranks[i].step_ends;
      const auto k     = static_cast<size_t>(workload.measured_step);
      if (ends.size() != static_cast<size_t>(workload.steps) || k == 0)
        throw std::logic_error(fmt::format("rank {}: {} step ends for {} lowered steps", workload.ranks[i].rank,
                                           ends.size(), workload.steps));
      windows[i]    = {result.ranks[i].tasks[ends[k - 1]].end, result.ranks[i].tasks[ends[k]].end};
      r.step_time_s = std::max(r.step_time_s, windows[i].end - windows[i].start);
    }
    if (!std::isfinite(r.step_time_s) || r.step_time_s <= 0)
      throw std::runtime_error(fmt::format("the steady-state step lasted {} s, which is not a step time", r.step_time_s));
  }
  r.simulated_ranks = static_cast<long long>(workload.ranks.size());
  r.activities      = result.activities;
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
                          CollectiveOp::AllToAll, CollectiveOp::Broadcast, CollectiveOp::Reduce}) {
    auto it = result.collective_algorithms.find(collective_name(op));
    r.collective_algorithms[collective_name(op)] = it == result.collective_algorithms.end() ? "" : it->second;
  }
  r.network_fidelity = s.simulation.network_fidelity;
  for (const auto& program : workload.ranks)
    r.comm_compute_interference = std::max(r.comm_compute_interference, program.comm_compute_interference);
  for (size_t i = 0; i < result.links.size() && i < static_cast<size_t>(std::max(0, link_count)); ++i)
    r.links.push_back(LinkReport{result.links[i].name, result.links[i].bytes, result.links[i].busy_s,
                                 result.links[i].busy_s / r.step_time_s});
  const bool what_if = !s.simulation.stragglers.empty() || s.simulation.jitter_sigma > 0;
  for (const auto& w : result.waits)
    if (what_if || link_count > 0)
      r.waits.push_back(WaitReport{w.rank, w.peer, w.group >= 0 ? workload.groups[static_cast<size_t>(w.group)].name : "",
                                   w.seconds});
  if (timeline != nullptr) {
    *timeline               = build_timeline(workload, result);
    timeline->name          = s.name;
    timeline->schedule      = s.parallelism.schedule;
    timeline->micro_batches = r.micro_batches;
  }

  // Per stage: the simulated rank of that stage with the most exposed communication.
  std::vector<bool> seen(r.stages.size(), false);
  for (size_t i = 0; i < workload.ranks.size(); ++i) {
    RankMetrics m   = rank_metrics(workload.ranks[i], result.ranks[i], windows[i]);
    StageReport& st = r.stages[static_cast<size_t>(workload.ranks[i].stage)];
    if (seen[static_cast<size_t>(st.stage)] && m.exposed_comm_s <= st.exposed_comm_s)
      continue;
    seen[static_cast<size_t>(st.stage)] = true;
    st.rank            = workload.ranks[i].rank;
    st.compute_s       = m.compute_s;
    st.comm_s          = m.comm_s;
    st.exposed_comm_s  = m.exposed_comm_s;
    st.bubble_s        = std::max(0.0, r.step_time_s - m.busy_s);
    st.bubble_fraction = st.bubble_s / r.step_time_s;
  }
  for (const auto& st : r.stages) {
    r.bubble_fraction = std::max(r.bubble_fraction, st.bubble_fraction);
    if (st.exposed_comm_s >= r.exposed_comm_s && st.comm_s > 0) {
      r.exposed_comm_s = st.exposed_comm_s;
      r.comm_s         = st.comm_s;
    }
  }
  r.overlap = r.comm_s > 0 ? 1.0 - r.exposed_comm_s / r.comm_s : 1.0;

  const double gpus          = r.gpus;
  r.samples_per_s            = double(s.training.global_batch_size) / r.step_time_s;
  r.tokens_per_s             = r.samples_per_s * s.model.seq_length;
  r.model_tflops_per_gpu     = r.model_flops_per_step / r.step_time_s / gpus / 1e12;
  r.hardware_tflops_per_gpu  = hardware_flops_per_step(s) / r.step_time_s / gpus / 1e12;
  // Over the peak of the GPUs used: with mixed types, their mean peak.
  double peak_sum = 0;
  for (size_t rank = 0; rank < placement.group_of_rank.size(); ++rank)
    peak_sum += device_of_rank(static_cast<int>(rank)).peak(s.training.precision);
  const double peak = peak_sum / gpus;
  r.mfu             = r.model_tflops_per_gpu * 1e12 / peak;
  r.hfu             = r.hardware_tflops_per_gpu * 1e12 / peak;
  // Every GPU of a stage behaves like the stage's reported rank (the stages are its
  // representatives), at its own device's power.
  for (size_t rank = 0; rank < placement.group_of_rank.size(); ++rank) {
    const StageReport& st = r.stages[static_cast<size_t>(placement.stage_of_rank[rank])];
    const Device& device  = device_of_rank(static_cast<int>(rank));
    r.energy_j_per_step += st.compute_s * device.tdp_w + (r.step_time_s - st.compute_s) * device.idle_w;
  }
  const double tokens   = r.tokens_per_s * r.step_time_s; // none for a CNN, which has images
  r.energy_j_per_token  = tokens > 0 ? r.energy_j_per_step / tokens : 0;
  // A report never carries a NaN or an infinity: that would be a wrong answer, not a figure.
  for (double figure : {r.samples_per_s, r.tokens_per_s, r.model_tflops_per_gpu, r.hardware_tflops_per_gpu, r.mfu,
                        r.hfu, r.bubble_fraction, r.comm_s, r.exposed_comm_s, r.overlap, r.energy_j_per_step,
                        r.energy_j_per_token, r.memory_peak_bytes})
    if (!std::isfinite(figure))
      throw std::runtime_error(fmt::format("the simulation of {} produced a non-finite figure", s.name));
  return r;
}

std::string run_in_child(const std::function<std::string()>& body, long* peak_rss_kb)
{
  int fds[2];
  if (pipe(fds) != 0)
    throw std::runtime_error("cannot create a pipe for the simulation process");
  std::fflush(nullptr); // else the child would write the parent's buffered output a second time
  pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error("cannot fork the simulation process");
  if (pid == 0) {
    close(fds[0]);
    std::string text = body();
    size_t written   = 0;
    while (written < text.size()) {
      ssize_t n = write(fds[1], text.data() + written, text.size() - written);
      if (n <= 0)
        break;
      written += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  if (peak_rss_kb != nullptr)
    *peak_rss_kb = usage.ru_maxrss;
  if (text.empty())
    throw std::runtime_error(fmt::format("the simulation process died (status {})", status));
  return text;
}

Report simulate_isolated(const Scenario& s)
{
  nlohmann::json out = nlohmann::json::parse(run_in_child([&] {
    nlohmann::json result;
    try {
      result["report"] = to_json(simulate(s));
    } catch (const InputError& e) {
      result["input_error"] = e.problems();
    } catch (const std::exception& e) {
      result["error"] = e.what();
    }
    return result.dump();
  }));
  if (out.contains("input_error"))
    throw InputError(out["input_error"].get<std::vector<std::string>>());
  if (out.contains("error"))
    throw std::runtime_error(out["error"].get<std::string>());
  return report_from_json(out["report"]);
}

} // namespace stepsim
