#include "sim/engine/activities.hpp"

#include <simgrid/s4u/Comm.hpp>

#include <cstdint>

namespace stepsim::engine {

sg4::ExecPtr LiveActivities::delay(int rank, double seconds) const
{
  return sg4::Exec::init()->set_host(host(rank))->set_flops_amount(seconds * kHostSpeed);
}

size_t LiveActivities::launch(sg4::ActivityPtr activity, Role role, const Transfer& transfer)
{
  const size_t slot = occupy(std::move(activity), role, transfer);
  ++started_;
  return slot;
}

size_t LiveActivities::transfer(int src_rank, int dst_rank, double bytes, Role role)
{
  const Transfer moved{src_rank, dst_rank, bytes, 0};
  return launch(sg4::Comm::sendto_init(host(src_rank), host(dst_rank))->set_payload_size(static_cast<uint64_t>(bytes)),
                role, moved);
}

size_t LiveActivities::occupy(sg4::ActivityPtr activity, Role role, const Transfer& transfer)
{
  size_t slot;
  if (free_slots_.empty()) {
    slot = live_.size();
    live_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  live_[slot] = Live{activity, role, transfer};
  live_[slot].transfer.start = now();
  activity->set_data(reinterpret_cast<void*>(slot + 1));
  activity->start();
  return slot;
}

void LiveActivities::cancel(size_t slot)
{
  sg4::ActivityPtr& old = live_[slot].activity;
  old->set_data(nullptr);
  old->suspend(); // a cancelled exec would keep its share of the host until the engine's next step
  old->cancel();
  cancelled_.push_back(std::move(old));
  free_slots_.push_back(slot);
}

std::optional<LiveActivities::Live> LiveActivities::completed(const sg4::Activity& activity)
{
  // Checked first: a chain restarted for interference cancels its exec, whose callbacks (one
  // at once, nested in the restart, one at the engine's next step) carry no slot and must
  // touch nothing.
  auto slot = reinterpret_cast<size_t>(activity.get_data<void>());
  if (slot == 0 || slot > live_.size())
    return std::nullopt;
  // An activity must outlive its own completion callback; the previous one is done by now.
  finished_.clear();
  Live done = live_[slot - 1];
  finished_.push_back(std::move(live_[slot - 1].activity));
  free_slots_.push_back(slot - 1);
  return done;
}

} // namespace stepsim::engine
