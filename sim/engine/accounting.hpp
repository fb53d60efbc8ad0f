// What the replay records beside the timelines: the bytes and busy time of each link a transfer
// crossed (ReplayOptions::record_links), and the seconds each rank waited for a peer.
#pragma once

#include "sim/engine/collective_timing.hpp"
#include "sim/engine/replay.hpp"

#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace stepsim::engine {

class Accounting {
public:
  Accounting(const Workload& w, const CollectiveAlgorithm& algorithm, CollectiveTiming& timing, bool record_links)
      : w_(w), algorithm_(algorithm), timing_(timing), record_links_(record_links)
  {
  }

  bool records_links() const { return record_links_; }
  // `bytes` moved from one rank's GPU to another's over [start, end].
  void carried(int src_rank, int dst_rank, double bytes, double start, double end);
  // What member `member` of a closed-form collective sends, spread over [start, end].
  void carried_by_collective(int group, CollectiveOp op, double bytes, int member, double start, double end);
  // `rank` waited `seconds` for `peer` (group -1 for point to point).
  void waited(int rank, int peer, int group, double seconds);

  // Fills result.links (busiest first) and result.waits (largest first).
  void export_to(ReplayResult& result);

private:
  struct LinkUsage {
    double bytes = 0;
    std::vector<std::pair<double, double>> intervals;
  };

  const Workload& w_;
  const CollectiveAlgorithm& algorithm_;
  CollectiveTiming& timing_;
  bool record_links_;
  std::map<const simgrid::s4u::Link*, LinkUsage> link_usage_; // output sorted by name and figures, not by pointer
  std::map<std::tuple<int, int, int>, double> waits_;           // (rank, peer, group) -> seconds
};

} // namespace stepsim::engine
