// Which tasks may start, and when each ran.
//
// Activities are created lazily: a task becomes ready only when its last predecessor has
// finished (own in-degree counters), because building the whole DAG up front is super-linear in
// SimGrid 3.32. The replay's owner takes ready tasks in order and hands each to the part that
// runs its kind; the parts report here when a task begins and ends.
#pragma once

#include "sim/engine/ranks.hpp"
#include "sim/engine/replay.hpp"

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace stepsim::engine {

class Scheduler {
public:
  // Told when a task begins and when it ends (compute's interference counts the collectives in
  // flight).
  class Watcher {
  public:
    virtual void began(const TaskRef& t) = 0;
    virtual void ended(const TaskRef& t) = 0;

  protected:
    ~Watcher() = default;
  };

  explicit Scheduler(const Workload& w);
  void watch(Watcher& watcher) { watcher_ = &watcher; }

  const Task& task_of(const TaskRef& t) const { return w_.ranks[t.rank_index].graph[t.task]; }
  TaskTiming& timing(const TaskRef& t) { return timelines_[t.rank_index].tasks[t.task]; }

  // The task starts now, unless it already has.
  void begin(const TaskRef& t);
  // The task ends now (and starts now if it had not).
  void complete(const TaskRef& t);
  // The task ran over [start, end]: its successors whose last predecessor it was become ready.
  void finish(const TaskRef& t, double start, double end);
  // The task belongs to a running chain, which finishes it itself: never ready on its own.
  void claim(const TaskRef& t) { state_[t.rank_index][t.task].claimed = 1; }
  // True when task `next` of the rank waits for the task just before it and otherwise only for
  // tasks from `first` on: it may join a chain running tasks first .. next-1 (compute.hpp).
  bool may_join_chain(int rank_index, TaskId next, TaskId first) const
  {
    const auto& s = state_[static_cast<size_t>(rank_index)][next];
    return s.waits_for_previous && s.earliest >= first;
  }

  // True when the task just after `v` is its only successor (then the graph's out-edges need
  // not be read: scheduler.hpp TaskState).
  bool next_only(int rank_index, TaskId v) const { return state_[static_cast<size_t>(rank_index)][v].next_only; }

  // The next ready task, first come first served.
  std::optional<TaskRef> next_ready();

  long long remaining() const { return remaining_; }
  std::string deadlock_message() const;
  std::vector<RankTimeline> take_timelines() { return std::move(timelines_); }

private:
  const Workload& w_;
  Watcher* watcher_ = nullptr;
  std::vector<RankTimeline> timelines_;
  // Per task, side by side (a finished task touches its successors' counters: one cache line
  // each instead of one per array): predecessors not yet finished, the earliest predecessor and
  // whether the task just before it is one (from the graph's out-edges), whether a chain holds
  // it, and whether the task just after it is its only successor. Most tasks' only successor is
  // the next in program order: finish() then reads that one's counter, beside its own, instead of
  // the graph's out-edge rows and targets (each a cache miss when ranks take turns).
  // Six bytes a task (a full-fidelity replay holds millions): task numbers fit in 29 bits, and a
  // task waits for fewer than 65,536 others of its rank (the constructor checks both).
  static constexpr uint32_t kNoEarliest = (1u << 29) - 1;
  static constexpr uint32_t kMaxWaiting = UINT16_MAX;
  struct __attribute__((packed)) TaskState {
    uint16_t waiting_for        = 0;
    uint32_t earliest           : 29 = kNoEarliest;
    uint32_t waits_for_previous : 1  = 0;
    uint32_t claimed            : 1  = 0;
    uint32_t next_only          : 1  = 0;
  };
  static_assert(sizeof(TaskState) == 6);
  std::vector<std::vector<TaskState>> state_;
  std::deque<TaskRef> ready_;
  long long remaining_ = 0;
};

} // namespace stepsim::engine
