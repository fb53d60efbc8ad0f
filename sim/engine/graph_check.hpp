// Checks a lowered workload, so that a graph that cannot run to the end is an error naming the
// rank and the task instead of a simulation that stalls or reads out of range: references (peer,
// work, group) that point nowhere and a send without its receive (or the reverse) between
// simulated ranks before the replay starts; a cycle inside one rank's graph, or one that only
// appears across ranks once each send is joined to its receive, once a replay is stuck.
#pragma once

#include "sim/core/task_graph.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace stepsim {

// A workload that would deadlock or that the replay engine cannot run. Not an input error: the
// lowering (a schedule, a workload) built it wrong, so the command line exits with 1.
class GraphError : public std::runtime_error {
public:
  explicit GraphError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

private:
  std::vector<std::string> problems_;
};

// "task 12 (forward compute, micro-batch 3, chunk 0, stream compute)".
std::string describe_task(const TaskGraph& graph, TaskId task);

// What to look for: every problem, or all but cycles. Looking for cycles is a depth-first search
// over every task, within each rank and across them (a fifth of a small scenario's run), and a
// graph with a cycle cannot run to its end anyway: the road looks for them only once a replay
// is stuck (Deadlock, replay.hpp), to name the rank and the task.
enum class GraphChecks { All, ButCycles };

// Every problem found, in rank and task order (empty when the workload can run).
std::vector<std::string> find_graph_problems(const Workload& w, GraphChecks checks = GraphChecks::All);
// Throws GraphError listing the problems, if any.
void check_task_graphs(const Workload& w, GraphChecks checks = GraphChecks::All);

} // namespace stepsim
