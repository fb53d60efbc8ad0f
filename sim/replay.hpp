// The replay engine: runs the task graphs of the simulated ranks on a SimGrid platform.
//
// Activities are created lazily: a task becomes a SimGrid activity only when its last
// predecessor has finished (own in-degree counters), because building the whole DAG up front is
// super-linear in SimGrid 3.32. Compute tasks are Execs on the rank's GPU host; point-to-point
// tasks are one transfer once both sides are posted; collectives are expanded step by step into
// transfers by the collective algorithm, or timed by their closed form where no other traffic
// can share their links (sim/collective_timing.hpp). Runs of tasks whose length is known before
// they start, that nothing else waits on in between, run as one Exec (a chain). A group member that is not simulated (reduced fidelity)
// is taken to behave like the simulated ones: its sends are not replayed, and a simulated member
// does not wait for data from it beyond its own pace.
#pragma once

#include "models/collective.hpp"
#include "sim/task_graph.hpp"

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
};

struct ReplayResult {
  std::vector<RankTimeline> ranks;
  double end_s            = 0;
  long long activities    = 0; // SimGrid execs and transfers started
};

// Runs inside the process's SimGrid engine, whose platform must already hold `gpu_of_rank`.
// Throws std::runtime_error when the graphs deadlock (a task that can never start).
ReplayResult replay(const Workload& workload, const std::vector<simgrid::s4u::Host*>& gpu_of_rank,
                    const CollectiveAlgorithm& algorithm);

} // namespace stepsim
