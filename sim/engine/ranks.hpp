// How the replay's parts name a task and tell which ranks are simulated: a reduced-fidelity run
// replays the programs of some ranks only (Workload::ranks), standing for the others.
#pragma once

#include "sim/core/task_graph.hpp"

#include <vector>

namespace stepsim::engine {

struct TaskRef {
  int rank_index; // into Workload::ranks
  TaskId task;
};

struct SimulatedRanks {
  explicit SimulatedRanks(const Workload& w)
      : index_of(static_cast<size_t>(w.world_size), -1), in_group(w.groups.size(), 0)
  {
    for (size_t i = 0; i < w.ranks.size(); ++i)
      index_of.at(static_cast<size_t>(w.ranks[i].rank)) = static_cast<int>(i);
    for (size_t gi = 0; gi < w.groups.size(); ++gi)
      for (int r : w.groups[gi].ranks)
        in_group[gi] += simulated(r) ? 1 : 0;
  }

  bool simulated(int rank) const { return index_of[static_cast<size_t>(rank)] >= 0; }

  std::vector<int> index_of; // global rank -> index into Workload::ranks, or -1
  std::vector<int> in_group; // simulated members of each group
};

} // namespace stepsim::engine
