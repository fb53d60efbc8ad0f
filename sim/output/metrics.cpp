#include "sim/output/metrics.hpp"

#include <algorithm>
#include <limits>

namespace stepsim {

namespace {
// The union of the intervals, as disjoint intervals in order. A rank's tasks are numbered in
// program order, so its intervals mostly come sorted already: the sort (once the largest cost of
// a reduced run's report) runs only when they do not.
std::vector<Interval> merged(std::vector<Interval> v)
{
  const auto before = [](const Interval& a, const Interval& b) {
    return a.start < b.start || (a.start == b.start && a.end < b.end);
  };
  if (!std::is_sorted(v.begin(), v.end(), before))
    std::sort(v.begin(), v.end(), before);
  std::vector<Interval> out;
  for (const auto& i : v) {
    if (i.end <= i.start)
      continue;
    if (!out.empty() && i.start <= out.back().end)
      out.back().end = std::max(out.back().end, i.end);
    else
      out.push_back(i);
  }
  return out;
}

double length(const std::vector<Interval>& disjoint)
{
  double total = 0;
  for (const auto& i : disjoint)
    total += i.end - i.start;
  return total;
}

// Both disjoint and in order (merged).
double uncovered_merged(const std::vector<Interval>& ma, const std::vector<Interval>& mb)
{
  double total = 0;
  size_t j     = 0;
  for (const auto& i : ma) {
    double covered = 0;
    while (j < mb.size() && mb[j].end <= i.start)
      ++j;
    for (size_t k = j; k < mb.size() && mb[k].start < i.end; ++k)
      covered += std::min(i.end, mb[k].end) - std::max(i.start, mb[k].start);
    total += (i.end - i.start) - covered;
  }
  return total;
}
} // namespace

double union_length(std::vector<Interval> intervals) { return length(merged(std::move(intervals))); }

double uncovered_length(std::vector<Interval> a, std::vector<Interval> b)
{
  return uncovered_merged(merged(std::move(a)), merged(std::move(b)));
}

RankMetrics rank_metrics(const RankProgram& program, const RankTimeline& timeline)
{
  return rank_metrics(program, timeline, {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()});
}

RankMetrics rank_metrics(const RankProgram& program, const RankTimeline& timeline, Interval window)
{
  std::vector<Interval> compute, comm;
  for (TaskId v = 0; v < timeline.tasks.size(); ++v) {
    const TaskTiming& t = timeline.tasks[v];
    const double start  = std::max(t.start, window.start);
    const double end    = std::min(t.end, window.end);
    if (end <= start)
      continue;
    const Stream stream = program.graph[v].stream;
    if (stream == Stream::Host) // the node's CPU works (ZeRO-Offload's optimizer); the GPU idles
      continue;
    (is_communication(stream) ? comm : compute).push_back({start, end});
  }
  const auto compute_union = merged(std::move(compute)), comm_union = merged(std::move(comm));
  RankMetrics m;
  m.compute_s      = length(compute_union);
  m.comm_s         = length(comm_union);
  m.exposed_comm_s = uncovered_merged(comm_union, compute_union);
  m.busy_s         = m.compute_s + m.exposed_comm_s;
  // A task's wait for the host counts in the window where the task ends.
  for (const auto& [v, wait] : timeline.host_waits) {
    const TaskTiming& t = timeline.tasks[v];
    if (t.end > window.start && t.end <= window.end)
      m.host_wait_s += std::min(wait, t.end - t.start);
  }
  return m;
}

} // namespace stepsim
