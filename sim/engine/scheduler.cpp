#include "sim/engine/scheduler.hpp"

#include "sim/engine/activities.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace stepsim::engine {

Scheduler::Scheduler(const Workload& w) : w_(w)
{
  timelines_.resize(w.ranks.size());
  state_.resize(w.ranks.size());
  for (size_t i = 0; i < w.ranks.size(); ++i) {
    const auto& p  = w.ranks[i];
    const size_t n = boost::num_vertices(p.graph);
    if (n >= kNoEarliest)
      throw std::runtime_error(fmt::format("rank {}: {} tasks, more than the replay numbers", p.rank, n));
    auto& timeline = timelines_[i];
    timeline.rank  = p.rank;
    timeline.stage = p.stage;
    timeline.tasks.resize(n);
    auto& state = state_[i];
    state.assign(n, TaskState{});
    for (TaskId u = 0; u < n; ++u)
      for (auto [e, end] = boost::out_edges(u, p.graph); e != end; ++e) {
        TaskState& s = state[boost::target(*e, p.graph)];
        if (s.waiting_for == kMaxWaiting)
          throw std::runtime_error(fmt::format("rank {}: task {} waits for more than {} others, more than the replay counts",
                                               p.rank, boost::target(*e, p.graph), kMaxWaiting));
        ++s.waiting_for;
        s.earliest           = std::min<uint32_t>(s.earliest, static_cast<uint32_t>(u));
        s.waits_for_previous = s.waits_for_previous || u + 1 == boost::target(*e, p.graph) ? 1 : 0;
      }
    for (TaskId u = 0; u < n; ++u) {
      const auto [e, end] = boost::out_edges(u, p.graph);
      state[u].next_only  = end - e == 1 && boost::target(*e, p.graph) == u + 1 ? 1 : 0;
    }
    for (TaskId v = 0; v < n; ++v)
      if (state[v].waiting_for == 0)
        ready_.push_back({static_cast<int>(i), v});
    remaining_ += static_cast<long long>(n);
  }
}

void Scheduler::begin(const TaskRef& t)
{
  if (timing(t).start < 0) {
    timing(t).start = now();
    watcher_->began(t);
  }
}

void Scheduler::complete(const TaskRef& t)
{
  begin(t);
  finish(t, timing(t).start, now());
}

void Scheduler::finish(const TaskRef& t, double start, double end)
{
  timing(t) = TaskTiming{start, end};
  --remaining_;
  watcher_->ended(t);
  const auto& g = w_.ranks[t.rank_index].graph;
  auto& state   = state_[t.rank_index];
  const auto release = [&](TaskId next) {
    // A claimed task belongs to a running chain, which finishes it itself.
    TaskState& s = state[next];
    if (--s.waiting_for == 0 && !s.claimed) {
      // The replay reads the task when it takes it from the queue; ranks take turns, so it is
      // no longer in the cache by then unless fetched now (a full-fidelity replay spent a tenth
      // of its time on that one load).
      __builtin_prefetch(&g[next]);
      ready_.push_back({t.rank_index, next});
    }
  };
  if (state[t.task].next_only) {
    release(t.task + 1);
    return;
  }
  for (auto [e, last] = boost::out_edges(t.task, g); e != last; ++e)
    release(boost::target(*e, g));
}

std::optional<TaskRef> Scheduler::next_ready()
{
  if (ready_.empty())
    return std::nullopt;
  TaskRef t = ready_.front();
  ready_.pop_front();
  return t;
}

std::string Scheduler::deadlock_message() const
{
  std::string stuck;
  int shown = 0;
  for (size_t i = 0; i < w_.ranks.size() && shown < 5; ++i) {
    const auto& g = w_.ranks[i].graph;
    for (TaskId v = 0; v < boost::num_vertices(g) && shown < 5; ++v) {
      if (timelines_[i].tasks[v].end >= 0)
        continue;
      const Task& t = g[v];
      stuck += fmt::format("\n  rank {} task {} ({} on stream {}, micro-batch {})", w_.ranks[i].rank, v,
                           pass_name(t.pass), stream_name(t.stream), t.micro_batch);
      ++shown;
      break;
    }
  }
  return fmt::format("the task graph deadlocks: {} tasks never ran; first stuck tasks:{}", remaining_, stuck);
}

} // namespace stepsim::engine
