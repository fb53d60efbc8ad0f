// The road of the design notes, as one function of stage calls (sim/stages.hpp), and the two
// middle stages: costing the workload and replaying it on SimGrid.
#include "sim/simulate.hpp"
#include "sim/stages.hpp"

#include "sim/federated.hpp"
#include "sim/host_side.hpp"

#include "models/compute/compute_model.hpp"
#include "models/link_calibration.hpp"
#include "sim/engine/graph_check.hpp"
#include "sim/engine/link_slowdown.hpp"
#include "topologies/collective_groups.hpp"
#include "topologies/nodes/node_type.hpp"
#include "topologies/platform.hpp"
#include "workloads/lower.hpp"

#include <simgrid/s4u.hpp>
#include <boost/range/iterator_range.hpp>

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace stepsim {

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

Workload cost_workload(const Scenario& s, const JobPlan& job, const CollectiveAlgorithm& collectives)
{
  Workload workload = lower(s);
  describe_groups(workload, s.platform, job.placement.gpu_of_rank, s.simulation.nccl_channels);
  check_collectives(workload, s.simulation, collectives);
  // A reference that points nowhere or a send without its receive fails here; a cycle once the
  // replay is stuck (replay_step).
  check_task_graphs(workload, GraphChecks::ButCycles);
  std::vector<const Device*> device_of_program;
  for (const auto& program : workload.ranks)
    device_of_program.push_back(&job.device_of_rank(program.rank));
  assign_work_seconds(workload, device_of_program,
                      ComputeModelRegistry::get(s.simulation.compute_model, "simulation.compute_model"),
                      s.training.precision);
  for (auto& program : workload.ranks)
    program.comm_compute_interference = s.simulation.comm_compute_interference
                                            ? job.device_of_rank(program.rank).calibration.comm_compute_interference
                                            : 0.0;
  return workload;
}

StepReplay replay_step(const Scenario& s, const JobPlan& job, Workload& workload,
                       const CollectiveAlgorithm& collectives, int link_count)
{
  const auto engine = start_engine();
  // Ranks are placed on GPUs (topologies/placement.hpp); the platform numbers GPUs.
  const std::vector<bool> rank_in_use = ranks_in_use(workload);
  std::vector<bool> gpu_in_use(rank_in_use.size(), false);
  for (size_t rank = 0; rank < rank_in_use.size(); ++rank)
    gpu_in_use[static_cast<size_t>(job.placement.gpu_of_rank[rank])] = rank_in_use[rank];
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
    host_of_rank[rank] = platform.gpus[static_cast<size_t>(job.placement.gpu_of_rank[rank])];
  // A replay that is stuck names the cycle in the graphs that made it so, if there is one.
  const auto run = [&] {
    try {
      return replay(workload, host_of_rank, collectives, replay_options(s, links, link_count));
    } catch (const Deadlock&) {
      check_task_graphs(workload);
      throw;
    }
  };
  StepReplay step;
  try {
    step.result = run();
  } catch (const SymmetryBroken& e) {
    // Every rank instead, on the platform already built: it holds the GPUs of every peer the
    // shadows would have replayed (ranks_in_use), and the engine has run nothing yet.
    Scenario full            = s;
    full.simulation.fidelity = "full";
    workload                 = cost_workload(full, job, collectives);
    for (size_t rank = 0; rank < host_of_rank.size(); ++rank)
      if (host_of_rank[rank] == nullptr)
        throw std::logic_error(fmt::format("rank {} has no GPU in the platform built for the reduced replay", rank));
    step.full_fidelity_reason = e.what();
    step.result               = run();
  }

  if (!std::isfinite(step.result.end_s) || step.result.end_s <= 0)
    throw std::runtime_error(fmt::format("the simulation ended at {} s, which is not a step time", step.result.end_s));
  step.step_time_s     = step.result.end_s;
  // Without a flush the step is measured in steady state: on each rank, from the end of the
  // previous step's weight update to the end of its own; the step time is the longest.
  step.windows.assign(workload.ranks.size(), Interval{0, step.result.end_s});
  if (workload.steps > 1) {
    step.step_time_s = 0;
    for (size_t i = 0; i < workload.ranks.size(); ++i) {
      const auto& ends = workload.ranks[i].step_ends;
      const auto k     = static_cast<size_t>(workload.measured_step);
      if (ends.size() != static_cast<size_t>(workload.steps) || k == 0)
        throw std::logic_error(fmt::format("rank {}: {} step ends for {} lowered steps", workload.ranks[i].rank,
                                           ends.size(), workload.steps));
      step.windows[i]    = {step.result.ranks[i].tasks[ends[k - 1]].end, step.result.ranks[i].tasks[ends[k]].end};
      step.step_time_s = std::max(step.step_time_s, step.windows[i].end - step.windows[i].start);
    }
    if (!std::isfinite(step.step_time_s) || step.step_time_s <= 0)
      throw std::runtime_error(fmt::format("the steady-state step lasted {} s, which is not a step time", step.step_time_s));
  }
  return step;
}

Report simulate(const Scenario& given, Timeline* timeline, int link_count)
{
  // The scenario's own network calibration for this run only (and the children it forks).
  const auto calibration = network_calibration_scope(given.simulation);
  if (given.training.federated.enabled) // a round on edge devices: its own road (sim/federated.hpp)
    return simulate_federated(given);
  const Scenario s  = with_refined_stage_split(given);
  const JobPlan job = plan_job(s);
  // A step time for a job that cannot run would mislead, so a scenario that does not fit is bad
  // input unless asked for. Checked here rather than in validate() so that FLOP and memory queries
  // (analytic_report, plans) still accept it.
  if (!job.analytic.fits_in_memory && !s.simulation.allow_oom)
    throw InputError({memory_problem(job) + "; pass --allow-oom (simulation.allow_oom) to simulate it anyway"});
  const CollectiveAlgorithm collectives = scenario_collective_algorithm(s.simulation);
  HostSideReplay host_side(s); // forks before the step's engine exists
  Workload workload                     = cost_workload(s, job, collectives);
  StepReplay step                       = replay_step(s, job, workload, collectives, link_count);
  // The data loader may hold the step back; the report's figures follow the step it makes.
  const HostSide host = host_side.run(s, job, workload, step);
  step.step_time_s    = host.step_time_s;
  if (timeline != nullptr) {
    *timeline               = build_timeline(workload, step.result);
    timeline->name          = s.name;
    timeline->schedule      = s.parallelism.schedule;
    timeline->micro_batches = job.analytic.micro_batches;
  }
  Report report = step_report(s, job, workload, step, link_count);
  report.input      = host.input;
  report.checkpoint = host.checkpoint;
  check_step_bounds(s, report);
  return report;
}

} // namespace stepsim
