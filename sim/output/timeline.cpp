#include "sim/output/timeline.hpp"

#include <algorithm>
#include <stdexcept>

namespace stepsim {

Timeline build_timeline(const Workload& workload, const ReplayResult& result)
{
  if (result.ranks.size() != workload.ranks.size())
    throw std::logic_error("build_timeline: the replay result and the workload disagree on the simulated ranks");
  Timeline t;
  t.stages      = workload.stages;
  t.step_time_s = result.end_s;
  for (size_t i = 0; i < workload.ranks.size(); ++i) {
    const RankProgram& program = workload.ranks[i];
    const auto& timings        = result.ranks[i].tasks;
    TimelineRank rank{program.rank, program.stage, {}};
    const auto n = boost::num_vertices(program.graph);
    for (TaskId v = 0; v < n && v < timings.size(); ++v) {
      const TaskTiming& timing = timings[v];
      if (timing.start < 0 || !(timing.end > timing.start))
        continue;
      const Task& task = program.graph[v];
      TimelineInterval interval;
      interval.stream      = task.stream;
      interval.kind        = task.kind;
      interval.pass        = task.pass;
      interval.micro_batch = task.micro_batch;
      interval.chunk       = task.chunk;
      interval.start_s     = timing.start;
      interval.end_s       = timing.end;
      interval.bytes       = task.bytes;
      switch (task.kind) {
      case TaskKind::Compute:
        if (task.work >= 0 && static_cast<size_t>(task.work) < workload.works.size())
          interval.work = workload.works[static_cast<size_t>(task.work)].name;
        break;
      case TaskKind::Send:
      case TaskKind::Recv:
        interval.peer = task.peer;
        interval.tag  = task.tag;
        break;
      case TaskKind::Collective:
        interval.op = task.op;
        if (task.group >= 0 && static_cast<size_t>(task.group) < workload.groups.size())
          interval.group = workload.groups[static_cast<size_t>(task.group)].name;
        break;
      case TaskKind::HostCopy: break;
      }
      rank.intervals.push_back(std::move(interval));
    }
    std::stable_sort(rank.intervals.begin(), rank.intervals.end(),
                     [](const TimelineInterval& a, const TimelineInterval& b) {
                       if (a.stream != b.stream)
                         return a.stream < b.stream;
                       return a.start_s < b.start_s;
                     });
    t.ranks.push_back(std::move(rank));
  }
  return t;
}

std::vector<ComputeRun> compute_runs(const TimelineRank& rank)
{
  std::vector<ComputeRun> runs;
  for (size_t k = 0; k < rank.intervals.size(); ++k) {
    const TimelineInterval& i = rank.intervals[k];
    if (i.stream != Stream::Compute)
      continue;
    const bool recompute = i.pass == Pass::Recompute;
    bool joins           = false;
    if (!runs.empty()) {
      const ComputeRun& last = runs.back();
      joins = last.last + 1 == k && last.micro_batch == i.micro_batch && last.chunk == i.chunk &&
              (recompute || last.pass == Pass::Recompute || last.pass == i.pass);
    }
    if (!joins)
      runs.push_back(ComputeRun{i.pass, i.micro_batch, i.chunk, i.start_s, i.end_s, 0, k, k});
    ComputeRun& run = runs.back();
    run.end_s       = std::max(run.end_s, i.end_s);
    run.last        = k;
    if (recompute)
      run.recompute_s += i.end_s - i.start_s;
    else
      run.pass = i.pass;
  }
  return runs;
}

const char* pass_letter(Pass p)
{
  switch (p) {
  case Pass::Forward: return "F";
  case Pass::Backward: return "B";
  case Pass::BackwardInput: return "Bi";
  case Pass::BackwardWeight: return "W";
  case Pass::Recompute: return "R";
  case Pass::Optimizer: return "Opt";
  case Pass::Other: return "?";
  }
  return "?";
}

} // namespace stepsim
