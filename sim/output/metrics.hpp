// Metrics of the design notes computed from a replayed timeline: compute busy, communication,
// exposed communication and bubble of one rank, each a union of intervals.
#pragma once

#include "sim/engine/replay.hpp"

#include <utility>
#include <vector>

namespace stepsim {

struct Interval {
  double start, end;
};

// Total length of the union of the intervals.
double union_length(std::vector<Interval> intervals);
// Length of the parts of `a` not covered by `b`.
double uncovered_length(std::vector<Interval> a, std::vector<Interval> b);

struct RankMetrics {
  double compute_s = 0, comm_s = 0, exposed_comm_s = 0, busy_s = 0;
  // Of compute_s, the time its kernels waited for the host to issue them (RankTimeline::host_waits).
  double host_wait_s = 0;
};

RankMetrics rank_metrics(const RankProgram& program, const RankTimeline& timeline);
// The same, counting only what falls inside `window` (a steady-state step of a schedule without
// a flush, Workload::steps).
RankMetrics rank_metrics(const RankProgram& program, const RankTimeline& timeline, Interval window);

} // namespace stepsim
