// The replay engine: runs the task graphs of the simulated ranks on a SimGrid platform.
//
// Activities are created lazily: a task becomes a SimGrid activity only when its last
// predecessor has finished (own in-degree counters), because building the whole DAG up front is
// super-linear in SimGrid 3.32. Compute tasks are Execs on the rank's GPU host; point-to-point
// tasks are one transfer once both sides are posted; collectives are expanded step by step into
// transfers by the collective algorithm, or timed by their closed form where no other traffic
// can share their links (sim/engine/collective_timing.hpp). Runs of tasks whose length is known before
// they start, that nothing else waits on in between, run as one Exec (a chain). A group member that is not simulated (reduced fidelity)
// is taken to behave like the simulated ones: its sends are not replayed, and a simulated member
// does not wait for data from it beyond its own pace; a lone simulated member's transfers run on
// the slowest hop of each step over all members (the pace the group's ring or exchange keeps).
// Where the peers' flows would take bandwidth from the simulated ones, they are replayed beside
// them as shadows (sim/engine/shadows.hpp).
#pragma once

#include "models/collectives/collective.hpp"
#include "sim/core/task_graph.hpp"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace simgrid::s4u {
class Host;
}

namespace stepsim {

struct TaskTiming {
  double start = -1; // when data started to move or the kernel started, seconds
  double end   = -1;
};

struct RankTimeline {
  int rank  = 0;
  int stage = 0;
  std::vector<TaskTiming> tasks; // indexed like the rank's TaskGraph vertices
  // The compute tasks that waited for the host to issue their kernels (Work::host_seconds): the
  // task and how long its kernels waited, seconds (sim/engine/compute.cpp).
  std::vector<std::pair<TaskId, double>> host_waits;
};

// How the replay times the network and what it records beyond the timelines.
struct ReplayOptions {
  // Every collective and transfer takes its closed form on its path (latency + bytes over the
  // bottleneck link, per step), whatever else is in flight: no contention, fewer activities.
  bool analytic_network = false;
  // NCCL's fixed cost of launching one collective (its tuner's base latency), added once per
  // collective before its first step, in both network fidelities.
  double collective_base_latency_s = 0;
  // Compute of global rank r takes compute_slowdown[r] times longer (stragglers); empty = 1.
  std::vector<double> compute_slowdown;
  // Each compute task is multiplied by exp(sigma·z - sigma²/2), z ~ N(0,1) drawn from
  // (seed, rank, task): deterministic, mean 1.
  double jitter_sigma  = 0;
  unsigned jitter_seed = 1;
  bool record_links    = false; // fill ReplayResult::links
};

struct LinkTraffic {
  std::string name; // SimGrid link name (split-duplex links end in _UP / _DOWN)
  double bytes  = 0;
  double busy_s = 0; // union of the intervals in which a transfer crossed it
};

struct RankWait {
  int rank = 0, peer = 0;
  int group = -1; // index into Workload::groups, -1 for point to point
  double seconds = 0;
};

// Reduced fidelity's shadow flows (sim/engine/shadows.hpp): links on which the representatives'
// flows would have been short-changed by their peers', the collective groups and transfers
// replayed with their peers' flows, and the shadow transfers started.
struct ShadowUse {
  int short_changed_links = 0, groups = 0, transfers = 0;
  long long flows = 0;
};

struct ReplayResult {
  std::vector<RankTimeline> ranks;
  double end_s            = 0;
  long long activities    = 0; // SimGrid execs and transfers started
  ShadowUse shadows;
  std::vector<LinkTraffic> links; // when ReplayOptions::record_links; busiest first
  std::vector<RankWait> waits;    // summed per (rank, peer, group); largest first
  // Collective type ("all_reduce", ...) -> the algorithm that ran it ("ring", "tree+ring", ...).
  std::map<std::string, std::string> collective_algorithms;
};

// Thrown before anything runs when a reduced-fidelity workload's simulated ranks cannot stand for
// their peers on this platform (sim/engine/shadows.hpp); what() says why. The caller replays the
// full-fidelity workload instead, on the same engine.
struct SymmetryBroken : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The graphs deadlock: tasks that can never start (the message names the first few).
struct Deadlock : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs inside the process's SimGrid engine, whose platform must already hold `gpu_of_rank`.
// Throws Deadlock when the graphs deadlock (a task that can never start).
ReplayResult replay(const Workload& workload, const std::vector<simgrid::s4u::Host*>& gpu_of_rank,
                    const CollectiveAlgorithm& algorithm, const ReplayOptions& options = {});

} // namespace stepsim
