// Shadow flows: the traffic of the ranks a representative stands for, replayed where it shares
// links with the simulated ranks' traffic.
//
// In reduced fidelity one rank per stage stands for its tensor-, context- and data-parallel
// peers, which run the same program at the same time. Leaving their transfers out is exact only
// where they cross no link on which they would take bandwidth from the simulated flows: on Wi-Fi
// air, an oversubscribed leaf uplink, a chiplet mesh link or a NIC shared by two GPUs they do.
// Shadows checks that on the built platform's routes, once before the replay: it takes the
// flows of the step (the simulated ranks' and their peers': each collective's member pairs over
// all its groups' copies, each transfer and its images, Workload::transfer_copies) and shares the
// links max-min fairly (the progressive filling of Bertsekas & Gallager, Data Networks, §6.5.2),
// once with the peers' flows and once without them: for every flow of the step at once, and for
// each collective group and each transfer on its own (whose traffic may run apart from the rest:
// taken all at once, a rank's data-parallel ring on the NIC its pipeline send takes already halves
// the send's share and would hide the uplink its peers' sends saturate). A simulated flow that
// gets less bandwidth with its peers' flows than without them has been short-changed by the links
// it saturated there; every collective group and transfer whose peers' flows cross one of those
// links is replayed with them: the non-simulated members of the group and its copies send their
// own steps' data as the simulated member sends its, and the step ends when all have arrived (a
// transfer: when its images have). Where no simulated flow is short-changed the reduced replay is
// what it was, flow for flow. Where the peers are not alike (a collective run step by
// step whose members reach their peers over routes of other latency or bandwidth, a transfer whose
// images do), no member can stand for the others, and the replay is run at full fidelity instead
// (symmetry_broken()).
#pragma once

#include "models/collectives/collective.hpp"
#include "sim/core/task_graph.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stepsim {
class CollectiveTiming;
}

namespace stepsim::engine {

struct SimulatedRanks;

class Shadows {
public:
  // `enabled` false (full fidelity, the analytic network): nothing is shadowed.
  Shadows(const Workload& w, CollectiveTiming& timing, const CollectiveAlgorithm& algorithm,
          const SimulatedRanks& simulated, bool enabled);

  // Whether the collectives of `group` are replayed with their peers' flows.
  bool group(int group) const { return group >= 0 && static_cast<size_t>(group) < groups_.size() && groups_[static_cast<size_t>(group)]; }
  // The images of a simulated rank's transfer to replay beside it, or none.
  const std::vector<std::pair<int, int>>* transfer(int src, int dst) const;

  // For the report: links on which a simulated flow was short-changed, and the groups and
  // transfers replayed with shadows.
  int short_changed_links() const { return short_changed_links_; }
  int shadowed_groups() const { return shadowed_groups_; }
  int shadowed_transfers() const { return static_cast<int>(transfers_.size()); }
  // Why one simulated member cannot stand for its peers here, or "" (then the replay runs every
  // rank instead: replay.hpp SymmetryBroken).
  const std::string& symmetry_broken() const { return symmetry_broken_; }

private:
  std::vector<char> groups_;
  std::map<std::pair<int, int>, const std::vector<std::pair<int, int>>*> transfers_;
  int short_changed_links_ = 0, shadowed_groups_ = 0;
  std::string symmetry_broken_;
};

} // namespace stepsim::engine
