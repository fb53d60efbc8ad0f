// Chains of timed tasks, and how communication slows the compute beside it.
//
// A task is timed when its duration is known before it runs: compute (stretched for stragglers
// and jitter), and a collective timed by its closed form whose group has no other simulated
// member to wait for. Consecutive timed tasks of a rank that nothing else waits on in between
// run as one delay, a chain: the timings are the same, the engine does a fraction of the work (a
// transformer stage's forward pass with its tensor-parallel all-reduces becomes one delay).
//
// NCCL's kernels take SMs and memory bandwidth from the compute kernels beside them. While a
// rank whose device has an interference factor f has a collective in flight on a communication
// stream, its compute chains run at (1-f) of their speed, so compute then takes 1/(1-f) as long.
// When the rank's first such collective starts or its last ends, each running compute chain is
// restarted with the work it has left at the new rate: exact, and a handful of delays per
// collective, where a virtual machine per rank made SimGrid re-solve every VM at every step (up
// to 3x slower).
#pragma once

#include "sim/engine/accounting.hpp"
#include "sim/engine/activities.hpp"
#include "sim/engine/collective_timing.hpp"
#include "sim/engine/parts.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/scheduler.hpp"

#include <utility>
#include <vector>

namespace stepsim::engine {

class Compute final : public Scheduler::Watcher {
public:
  // Throws std::runtime_error for an interference factor that leaves compute no speed.
  Compute(const Workload& w, const ReplayOptions& options, const Parts& parts);

  // How long the task takes, or -1 when that is known only once it runs.
  double timed_seconds(const TaskRef& t);
  // Runs the timed task `t` and the timed tasks after it that may join it, as one chain.
  void start_chain(const TaskRef& t, double first_seconds);
  // The chain's delay has ended: places its tasks in time and finishes them.
  void chain_done(int id);

  // A collective on a communication stream begins or ends: the rank's compute rate may change.
  void began(const TaskRef& t) override;
  void ended(const TaskRef& t) override;

  // The rank's host has waited for its GPU (a torch.cuda.synchronize): it issues the kernels
  // after this from now on, whatever it had run ahead.
  void host_synchronized(int rank_index);
  // The rank's compute tasks that waited for its host to issue their kernels, and how long.
  std::vector<std::pair<TaskId, double>> take_host_waits(int rank_index)
  {
    return std::move(host_waits_[static_cast<size_t>(rank_index)]);
  }

private:
  struct Chain {
    int rank_index = 0;
    TaskId first = 0, last = 0;
    double start = 0;
    std::vector<double> seconds; // of each task, first to last
    // A chain exposed to interference: its slot in the live activities, and from which time it
    // ran at which fraction of the host's speed (one entry per restart), to place its tasks in
    // chain_done.
    bool exposed = false;
    size_t slot  = 0;
    std::vector<std::pair<double, double>> rates;
    double launched_s = 0; // the work (seconds at full speed) its current delay was launched with
  };

  // Stretches the chain's compute tasks to when the rank's host has issued their kernels.
  void wait_for_host(Chain& chain);
  // Stragglers' slowdown and jitter of a compute task.
  double compute_factor(const TaskRef& t) const;
  int allocate_chain(); // a free slot (its vectors cleared by the caller)
  double compute_rate(int rank_index) const;
  void restart_exposed_chains(int rank_index);

  const Workload& w_;
  const ReplayOptions& options_;
  Parts parts_;
  std::vector<Chain> chains_;
  std::vector<int> free_chains_;
  std::vector<int> collectives_in_flight_; // on communication streams, per simulated rank
  // Per simulated rank: its collectives counted in collectives_in_flight_ (a handful at a time).
  std::vector<std::vector<TaskId>> interfering_;
  std::vector<char> interferes_; // per simulated rank: its device has an interference factor
  std::vector<std::vector<int>> exposed_chains_; // per simulated rank: its running compute chains, with interference
  // Per simulated rank: when its host will have issued the compute it was given so far, and the
  // tasks whose kernels waited for it.
  std::vector<double> host_clock_;
  std::vector<std::vector<std::pair<TaskId, double>>> host_waits_;
  bool launches_cost_ = false; // some work's launches cost its host time (Work::host_seconds)
};

} // namespace stepsim::engine
