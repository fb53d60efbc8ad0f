// The SimGrid activities the replay has started, each with what its completion means.
//
// Keep every started ActivityPtr alive until its completion callback has run: dropping the last
// reference to a running activity crashes SimGrid 3.32 (design notes, engine facts). An
// activity's data is its slot in the table plus one; 0 marks one the replay no longer follows.
//
// A delay, which moves no data and shares no resource (compute chains, closed-form collectives,
// NCCL's launch costs, latency tails), is a kernel timer of the engine instead of an Exec: SimGrid
// fires it at its date between the flows' events, without an LMM variable, a model action or an
// activity object. An Exec on an idle core costs about 3.3 us of engine time, a timer 0.6 us
// (measured on this 2-core machine, a million of each), and a delay is most of what a
// full-fidelity replay starts. Timers live in one heap for the whole process, so the table
// removes those still pending when the replay is torn down (a replay that throws leaves some).
#pragma once

#include "sim/engine/ranks.hpp"

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Engine.hpp>

#include <functional>
#include <optional>
#include <unordered_map>
#include <variant>
#include <vector>

namespace simgrid::kernel::timer {
class Timer;
}

namespace stepsim::engine {

namespace sg4 = simgrid::s4u;

inline double now() { return sg4::Engine::get_clock(); }

// What each kind of activity stands for, with the fields its completion needs.
struct ChainDelay { // the delay of a chain of timed tasks (compute.hpp)
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
struct CollectiveSend { // one send of a member's step on a lane
  int instance, member, lane;
  int to;   // the member it goes to
  int step; // the step it belongs to
};
struct CollectiveDelay { // a collective timed by its closed form, or a coalesced one's latency tail
  int instance;
};
struct CoalescedTransfer { // one lane of a coalesced collective
  int instance;
};
struct CollectiveShadow { // a peer's send beside a simulated member's step (shadows.hpp)
  int instance, member, lane, step;
};
struct LooseShadow { // a peer's send that no simulated task waits for: it only loads the links
};
using Role = std::variant<ChainDelay, PointToPointTransfer, HostCopy, CollectiveLaunch, CollectiveSend, CollectiveDelay,
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
    sg4::ActivityPtr activity; // none for a delay
    Role role;
    Transfer transfer{}; // what a transfer moves (src < 0 for other activities), for --links
    simgrid::kernel::timer::Timer* timer = nullptr; // a pending delay's
    // Latency a transfer's route owes beyond SimGrid's (sim/core/link_bandwidth.hpp
    // air_latency_owed: device to device over Wi-Fi), waited once its bytes have arrived.
    double owed_latency_s = 0;
  };

  explicit LiveActivities(const std::vector<sg4::Host*>& hosts) : hosts_(hosts) {}
  ~LiveActivities();
  LiveActivities(const LiveActivities&)            = delete;
  LiveActivities& operator=(const LiveActivities&) = delete;

  // Where a delay's end is handed when its timer fires (the replay's owner's dispatch).
  void on_delay_done(std::function<void(const Live&)> done) { delay_done_ = std::move(done); }

  sg4::Host* host(int rank) const { return hosts_[static_cast<size_t>(rank)]; }
  // A delay of `seconds` from now that ends as `role` (counted in started()); returns its slot.
  size_t delay(double seconds, Role role, const Transfer& transfer = Transfer{});
  // Moves the end of the pending delay in `slot` to `seconds` from now (same slot, same role, not
  // counted again).
  void reschedule(size_t slot, double seconds);

  // Starts one more activity of the replay (counted in started()).
  size_t launch(sg4::ActivityPtr activity, Role role, const Transfer& transfer = Transfer{});
  // Starts a transfer between two ranks' GPUs, remembered for the link accounting. It ends once
  // its bytes are in and then the latency its route owes beyond SimGrid's: the air's, and its
  // NICs' transport unless `owes_transport` is false (a ring's step after its first).
  size_t transfer(int src_rank, int dst_rank, double bytes, Role role, bool owes_transport = true);
  // Starts `activity` in a free slot, which its data points to.
  size_t occupy(sg4::ActivityPtr activity, Role role, const Transfer& transfer);

  // The record of a finished activity, or none for one the replay no longer follows.
  std::optional<Live> completed(const sg4::Activity& activity);

  long long started() const { return started_; }

private:
  size_t allocate(Live&& live);
  void fired(size_t slot);

  const std::vector<sg4::Host*>& hosts_;
  std::vector<Live> live_;
  std::vector<size_t> free_slots_;
  std::vector<sg4::ActivityPtr> finished_;
  std::function<void(const Live&)> delay_done_;
  long long started_ = 0;
  std::unordered_map<long long, std::pair<double, double>> owed_; // per (source, destination) rank pair: air, transport
};

} // namespace stepsim::engine
