// The stages of the road (sim/road.cpp), each taking and returning plain data:
//
//   Scenario ──plan_job──▶ JobPlan ──cost_workload──▶ CostedWorkload ──replay_step──▶ StepReplay
//            ──step_report──▶ Report
//
// plan_job places ranks and fills what needs no simulation (FLOPs, memory per stage);
// cost_workload lowers the job into task graphs and gives every task its duration; replay_step
// replays them on the SimGrid platform; step_report turns what the replay measured into the
// report's figures.
#pragma once

#include "models/collectives/collective.hpp"
#include "models/device.hpp"
#include "models/link_calibration.hpp"
#include "sim/core/report.hpp"
#include "sim/core/scenario.hpp"
#include "sim/core/task_graph.hpp"
#include "sim/engine/replay.hpp"
#include "sim/output/metrics.hpp"
#include "topologies/placement.hpp"

#include <string>
#include <vector>

namespace stepsim {

// Where every rank runs, on which device, and what the job needs of each stage's memory.
struct JobPlan {
  Placement placement;
  std::vector<Device> devices; // per node group
  Report analytic;             // the fields that need no simulation (FLOPs, memory, stages)
  int tightest_stage = 0;      // the stage with the least room left in its device's memory
  const Device& device_of_rank(int rank) const
  {
    return devices[static_cast<size_t>(placement.group_of_rank[static_cast<size_t>(rank)])];
  }
};
JobPlan plan_job(const Scenario& s);
// Why the job does not fit in device memory, naming the stage and its breakdown; "" when it fits.
std::string memory_problem(const JobPlan& job);

// The task graphs of the simulated ranks, every task with its duration, the collectives checked
// against `collectives` and described on the platform.
Workload cost_workload(const Scenario& s, const JobPlan& job, const CollectiveAlgorithm& collectives);

// What the replay measured: every task's start and end, and the measured step of each rank.
struct StepReplay {
  ReplayResult result;
  std::vector<Interval> windows; // per simulated rank: from the step's start to its end
  double step_time_s = 0;
  // Why the reduced workload was replaced by the full one (its simulated ranks could not stand
  // for their peers on this platform, sim/engine/shadows.hpp); "" when it ran as lowered.
  std::string full_fidelity_reason;
};
// How the replay times the network (network_fidelity, the calibrated base latency of a
// collective) and the straggler and jitter knobs, from the scenario; with `link_count` > 0 it
// records what each link carried. The recorded traces' replay (sim/trace_replay.hpp) takes it too.
ReplayOptions replay_options(const Scenario& s, const LinkEfficiency& links, int link_count);

// Replaces `workload` with the full-fidelity one when its representatives cannot stand for their
// peers (StepReplay::full_fidelity_reason).
StepReplay replay_step(const Scenario& s, const JobPlan& job, Workload& workload,
                       const CollectiveAlgorithm& collectives, int link_count);

Report step_report(const Scenario& s, const JobPlan& job, const Workload& workload, const StepReplay& step,
                   int link_count);

// A report whose step lasts beyond any training run, or with no throughput, is no prediction:
// throws InputError naming the input that made the step that long (sim/step_bounds.cpp).
void check_step_bounds(const Scenario& s, const Report& r);

} // namespace stepsim
