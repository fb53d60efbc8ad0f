// What each simulated rank did and when: the replayed task timings joined with the tasks' meaning
// (stream, pass, micro-batch, peer, collective). Plain data built after the replay; the trace and
// Gantt writers read it and nothing in it knows SimGrid.
#pragma once

#include "sim/engine/replay.hpp"
#include "sim/core/task_graph.hpp"

#include <string>
#include <vector>

namespace stepsim {

struct TimelineInterval {
  Stream stream   = Stream::Compute;
  TaskKind kind   = TaskKind::Compute;
  Pass pass       = Pass::Other;
  int micro_batch = -1; // -1: not tied to a micro-batch (gradient buckets, optimizer)
  int chunk       = 0;
  double start_s  = 0;
  double end_s    = 0;
  std::string work;     // Compute: the work's name ("mlp_forward")
  double bytes    = 0;  // Send/Recv/Collective
  int peer        = -1; // Send/Recv: global rank on the other side
  int tag         = 0;  // Send/Recv: equal on both sides of one transfer
  CollectiveOp op = CollectiveOp::AllReduce; // Collective only
  std::string group;                         // Collective: the communicator's name
};

struct TimelineRank {
  int rank  = 0;
  int stage = 0;
  // Sorted by stream, then start time (ties keep the workload's order).
  std::vector<TimelineInterval> intervals;
};

struct Timeline {
  std::string name;        // the scenario's
  std::string schedule;
  int stages        = 1;
  int micro_batches = 0;
  double step_time_s = 0;
  std::vector<TimelineRank> ranks; // the simulated ranks, in increasing rank order
};

// Consecutive compute intervals of one pass of one micro-batch and chunk, a recomputed forward
// counted with the pass it serves (full recompute interleaves it layer by layer with backward):
// what a picture shows as one bar and a trace as one slice.
struct ComputeRun {
  Pass pass       = Pass::Other; // the pass served; Recompute only when nothing else is in the run
  int micro_batch = -1;
  int chunk       = 0;
  double start_s  = 0, end_s = 0;
  double recompute_s = 0;        // time spent recomputing inside the run
  size_t first = 0, last = 0;    // the run's intervals: rank.intervals[first..last]
};
std::vector<ComputeRun> compute_runs(const TimelineRank& rank);

// Tasks that never ran or took no time (start < 0 or end <= start) are left out.
Timeline build_timeline(const Workload& workload, const ReplayResult& result);

// Short label of a pass for pictures: F, B, Bi, W, R, Opt.
const char* pass_letter(Pass p);

} // namespace stepsim
