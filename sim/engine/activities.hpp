// The SimGrid activities the replay has started, each with what its completion means.
//
// Keep every started ActivityPtr alive until its completion callback has run: dropping the last
// reference to a running activity crashes SimGrid 3.32 (design notes, engine facts). An
// activity's data is its slot in the table plus one; 0 marks one the replay no longer follows.
#pragma once

#include "sim/engine/ranks.hpp"

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>

#include <optional>
#include <variant>
#include <vector>

namespace stepsim::engine {

namespace sg4 = simgrid::s4u;

constexpr double kHostSpeed = 1e9; // GPU hosts run 1e9 "flops" per second: an Exec's amount is nanoseconds

inline double now() { return sg4::Engine::get_clock(); }

// What each kind of activity stands for, with the fields its completion needs.
struct ChainExec { // the Exec of a chain of timed tasks (compute.hpp)
  int chain;
};
struct PointToPointTransfer { // a send/receive pair's transfer (point_to_point.hpp)
  int channel;
};
struct HostCopy { // a copy between a GPU and its node's CPU host
  TaskRef task;
};
struct CollectiveLaunch { // NCCL's launch cost, before the collective's steps (collectives.hpp)
  int instance;
};
struct CollectiveSend { // one send of a member's current step on a lane
  int instance, member, lane;
  int peer; // index into the step's send_to
};
struct CollectiveDelay { // a collective timed by its closed form, or a coalesced one's latency tail
  int instance;
};
struct CoalescedTransfer { // one lane of a coalesced collective
  int instance;
};
struct CollectiveShadow { // a peer's send beside a simulated member's step (shadows.hpp)
  int instance, member, lane;
};
struct LooseShadow { // a peer's send that no simulated task waits for: it only loads the links
};
using Role = std::variant<ChainExec, PointToPointTransfer, HostCopy, CollectiveLaunch, CollectiveSend, CollectiveDelay,
                          CoalescedTransfer, CollectiveShadow, LooseShadow>;

// Data moved between two ranks' GPUs by one activity (for the per-link accounting).
struct Transfer {
  int src = -1, dst = -1; // global ranks; src < 0: not a transfer
  double bytes = 0;
  double start = 0;
};

class LiveActivities {
public:
  struct Live {
    sg4::ActivityPtr activity;
    Role role;
    Transfer transfer{}; // what a transfer moves (src < 0 for other activities), for --links
  };

  explicit LiveActivities(const std::vector<sg4::Host*>& hosts) : hosts_(hosts) {}

  sg4::Host* host(int rank) const { return hosts_[static_cast<size_t>(rank)]; }
  // An Exec on the rank's GPU that takes `seconds`: a delay that moves no data.
  sg4::ExecPtr delay(int rank, double seconds) const;

  // Starts one more activity of the replay (counted in started()).
  size_t launch(sg4::ActivityPtr activity, Role role, const Transfer& transfer = Transfer{});
  // Starts a transfer between two ranks' GPUs, remembered for the link accounting.
  size_t transfer(int src_rank, int dst_rank, double bytes, Role role);
  // Starts `activity` in a free slot, which its data points to.
  size_t occupy(sg4::ActivityPtr activity, Role role, const Transfer& transfer);

  sg4::ActivityPtr& activity(size_t slot) { return live_[slot].activity; }
  // Stops following the activity in `slot` and cancels it; it stays referenced, since SimGrid
  // still calls back on it.
  void cancel(size_t slot);

  // The record of a finished activity, or none for one the replay no longer follows.
  std::optional<Live> completed(const sg4::Activity& activity);

  long long started() const { return started_; }

private:
  const std::vector<sg4::Host*>& hosts_;
  std::vector<Live> live_;
  std::vector<size_t> free_slots_;
  std::vector<sg4::ActivityPtr> finished_;
  std::vector<sg4::ActivityPtr> cancelled_; // execs replaced by a restart; SimGrid calls back on them later
  long long started_ = 0;
};

} // namespace stepsim::engine
