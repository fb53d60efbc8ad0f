#include "sim/engine/checkpoint_replay.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <stdexcept>

namespace stepsim {

namespace sg4 = simgrid::s4u;

CheckpointReplay::CheckpointReplay(sg4::NetZone* root, const CheckpointReplayPlan& plan)
{
  if (plan.bytes.size() != plan.platform.nodes.size())
    throw std::logic_error("a checkpoint replay needs the bytes of every node");
  const HostSidePlatform platform = build_host_side(root, plan.platform, "checkpoint-");
  // One coordinator: the gather, then every GPU's copy to host memory at once, then every
  // node's write at once; each phase ends with its last transfer, as the ranks' barrier does.
  sg4::Actor::create("checkpoint", platform.storage, [this, platform, &plan] {
    if (plan.gather_bytes > 0)
      sg4::this_actor::sleep_for(plan.gather_bytes / plan.gather_Bps);
    result_.gather_s = sg4::Engine::get_clock();
    std::vector<sg4::CommPtr> copies;
    for (size_t n = 0; n < plan.bytes.size(); ++n)
      for (size_t g = 0; g < plan.bytes[n].size(); ++g)
        if (plan.bytes[n][g] > 0)
          copies.push_back(sg4::Comm::sendto_async(platform.gpus[n].at(g), platform.cpu[n],
                                                   static_cast<uint64_t>(std::ceil(plan.bytes[n][g]))));
    for (auto& c : copies)
      c->wait();
    result_.snapshot_s = sg4::Engine::get_clock() - result_.gather_s;
    std::vector<sg4::CommPtr> writes;
    for (size_t n = 0; n < plan.bytes.size(); ++n) {
      const double node = std::accumulate(plan.bytes[n].begin(), plan.bytes[n].end(), 0.0);
      if (node > 0)
        writes.push_back(
            sg4::Comm::sendto_async(platform.cpu[n], platform.storage, static_cast<uint64_t>(std::ceil(node))));
    }
    for (auto& c : writes)
      c->wait();
    result_.write_s = sg4::Engine::get_clock() - result_.gather_s - result_.snapshot_s;
  });
}

} // namespace stepsim
