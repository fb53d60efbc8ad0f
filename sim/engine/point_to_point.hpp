// Point-to-point tasks and host copies.
//
// A send and its receive (matched by source, destination and tag) are one transfer once both
// sides are posted; a side whose peer is not simulated does not wait for it. Where the images of
// a transfer between the ranks the two sides stand for would take bandwidth from it (shadows.hpp),
// they move beside it and both sides end when all have arrived. A host copy is one transfer
// between the rank's GPU and its node's CPU host.
#pragma once

#include "sim/engine/accounting.hpp"
#include "sim/engine/activities.hpp"
#include "sim/engine/collective_timing.hpp"
#include "sim/engine/parts.hpp"
#include "sim/engine/scheduler.hpp"

#include <unordered_map>
#include <vector>

namespace stepsim::engine {

class PointToPoint {
public:
  // `analytic_network`: each transfer takes its closed form on its path, no sharing.
  PointToPoint(const Workload& w, bool analytic_network, const Parts& parts)
      : w_(w), analytic_network_(analytic_network), parts_(parts)
  {
  }

  // A send or receive task is ready: it waits for its other side, or its transfer starts.
  void post(const TaskRef& t);
  // The channel's transfer (and its shadows) has arrived: both sides end.
  void transfer_done(int channel);
  long long shadow_flows() const { return shadow_flows_; }
  void post_host_copy(const TaskRef& t);

private:
  struct Channel {
    TaskRef send{-1, 0}, recv{-1, 0};
    int src = 0, dst = 0;
    double bytes = 0;
    double posted_s = 0; // when the first side posted
    int moving      = 1; // its transfer and its shadows (shadows.hpp) still moving
  };

  static long long channel_key(int src, int dst, int tag)
  {
    return (static_cast<long long>(src) * (1LL << 22) + dst) * (1LL << 20) + tag;
  }
  bool c_has_recv(int channel) const { return channels_[static_cast<size_t>(channel)].recv.rank_index >= 0; }

  const Workload& w_;
  bool analytic_network_;
  Parts parts_;
  std::vector<Channel> channels_;
  std::unordered_map<long long, int> channel_ids_;
  long long shadow_flows_ = 0;
};

} // namespace stepsim::engine
