#include "sim/output/metrics.hpp"

#include <algorithm>
#include <limits>

namespace stepsim {

namespace {
std::vector<Interval> merged(std::vector<Interval> v)
{
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) {
    return a.start < b.start || (a.start == b.start && a.end < b.end);
  });
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
} // namespace

double union_length(std::vector<Interval> intervals)
{
  double total = 0;
  for (const auto& i : merged(std::move(intervals)))
    total += i.end - i.start;
  return total;
}

double uncovered_length(std::vector<Interval> a, std::vector<Interval> b)
{
  auto ma = merged(std::move(a));
  auto mb = merged(std::move(b));
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
  RankMetrics m;
  m.compute_s      = union_length(compute);
  m.comm_s         = union_length(comm);
  m.exposed_comm_s = uncovered_length(comm, compute);
  m.busy_s         = m.compute_s + m.exposed_comm_s;
  return m;
}

} // namespace stepsim
