#include "tools/driver/simulate.hpp"

#include "models/collective.hpp"
#include "models/compute_model.hpp"
#include "models/device.hpp"
#include "models/link_calibration.hpp"
#include "models/memory.hpp"
#include "sim/graph_check.hpp"
#include "sim/json_reader.hpp"
#include "sim/metrics.hpp"
#include "sim/replay.hpp"
#include "topologies/platform.hpp"
#include "workloads/cnn.hpp"
#include "workloads/lower.hpp"
#include "workloads/schedule.hpp"

#include <simgrid/s4u.hpp>
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

Scenario scenario_from_json(const nlohmann::json& document, const std::string& base_dir)
{
  Scenario s = parse_scenario(document, base_dir);
  validate(s);
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
    if (!schedule.needs_virtual_stages && s.parallelism.virtual_stages > 1)
      throw InputError({fmt::format("parallelism.virtual_stages: {} chunks need an interleaved schedule, not \"{}\"",
                                    s.parallelism.virtual_stages, s.parallelism.schedule)});
  });
  check([&] {
    // An algorithm may not handle every group size (halving-doubling needs a power of two): ask
    // it about the groups this plan will form, so that a misfit is bad input, not a failed run.
    const auto& algorithm = CollectiveRegistry::get(s.simulation.collective_algorithm, "simulation.collective_algorithm");
    const std::pair<const char*, int> groups[] = {{"tensor", s.parallelism.tensor},
                                                  {"data", s.parallelism.data * s.parallelism.context}};
    for (const auto& [name, n] : groups)
      for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter}) {
        try {
          algorithm.steps(op, n);
        } catch (const std::invalid_argument& e) {
          throw InputError({fmt::format("simulation.collective_algorithm: \"{}\" cannot run the {} group of {}: {}",
                                        s.simulation.collective_algorithm, name, n, e.what())});
        }
      }
  });
  check([&] { ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model"); });
  check([&] { FabricRegistry::get(s.platform.network.topology, "platform.network.topology"); });
  check([&] { check_cnn(s); });
  if (s.platform.node_groups.size() > 1)
    problems.add("platform.node_groups", "several node groups in one job are not supported yet; use one group");
  problems.throw_if_any();
}

namespace {

void fill_analytic(const Scenario& s, const Device& device, Report& r)
{
  const auto& shape_schedule = ScheduleRegistry::get(s.parallelism.schedule, "parallelism.schedule");
  PipelineShape shape{s.parallelism.pipeline, static_cast<int>(s.micro_batches_per_replica()),
                      s.parallelism.virtual_stages};
  r.name                  = s.name;
  r.gpus                  = s.platform.total_gpus();
  r.device                = device.name;
  r.schedule              = s.parallelism.schedule;
  r.fidelity              = s.simulation.fidelity;
  r.micro_batches         = shape.micro_batches;
  r.model_flops_per_step  = model_flops_per_step(s);
  r.memory_capacity_bytes = device.memory_bytes;
  r.stages.clear();
  for (int stage = 0; stage < s.parallelism.pipeline; ++stage) {
    StageReport st;
    st.stage                    = stage;
    st.textbook_bubble_fraction = shape_schedule.textbook_bubble(shape);
    MemoryBreakdown m           = stage_memory(s, stage, shape_schedule.peak_in_flight(stage, shape));
    st.memory_bytes             = m.total();
    if (m.total() >= r.memory_peak_bytes) {
      r.memory_peak_bytes = m.total();
      r.memory            = m;
    }
    r.stages.push_back(st);
  }
  r.fits_in_memory = r.memory_peak_bytes <= device.memory_bytes;
}

void silence_simgrid()
{
  xbt_log_control_set("root.thres:critical");
}

} // namespace

Report analytic_report(const Scenario& s)
{
  Device device = load_device(s.platform.node_groups.front().gpu, "platform.node_groups[0].gpu");
  Report r;
  fill_analytic(s, device, r);
  return r;
}

std::string memory_problem(const Scenario& s)
{
  Report r = analytic_report(s);
  if (r.fits_in_memory)
    return "";
  int stage = 0;
  for (const auto& st : r.stages)
    if (st.memory_bytes >= r.memory_peak_bytes)
      stage = st.stage;
  constexpr double GiB = 1024.0 * 1024 * 1024;
  const auto& m        = r.memory;
  return fmt::format("platform.node_groups[0].gpu: does not fit in memory: pipeline stage {} needs {:.2f} GiB per GPU "
                     "(weights {:.2f}, gradients {:.2f}, optimizer {:.2f}, activations {:.2f}, buffers {:.2f} GiB) "
                     "but {} has {:.2f} GiB",
                     stage, r.memory_peak_bytes / GiB, m.weights / GiB, m.gradients / GiB, m.optimizer / GiB,
                     m.activations / GiB, m.buffers / GiB, r.device, r.memory_capacity_bytes / GiB);
}

Report simulate(const Scenario& s, Timeline* timeline)
{
  Device device = load_device(s.platform.node_groups.front().gpu, "platform.node_groups[0].gpu");
  Report r;
  fill_analytic(s, device, r);
  // A step time for a job that cannot run would mislead, so a scenario that does not fit is bad
  // input unless asked for. Checked here rather than in validate() so that FLOP and memory queries
  // (analytic_report, plans) still accept it.
  if (!r.fits_in_memory && !s.simulation.allow_oom)
    throw InputError({memory_problem(s) + "; pass --allow-oom (simulation.allow_oom) to simulate it anyway"});

  Workload workload = lower(s);
  check_task_graphs(workload); // a graph that would deadlock fails here, naming the rank and task
  assign_work_seconds(workload, device, ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model"),
                      s.training.precision);

  silence_simgrid();
  int argc    = 1;
  char name[] = "stepsim";
  char* argv[] = {name, nullptr};
  simgrid::s4u::Engine engine(&argc, argv);
  configure_network_model();
  BuiltPlatform platform =
      build_platform(with_achieved_bandwidth(s.platform, load_link_efficiency()), ranks_in_use(workload));
  ReplayResult result =
      replay(workload, platform.gpus, CollectiveRegistry::get(s.simulation.collective_algorithm, "simulation.collective_algorithm"));

  if (!std::isfinite(result.end_s) || result.end_s <= 0)
    throw std::runtime_error(fmt::format("the simulation ended at {} s, which is not a step time", result.end_s));
  r.step_time_s     = result.end_s;
  r.simulated_ranks = static_cast<long long>(workload.ranks.size());
  r.activities      = result.activities;
  if (timeline != nullptr) {
    *timeline               = build_timeline(workload, result);
    timeline->name          = s.name;
    timeline->schedule      = s.parallelism.schedule;
    timeline->micro_batches = r.micro_batches;
  }

  // Per stage: the simulated rank of that stage with the most exposed communication.
  std::vector<bool> seen(r.stages.size(), false);
  for (size_t i = 0; i < workload.ranks.size(); ++i) {
    RankMetrics m   = rank_metrics(workload.ranks[i], result.ranks[i]);
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
  const double peak          = device.peak(s.training.precision);
  r.mfu                      = r.model_tflops_per_gpu * 1e12 / peak;
  r.hfu                      = r.hardware_tflops_per_gpu * 1e12 / peak;
  // Every GPU of a stage behaves like the stage's reported rank (the stages are its representatives).
  const double gpus_per_stage = gpus / s.parallelism.pipeline;
  for (const auto& st : r.stages)
    r.energy_j_per_step += gpus_per_stage * (st.compute_s * device.tdp_w + (r.step_time_s - st.compute_s) * device.idle_w);
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
